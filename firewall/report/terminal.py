"""A decided run as the terminal shows it: one row per eval, the checks of the ones that
need a look, and the closing lines (counts, what changed on disk, where the report is)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import click

from firewall.artefact import Artefact, EvalReport
from firewall.diagnostics import describe_flip, describe_hint, format_check
from firewall.policy import Status
from firewall.text import MISSING, columns, number, percent

_COLOURS = {
    Status.PASS: "green",
    Status.FAIL: "red",
    Status.ERROR: "magenta",
    Status.QUARANTINE: "yellow",
    Status.QUARANTINED: "cyan",
}
_HEADER = ("STATUS", "EVAL", "MEDIAN", "IQR", "K", "PASS", "REASON")


def table(
    reports: Sequence[EvalReport], *, colour: bool | None = None, verbose: bool = False
) -> str:
    """The run as a terminal table: status, eval, median, IQR, k, pass rate, reason.

    Coloured on a terminal unless ``NO_COLOR`` is set (no-color.org); a status
    marked ``*`` does not block (a non-blocking eval's FAIL or ERROR).
    """
    if colour is None:
        colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    rows = [_row(report) for report in reports]
    header, *lines = columns([_HEADER, *rows], ragged_last=True)
    out = [header]
    for report, line in zip(reports, lines, strict=True):
        if colour:
            label = line.split(" ", 1)[0]
            line = click.style(label, fg=_COLOURS[report.status], bold=True) + line[len(label) :]
        out.append(line)
        out.extend(f"    {detail}" for detail in _details(report, verbose=verbose))
    return "\n".join(out)


def _row(report: EvalReport) -> tuple[str, ...]:
    # An errored probe's numbers come from the few trials that scored: not worth a glance.
    hide = report.status is Status.ERROR
    marker = "*" if _nonblocking_failure(report) else ""
    return (
        report.status.label + marker,
        report.id,
        MISSING if hide else number(report.stats.median),
        MISSING if hide else number(report.stats.iqr),
        str(len(report.trials) or report.k),
        MISSING if hide else percent(report.stats.pass_rate),
        report.reason,
    )


def _evidence(report: EvalReport) -> list[str]:
    """With -v: the first errored trial's traceback and output, and an import's time."""
    lines = []
    imported = [t.import_s for t in report.trials if t.import_s is not None]
    if imported:
        lines.append(
            f"module imported in {number(max(imported))} s (apart from the trials' durations)"
        )
    blocking = [t for t in report.trials if t.blocked_s is not None]
    if blocking:
        worst = max(blocking, key=lambda t: t.blocked_s or 0.0)
        lines.append(
            f"{len(blocking)} of {len(report.trials)} trials held their worker's event loop "
            f"without awaiting, trial {worst.index} for {number(worst.blocked_s)} s "
            "(blocking code in an async def); the trials beside them were paused"
        )
    first = next((t for t in report.trials if t.error is not None), None)
    if first is None:
        return lines
    for title, text in (("traceback", first.traceback), ("output", first.output)):
        if text:
            lines.append(f"trial {first.index} (seed {first.seed}) {title}:")
            lines.extend(f"  {line}" for line in text.splitlines())
    return lines


def _nonblocking_failure(report: EvalReport) -> bool:
    return not report.blocking and report.status in (Status.FAIL, Status.ERROR)


def _details(report: EvalReport, *, verbose: bool) -> list[str]:
    lines: list[str] = []
    if verbose or report.status in (Status.FAIL, Status.ERROR, Status.QUARANTINE):
        lines.extend(format_check(check) for check in report.checks)
    if verbose:
        lines.extend(_evidence(report))
    if verbose and report.stats.p50_latency_ms is not None:
        stats = report.stats
        lines.append(
            f"latency p50 {number(stats.p50_latency_ms)} ms, p95 {number(stats.p95_latency_ms)} ms"
        )
    lines.extend(f"likely: {describe_hint(hint)}" for hint in report.hints[:3])
    if report.status is not Status.PASS:
        if report.flips:
            lines.append(
                "flipping cases: " + ", ".join(describe_flip(flip) for flip in report.flips[:5])
            )
        drifting = [name for name, rate in report.drift.items() if rate > 0]
        if drifting:
            lines.append(f"drifting fields: {', '.join(drifting[:5])}")
    return lines


def summary_line(artefact: Artefact) -> str:
    s = artefact.summary
    parts = [
        f"{s.pass_} passed",
        f"{s.fail} failed",
        f"{s.quarantine} newly quarantined",
        f"{s.quarantined} in quarantine",
        f"{s.error} errored",
    ]
    nonblocking = sum(1 for r in artefact.evals if _nonblocking_failure(r))
    note = f" (* {nonblocking} non-blocking)" if nonblocking else ""
    state = "" if artefact.run.complete else " -- INTERRUPTED, results incomplete"
    return (
        f"{', '.join(parts)}{note}; base seed {artefact.run.base_seed}; "
        f"exit {int(s.exit_code)}{state}"
    )


def adaptivity(artefact: Artefact) -> str:
    """What adaptive K did to this run's trials, in one phrase ("" when nothing)."""
    stops = [report.stop for report in artefact.evals if report.stop is not None]
    early = [stop for stop in stops if stop.why == "settled"]
    longer = [stop for stop in stops if stop.trials > stop.planned]
    parts = []
    if early:
        saved = sum(stop.planned - stop.trials for stop in early)
        parts.append(f"{_trials(saved)} saved ({_evals(len(early))} settled early)")
    if longer:
        added = sum(stop.trials - stop.planned for stop in longer)
        parts.append(f"{_trials(added)} added ({_evals(len(longer))} near a line)")
    return f"adaptive K: {', '.join(parts)}" if parts else ""


def _trials(count: int) -> str:
    return f"{count} trial{'s' if count != 1 else ''}"


def _evals(count: int) -> str:
    return f"{count} eval{'s' if count != 1 else ''}"


def closing_lines(
    artefact: Artefact,
    *,
    added: Sequence[str],
    registry: str,
    report_path: Path,
    dry_run: bool,
    candidates: Mapping[str, str] | None = None,
    written: bool = True,
) -> list[str]:
    """The counts, the registry entries written (or that a dry run would write), the report."""
    lines = [summary_line(artefact)]
    if artefact.run.partial:
        lines.append(f"partial gate (--allow-partial): {'; '.join(artefact.run.partial)}")
    if note := adaptivity(artefact):
        lines.append(f"{note}: {artefact.summary.trials} run, k planned {artefact.summary.planned}")
    lines += [
        f"candidate {eval_id}: recorded {where}; the nightly confirms or dismisses it "
        "on the default branch"
        for eval_id, where in (candidates or {}).items()
    ]
    if dry_run:
        lines += [f"quarantine {eval_id}: would be added to {registry}" for eval_id in added]
        lines.append("dry run: no file was changed")
    else:
        lines += [f"quarantined {eval_id}: added to {registry}" for eval_id in added]
        lines.append(f"report: {report_path}" if written else "report: not written (below: why)")
    return lines
