"""The ``firewall`` command: one module per subcommand, each a thin shell over the core."""

from __future__ import annotations

import gc
import importlib
import io
import signal
import sys
import traceback
from types import FrameType
from typing import Any

import click

from firewall import output
from firewall._version import __version__
from firewall.errors import ExitCode, FirewallError

# Each command's module is imported only when that command runs: a CI step pays for the
# imports of `firewall run`, not of every command, and `firewall --help` for none of them
# (it lists them from SUMMARIES; tests/cli/test_help.py holds each to its docstring).
COMMANDS = {
    "run": "firewall.cli.run:run",
    "probe": "firewall.cli.probe:probe",
    "gate": "firewall.cli.gate:gate",
    "nightly": "firewall.cli.nightly:nightly_command",
    "propose": "firewall.cli.propose:propose_command",
    "status": "firewall.cli.status:status",
    "quarantine": "firewall.cli.quarantine:quarantine",
    "calibrate": "firewall.cli.calibrate:calibrate_command",
    "list": "firewall.cli.listing:list_evals",
    "replay": "firewall.cli.replay:replay",
    "report": "firewall.cli.report:report",
    "schema": "firewall.cli.schema:schema",
    "history": "firewall.cli.history_cmd:history_group",
    "init": "firewall.cli.init:init",
}

SUMMARIES = {
    "calibrate": "Suggest `flakiness` per eval and overall from each eval's within-run spread.",
    "gate": "Decide the evals probed in PARTS (from `firewall probe --out`), as `run` would.",
    "history": "Maintain the append-only history file.",
    "init": "Scaffold firewall.toml, evals/example_eval.py and two GitHub workflows at the "
    "repository's root (here, outside a git repository).",
    "list": "List the evals a run would probe, with effective settings and source location.",
    "nightly": "Re-probe every quarantined eval and move it toward release.",
    "probe": "Run the trials of the selected evals and write them to --out; decide nothing.",
    "propose": "Propose the changes `firewall nightly` made to the registry as one pull request.",
    "quarantine": "Add, release and list quarantine entries by hand.",
    "replay": "Run one trial of EVAL_ID with --seed and print what it reported.",
    "report": "Render ARTEFACT, a saved firewall-report.json, as Markdown, JUnit XML or HTML.",
    "run": "Probe each selected eval K times and gate on the result.",
    "schema": "Print JSON Schemas: the artefact, the registry and the trial result.",
    "status": "Show every quarantined eval: age, reason, numbers, streak, trend, issue, owner.",
}
"""Each command's short help, as click makes it from the command's docstring."""


class Main(click.Group):
    """Loads commands on demand; turns expected errors into one line and an exit code.

    Every message goes out through the sink, click's own usage errors too: they
    quote the arguments, and an argument may carry a forged workflow command.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of ``--help``, as click writes it, without importing them."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, _shorten(SUMMARIES[name], limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        _collect_again()
        return command

    def main(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("standalone_mode", True)
        if kwargs.get("args", args[0] if args else None) is None:
            _import_uncollected()  # the process's own command line, not a test's CliRunner
        previous = signal.signal(signal.SIGTERM, _terminate)
        try:
            return super().main(*args, **kwargs)
        finally:
            signal.signal(signal.SIGTERM, previous)
            _collect_again()

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:  # e.g. an unknown option before the command
            _show(exc)
            raise click.exceptions.Exit(exc.exit_code) from None

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except FirewallError as exc:
            output.error(str(exc))
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            output.error("interrupted")
            ctx.exit(ExitCode.INTERRUPTED)
        except click.ClickException as exc:  # a usage error (exit 2)
            _show(exc)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise  # click's own deliberate exits
        except Exception as exc:
            # A bug, or an OS failure nobody foresaw: never exit 1, which CI reads as a
            # failing eval. One line to say what happened, then the traceback to report.
            output.error(
                f"internal error: {type(exc).__name__}: {exc}; this is a bug in the firewall, "
                "not a failing eval; please report it with the traceback below"
            )
            output.note(traceback.format_exc().rstrip("\n"))
            ctx.exit(ExitCode.INTERNAL)


# A command's imports make a few hundred thousand objects (classes, functions, pydantic's
# validators) that live as long as the process, and the cyclic collector walked them over
# and over while they were being made: a tenth of `firewall gate`'s CPU. So a `firewall`
# process imports its command with the collector off, then moves what the imports made
# out of its reach (``gc.freeze``: never garbage, never walked again) and turns it back on
# for the command's own work. Only for the process's own command line: a test's CliRunner
# invokes commands in a long-lived process whose objects are not all the imports'.
_paused = False


def _import_uncollected() -> None:
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def _collect_again() -> None:
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


def _shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word, with "...", as click 8 cuts a
    command's short help (``click.utils.make_default_short_help``, deprecated there)."""
    words = text.split()
    total = 0
    for i, word in enumerate(words):
        total += len(word) + (i > 0)
        if total > limit:
            break
        if word.endswith("."):
            return " ".join(words[: i + 1])
        if total == limit and i != len(words) - 1:
            break
    else:
        return " ".join(words)
    total += len("...")
    while i > 0:
        total -= len(words[i]) + (i > 0)
        if total <= limit:
            break
        i -= 1
    return " ".join(words[:i]) + "..."


def _show(exc: click.ClickException) -> None:
    """What click would print for ``exc`` (usage, hint, error), said through the sink."""
    shown = io.StringIO()
    exc.show(file=shown)
    output.note(shown.getvalue().rstrip("\n"))


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="firewall")
def main() -> None:
    """Probe non-deterministic evals K times, quarantine the ones that scatter,
    and hard-gate only the stable ones.

    \b
    Typical use:
      firewall list                 what would run, with effective settings
      firewall run                  probe + gate every eval (CI step)
      firewall run triage --k 15    one eval, more trials
      firewall replay triage --seed 1234   one trial, raw result

    Exit codes: 0 nothing blocking failed (quarantines are not failures),
    1 a blocking eval failed, 2 usage or configuration error, 3 a blocking
    eval errored, 4 an internal error of the firewall itself, 5 no eval was
    selected, 130 interrupted.
    """


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
