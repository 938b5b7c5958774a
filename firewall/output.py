"""All terminal output: results on stdout, progress and warnings on stderr.

Nothing else in the package prints, so tests capture one place and CI
annotations cannot be forged by a stray print of eval output.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from firewall.policy import Status, fmt
from firewall.report.artefact import Artefact, EvalReport

if TYPE_CHECKING:
    from firewall.pipeline import Outcome

_COLOURS = {
    Status.PASS: "green",
    Status.FAIL: "red",
    Status.ERROR: "magenta",
    Status.QUARANTINE: "yellow",
    Status.QUARANTINED: "cyan",
}


def echo(text: str = "") -> None:
    click.echo(text)


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


def number(value: float | None) -> str:
    return "-" if value is None else fmt(value)


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def table(reports: Sequence[EvalReport], *, colour: bool | None = None, verbose: bool = False) -> str:
    """The run as a terminal table: status, eval, median, IQR, k, pass rate, reason."""
    colour = sys.stdout.isatty() if colour is None else colour
    header = ("STATUS", "EVAL", "MEDIAN", "IQR", "K", "PASS", "REASON")
    rows = [
        (
            r.status.label + ("" if r.blocking or r.status is not Status.FAIL else "*"),
            r.id,
            number(r.stats.median),
            number(r.stats.iqr),
            str(len(r.trials) or r.k),
            percent(r.stats.pass_rate),
            r.reason,
        )
        for r in reports
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)) + "  " + header[-1]]
    for report, row in zip(reports, rows):
        cells = [cell.ljust(width) for cell, width in zip(row, widths)]
        if colour:
            cells[0] = click.style(cells[0], fg=_COLOURS[report.status], bold=True)
        lines.append("  ".join(cells) + "  " + row[-1])
        if verbose or (report.blocking and report.status in (Status.FAIL, Status.ERROR)):
            lines.extend(f"    {check}" for check in report.checks)
    return "\n".join(lines)


def summary_line(artefact: Artefact) -> str:
    s = artefact.summary
    parts = [f"{s.pass_} passed", f"{s.fail} failed", f"{s.quarantine} newly quarantined",
             f"{s.quarantined} in quarantine", f"{s.error} errored"]
    nonblocking = sum(1 for r in artefact.evals if not r.blocking and r.status is Status.FAIL)
    note = f" (* {nonblocking} non-blocking)" if nonblocking else ""
    state = "" if artefact.run.complete else " -- INTERRUPTED, results incomplete"
    return f"{', '.join(parts)}{note}; base seed {artefact.run.base_seed}; exit {s.exit_code}{state}"


def show_outcome(outcome: Outcome, *, fmt: str, verbose: bool, registry: str) -> None:
    """A decided run as the terminal shows it, or as the artefact JSON."""
    artefact = outcome.artefact
    if fmt == "json":
        echo(artefact.to_json().rstrip("\n"))
        return
    echo(table(artefact.evals, verbose=verbose) if artefact.evals else "no evals selected")
    echo()
    echo(summary_line(artefact))
    for eval_id in outcome.new_quarantines:
        echo(f"quarantined {eval_id}: added to {registry}")
    if outcome.report_path is not None:
        echo(f"report: {outcome.report_path}")
    else:
        echo("dry run: no file was changed")
