"""A decided run as the terminal shows it: one row per eval, the checks of the ones that
need a look, and the closing lines (counts, what changed on disk, where the report is)."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import click

from firewall.artefact import Artefact, EvalReport
from firewall.diagnostics import describe_flip, describe_hint, format_check
from firewall.policy import Status
from firewall.report.selection import select
from firewall.text import MISSING, number, percent

_COLOURS = {
    Status.PASS: "green",
    Status.FAIL: "red",
    Status.ERROR: "magenta",
    Status.QUARANTINE: "yellow",
    Status.QUARANTINED: "cyan",
}
_HEADER = ("STATUS", "EVAL", "MEDIAN", "IQR", "K", "PASS", "REASON")


LOG_WIDTH = 120
"""The width of a table printed to a CI log, where there is no terminal to measure."""
MIN_ID = 20  # an id cut shorter than this no longer says which test it is
MIN_REASON = 24  # narrower than this, the reason goes on lines of its own below the row
REASON_LINES = 3  # a reason longer than this many lines is cut: -v and the report have it all


def width() -> int:
    """The columns a table may use: the terminal's when stdout is one, ``COLUMNS`` when
    set, else ``LOG_WIDTH``.

    In a CI log a line has no width to fit (the viewer wraps it), but a table must
    pick one to line up; 120 columns keep a row readable beside the log's
    timestamps, and an id cut in the middle stays recognisable (the report, the
    job summary and the annotations carry it whole).
    """
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return shutil.get_terminal_size((LOG_WIDTH, 24)).columns
    return LOG_WIDTH


def table(
    reports: Sequence[EvalReport],
    *,
    colour: bool | None = None,
    verbose: bool = False,
    columns: int | None = None,
) -> str:
    """The run as a terminal table: status, eval, median, IQR, k, pass rate, reason.

    Coloured on a terminal unless ``NO_COLOR`` is set (no-color.org); a status
    marked ``*`` does not block (a non-blocking eval's FAIL or ERROR). Beyond a
    screenful of evals the rows are those that need a look and a last line counts
    the rest (``firewall.report.selection``); ``verbose`` shows every eval.

    Lines fit in ``columns`` (default: ``width()``): the id column is as wide as
    the longest id shown, or what is left beside the numbers and a reason, with
    longer ids cut in the middle; the reason wraps under its column, in at most
    ``REASON_LINES`` lines unless ``verbose``. Check lines are not cut.
    """
    if colour is None:
        colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    columns = width() if columns is None else columns
    chosen = select(reports, every=verbose)
    if not chosen.shown:  # beyond a screenful, and nothing needs a look
        return _fold(f"all {len(reports)} evals PASS: -v or --format json shows every one", columns)
    rows = [_row(report) for report in chosen.shown]
    fixed = [_HEADER[:-1], *(row[:-1] for row in rows)]  # all but the reason
    ids = _cut_ids([row[1] for row in rows], _id_width(fixed, [row[-1] for row in rows], columns))
    fixed = [fixed[0], *((cells[0], ids[cells[1]], *cells[2:]) for cells in fixed[1:])]
    widths = [max(len(cells[i]) for cells in fixed) for i in range(len(fixed[0]))]
    header, *prefixes = ["  ".join(map(str.ljust, cells, widths)) + "  " for cells in fixed]
    out = [(header + _HEADER[-1]).rstrip()]
    for report, prefix, row in zip(chosen.shown, prefixes, rows, strict=True):
        lines = _with_reason(prefix, row[-1], columns, verbose=verbose)
        if colour:
            label = row[0]
            lines[0] = (
                click.style(label, fg=_COLOURS[report.status], bold=True) + lines[0][len(label) :]
            )
        out.extend(lines)
        out.extend(f"    {detail}" for detail in _details(report, verbose=verbose))
    if chosen.rest:
        counted = f"and {chosen.counted()}, not shown: -v or --format json shows every eval"
        out.append(_fold(counted, columns))
    return "\n".join(out)


def _fold(text: str, columns: int) -> str:
    return "\n".join(textwrap.wrap(text, max(columns, MIN_REASON), break_on_hyphens=False))


def _with_reason(prefix: str, reason: str, columns: int, *, verbose: bool) -> list[str]:
    """A row's lines: the reason wrapped under its column, or below the row when the
    column would be too narrow to read."""
    beside = _wrap(reason, columns - len(prefix), verbose=verbose)
    if beside is None:
        below = _wrap(reason, columns - 4, verbose=verbose) or []
        return [prefix.rstrip(), *(f"    {piece}" for piece in below)]
    first, *more = beside
    return [(prefix + first).rstrip(), *(" " * len(prefix) + piece for piece in more)]


def _id_width(cells: Sequence[Sequence[str]], reasons: Sequence[str], columns: int) -> int:
    """The id column's width: its longest id, or less where the line would pass
    ``columns``. Beside the numbers, the id and the reason share what is left, the
    reason at least half of it (a reason read in one line is worth more than the
    middle of a long id), and the id never less than ``MIN_ID``."""
    longest = max(len(line[1]) for line in cells)
    numbers = sum(max(len(line[i]) for line in cells) + 2 for i in range(len(cells[0])) if i != 1)
    left = columns - numbers - 2
    reason = min(max((len(r) for r in reasons), default=0), max(MIN_REASON, left // 2))
    return max(min(longest, left - reason), MIN_ID)


def _cut_ids(ids: Sequence[str], limit: int) -> dict[str, str]:
    """Each id as it fits in ``limit`` columns, cut in the middle (its start says where
    the test lives, its end which test it is).

    Ids that would read alike once cut differ in what the cut hid: they keep a
    window on the first place they differ, between two ellipses. Only if they
    still read alike (two windows that happen to match) are they given more room.
    """
    while True:
        shown = {eval_id: _cut(eval_id, limit) for eval_id in ids}
        alike: dict[str, list[str]] = {}
        for eval_id, text in shown.items():
            alike.setdefault(text, []).append(eval_id)
        for group in alike.values():
            for eval_id in group if len(group) > 1 else ():
                differs = max(_common(eval_id, other) for other in group if other != eval_id)
                shown[eval_id] = _cut(eval_id, limit, at=differs)
        if len(set(shown.values())) == len(shown) or limit >= max(map(len, ids), default=0):
            return shown
        limit += 1


def _common(one: str, two: str) -> int:
    """The length of the start two ids share."""
    return next((i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b), len(one))


def _cut(text: str, limit: int, *, at: int | None = None) -> str:
    """``text`` in ``limit`` columns: its start and its end, or (``at``) with a window on
    the characters from ``at`` on between them."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 3  # the end, which names the test and its parameters, gets more
    if at is None or limit < 12:  # too short for two ellipses and a window
        return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]
    head, tail = limit // 6, limit // 3
    window = limit - head - tail - 2
    start = min(max(at - 2, head), len(text) - tail - window)
    if start <= head:  # the window reaches the start: one ellipsis is enough
        return text[: head + window + 1] + "…" + text[len(text) - tail :]
    return text[:head] + "…" + text[start : start + window] + "…" + text[len(text) - tail :]


def _wrap(reason: str, room: int, *, verbose: bool) -> list[str] | None:
    """The reason in lines of ``room`` columns (at most ``REASON_LINES`` unless ``verbose``,
    the last then ending in an ellipsis), or None when ``room`` is too narrow for it."""
    if room < MIN_REASON and len(reason) > room:
        return None
    lines = textwrap.wrap(reason, max(room, 1), break_on_hyphens=False) or [""]
    if verbose or len(lines) <= REASON_LINES:
        return lines
    kept = lines[:REASON_LINES]
    kept[-1] = kept[-1][: max(room, 1) - 1] + "…"
    return kept


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
    if artefact.run.stale:
        lines.append(f"another commit's parts (--allow-stale): {'; '.join(artefact.run.stale)}")
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
