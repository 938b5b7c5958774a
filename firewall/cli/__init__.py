"""The ``firewall`` command: one module per subcommand, each a thin shell over the core."""

from __future__ import annotations

import signal
import sys
from types import FrameType

import click

from firewall._version import __version__
from firewall.cli import (
    calibrate,
    gate,
    history_cmd,
    init,
    listing,
    nightly,
    probe,
    quarantine,
    replay,
    report,
    run,
    schema,
    status,
)
from firewall.errors import FirewallError
from firewall.output import error


class Main(click.Group):
    """Turns expected errors into one line and an exit code, at one boundary."""

    def main(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("standalone_mode", True)
        previous = signal.signal(signal.SIGTERM, _terminate)
        try:
            return super().main(*args, **kwargs)
        finally:
            signal.signal(signal.SIGTERM, previous)

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except FirewallError as exc:
            error(str(exc))
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            error("interrupted")
            ctx.exit(130)


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

    Exit codes: 0 nothing blocking failed, 1 a blocking eval failed,
    2 usage or configuration error, 3 a blocking eval errored, 130 interrupted.
    """


for command in (
    run.run,
    probe.probe,
    gate.gate,
    nightly.nightly_command,
    status.status,
    quarantine.quarantine,
    calibrate.calibrate_command,
    listing.list_evals,
    replay.replay,
    report.report,
    schema.schema,
    history_cmd.history_group,
    init.init,
):
    main.add_command(command)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
