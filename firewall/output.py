"""All terminal output: results on stdout, progress and warnings on stderr.

Nothing else in the package prints, so tests capture one place and CI
annotations cannot be forged by a stray print of eval output.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import click

from firewall.artefact import Artefact, EvalReport
from firewall.diagnostics import describe_flip, describe_hint, format_check
from firewall.policy import Status
from firewall.text import fmt

if TYPE_CHECKING:
    from firewall.pipeline.run import Outcome
    from firewall.report.calibrate import Calibration
    from firewall.report.status import StatusView
    from firewall.runner import Task
    from firewall.runner.trial import TrialRecord

_COLOURS = {
    Status.PASS: "green",
    Status.FAIL: "red",
    Status.ERROR: "magenta",
    Status.QUARANTINE: "yellow",
    Status.QUARANTINED: "cyan",
}


def echo(text: str = "") -> None:
    click.echo(text)


def echo_untrusted(text: str) -> None:
    """Text that carries what evals printed: in a GitHub job, inside a stop-commands block.

    Reasons quote stderr tails and error messages; no line of them may ever be
    taken by the runner as a workflow command.
    """
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from firewall.github.annotations import stop_commands

        text = stop_commands(text)
    click.echo(text)


def annotate(lines: Sequence[str]) -> None:
    """GitHub workflow commands, already escaped by firewall.github.annotations."""
    for line in lines:
        click.echo(line)


def note(text: str) -> None:
    """A side remark for people (e.g. what a dry run would do): stderr, so stdout stays data."""
    click.echo(text, err=True)


def warn(text: str) -> None:
    click.echo(f"firewall: warning: {text}", err=True)


def error(text: str) -> None:
    click.echo(f"firewall: error: {text}", err=True)


class Progress:
    """A one-line trial counter on stderr, shown only when stderr is a terminal."""

    def __init__(self, total: int, *, enabled: bool | None = None) -> None:
        self.total = total
        self.done = 0
        self.errors = 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled

    def step(self, eval_id: str, errored: bool) -> None:
        self.done += 1
        self.errors += errored
        if self.enabled:
            width = len(str(self.total))
            line = f"\r[{self.done:>{width}}/{self.total}] {self.errors} errored  last: {eval_id}"
            click.echo(line[:100].ljust(100), err=True, nl=False)

    def close(self) -> None:
        if self.enabled and self.done:
            click.echo("\r" + " " * 100 + "\r", err=True, nl=False)


@contextlib.contextmanager
def progress(total: int) -> Iterator[Callable[[Task, TrialRecord], None]]:
    """A callback for the runner that counts trials on stderr, cleared when the block ends."""
    counter = Progress(total)
    try:
        yield lambda task, record: counter.step(task.spec.id, record.errored)
    finally:
        counter.close()


def number(value: float | None) -> str:
    return "-" if value is None else fmt(value)


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def table(
    reports: Sequence[EvalReport], *, colour: bool | None = None, verbose: bool = False
) -> str:
    """The run as a terminal table: status, eval, median, IQR, k, pass rate, reason."""
    colour = sys.stdout.isatty() if colour is None else colour
    header = ("STATUS", "EVAL", "MEDIAN", "IQR", "K", "PASS", "REASON")
    rows = [
        (
            r.status.label + ("" if r.blocking or r.status is not Status.FAIL else "*"),
            r.id,
            # An errored probe's numbers come from the few trials that scored: not worth a glance.
            "-" if r.status is Status.ERROR else number(r.stats.median),
            "-" if r.status is Status.ERROR else number(r.stats.iqr),
            str(len(r.trials) or r.k),
            "-" if r.status is Status.ERROR else percent(r.stats.pass_rate),
            r.reason,
        )
        for r in reports
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False)) + "  " + header[-1]
    ]
    for report, row in zip(reports, rows, strict=True):
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        if colour:
            cells[0] = click.style(cells[0], fg=_COLOURS[report.status], bold=True)
        lines.append("  ".join(cells) + "  " + row[-1])
        if verbose or report.status in (Status.FAIL, Status.ERROR, Status.QUARANTINE):
            lines.extend(f"    {format_check(check)}" for check in report.checks)
        if report.hints:
            lines.extend(f"    likely: {describe_hint(hint)}" for hint in report.hints[:3])
        if report.flips and report.status is not Status.PASS:
            flips = ", ".join(describe_flip(flip) for flip in report.flips[:5])
            lines.append(f"    flipping cases: {flips}")
        drifting = [name for name, rate in report.drift.items() if rate > 0]
        if drifting and report.status is not Status.PASS:
            lines.append(f"    drifting fields: {', '.join(drifting[:5])}")
    return "\n".join(lines)


def summary_line(artefact: Artefact) -> str:
    s = artefact.summary
    parts = [
        f"{s.pass_} passed",
        f"{s.fail} failed",
        f"{s.quarantine} newly quarantined",
        f"{s.quarantined} in quarantine",
        f"{s.error} errored",
    ]
    nonblocking = sum(1 for r in artefact.evals if not r.blocking and r.status is Status.FAIL)
    note = f" (* {nonblocking} non-blocking)" if nonblocking else ""
    state = "" if artefact.run.complete else " -- INTERRUPTED, results incomplete"
    return (
        f"{', '.join(parts)}{note}; base seed {artefact.run.base_seed}; exit {s.exit_code}{state}"
    )


def show_outcome(outcome: Outcome, *, fmt: str, verbose: bool, registry: str) -> None:
    """A decided run as the terminal shows it, or as the artefact JSON."""
    artefact = outcome.artefact
    if fmt == "json":
        echo(artefact.to_json().rstrip("\n"))  # JSON escapes line breaks: no line can be a command
        return
    echo_untrusted(
        table(artefact.evals, verbose=verbose) if artefact.evals else "no evals selected"
    )
    echo()
    echo(summary_line(artefact))
    for eval_id in outcome.new_quarantines:
        if outcome.report_path is None:
            echo(f"quarantine {eval_id}: would be added to {registry}")
        else:
            echo(f"quarantined {eval_id}: added to {registry}")
    if outcome.report_path is not None:
        echo(f"report: {outcome.report_path}")
    else:
        echo("dry run: no file was changed")


def status_text(view: StatusView) -> str:
    """The triage view for people."""
    lines = []
    if not view.quarantined:
        lines.append(f"no eval is quarantined ({view.registry})")
    else:
        lines.append(
            f"{len(view.quarantined)} quarantined in {view.registry} "
            f"(trend: last {view.trend_days} days)"
        )
        header = ("EVAL", "AGE", "MEDIAN", "IQR", "STREAK", "TREND", "ISSUE", "OWNER", "REVIEW")
        rows = [
            (
                q.id,
                f"{q.age_days}d",
                number(q.median),
                number(q.iqr),
                f"{q.streak}/{q.release_after}",
                q.sparkline or "-",
                q.issue_url or (f"#{q.issue}" if q.issue else "-"),
                f"@{q.owner}" if q.owner else "-",
                "OVERDUE" if q.overdue else (f"by {q.review_by:%Y-%m-%d}" if q.review_by else "-"),
            )
            for q in view.quarantined
        ]
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        lines.append("")
        for q in view.quarantined:
            gone = "" if q.defined else " [no longer defined: release it]"
            lines.append(f"  {q.id} ({q.source}, since {q.since:%Y-%m-%d}){gone}: {q.reason}")
            if q.drifting:
                fields = ", ".join(
                    f"{name} {fmt(rate)}"
                    for name, rate in sorted(q.drifting.items(), key=lambda item: -item[1])[:5]
                )
                lines.append(f"    drifting fields: {fields}")
    if view.overdue:
        lines.append("")
        lines.append(f"review overdue: {', '.join(view.overdue)} (a flag, never a failure)")
    lines.append("")
    if view.last_run is None:
        lines.append("last run: none recorded yet")
    else:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(view.last_run.counts.items()))
        lines.append(f"last run: {view.last_run.mode} at {view.last_run.build_ts}: {counts}")
    return "\n".join(lines)


def calibration_text(result: Calibration, *, prefix: str, history: str, min_points: int) -> str:
    """Suggestions as a TOML snippet with the cost of each choice in comments."""
    overall = result.overall
    lines = [f"# P80 of the IQRs of {overall.points} probes in {history}"]
    if prefix:
        lines.append(f"[{prefix.rstrip('.')}]")
    if overall.flakiness is None:
        lines.append(
            f"# not enough history for an overall suggestion: {overall.points} probes, "
            f"need {min_points}"
        )
    else:
        lines.append(
            f"flakiness = {overall.flakiness:g}  # would have quarantined "
            f"{percent(overall.quarantined_share)} of past probes "
            f"(now {overall.current:g}: {percent(overall.current_share)})"
        )
    lines.append("")
    lines.append("# per eval: set `flakiness` in its evals entry or @firewall.eval(flakiness=...)")
    width = max((len(s.eval_id or "") for s in result.evals), default=0)
    for s in result.evals:
        name = (s.eval_id or "").ljust(width)
        if s.flakiness is None:
            lines.append(f"# {name}  not enough history: {s.points} probes, need {min_points}")
        else:
            lines.append(
                f"# {name}  flakiness = {s.flakiness:g}  # {s.points} probes; would "
                f"have quarantined {percent(s.quarantined_share)} "
                f"(now {s.current:g}: {percent(s.current_share)})"
            )
    return "\n".join(lines)
