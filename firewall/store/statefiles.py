"""The files on the state branch: one per run, and weekly rollups of older runs.

    runs/2026/12/01/090512Z-3f2a9c1b7d4e.jsonl   one run: a header line, then a row per eval
    rollup/2026-W44.jsonl                          one row per eval for an older week

Each line of a run file is a history row without the fields its header
already says (run id, mode, time, commit, ref), without empty ones, and with
its numbers to four decimals.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from firewall.store.history import HistoryRow

FORMAT_VERSION = 1
DECIMALS = 4
MAX_LINE = 256 * 1024  # characters; a row is a few hundred, with many drift fields a few thousand
_RUN_FIELDS = ("run_id", "mode", "build_ts", "git_sha", "git_ref")
_EMPTY: tuple[object, ...] = (None, "", (), [], {})


def run_file(rows: Sequence[HistoryRow]) -> tuple[str, str]:
    """The path and text of one run's file."""
    first = rows[0]
    header = {"schema_version": FORMAT_VERSION, **{f: getattr(first, f) for f in _RUN_FIELDS}}
    stamp = first.build_ts  # 2026-12-01T09:05:12Z
    path = (
        f"runs/{stamp[0:4]}/{stamp[5:7]}/{stamp[8:10]}/"
        f"{stamp[11:13]}{stamp[14:16]}{stamp[17:19]}Z-{first.run_id}.jsonl"
    )
    lines = [json.dumps(header, separators=(",", ":"))]
    lines += [_compact(row, leave_out=_RUN_FIELDS) for row in rows]
    return path, "\n".join(lines) + "\n"


def _compact(row: HistoryRow, *, leave_out: Sequence[str] = ()) -> str:
    """A row as one short line: no empty fields, numbers to 4 decimals.

    Four decimals are finer than any decision looks (a threshold, an IQR limit, a
    drop of 0.01), and random trailing digits are what compresses worst: at a
    thousand evals they were most of what a job had to fetch.
    """
    document: dict[str, object] = {
        key: round(value, DECIMALS) if isinstance(value, float) else value
        for key, value in json.loads(row.to_json()).items()
        if key not in leave_out and value not in _EMPTY
    }
    if row.drift:
        document["drift"] = {k: round(v, DECIMALS) for k, v in row.drift.items()}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def parse_file(text: str, skipped: Callable[[str], None] | None = None) -> Iterator[HistoryRow]:
    """The rows of one run file. What cannot be read (a line too long, too deeply nested, not
    JSON, not a row; a header of another version) is skipped, and ``skipped`` told why."""
    lines = text.splitlines()
    header = _document(lines[0], skipped) if lines else None
    if header is None or header.get("schema_version") != FORMAT_VERSION:
        if lines and header is not None:
            _say(skipped, f"a run file of format {header.get('schema_version')!r}")
        return
    run = {f: header.get(f) for f in _RUN_FIELDS}
    for line in lines[1:]:
        data = _document(line, skipped)
        if data is not None and (row := _row({**data, **run}, skipped)) is not None:
            yield row


def week_of(build_ts: str) -> str:
    """The ISO week of a timestamp, e.g. ``2026-W49``."""
    year, week, _ = dt.date.fromisoformat(build_ts[:10]).isocalendar()
    return f"{year}-W{week:02d}"


def roll_up(rows: Iterable[HistoryRow]) -> list[HistoryRow]:
    """One row per eval per week: the means of its runs' medians, IQRs, means and pass rates.

    The rolled-up row keeps what trends and calibration read, and the status and k of
    the week's latest run; ``n`` counts the runs it stands for, so that a week folded a
    night at a time (``_merge``) comes to the same numbers as one folded at once.
    """
    groups: dict[tuple[str, str], list[HistoryRow]] = defaultdict(list)
    for row in rows:
        groups[(row.eval_id, week_of(row.build_ts))].append(row)
    rolled = []
    for (eval_id, week), group in sorted(groups.items()):
        group.sort(key=lambda r: r.build_ts)
        last = group[-1]
        rolled.append(
            HistoryRow(
                eval_id=eval_id,
                run_id=f"rollup-{week}",
                mode="rollup",
                status=last.status,
                k=last.k,
                build_ts=last.build_ts,
                median=_mean([r.median for r in group]),
                iqr=_mean([r.iqr for r in group]),
                mean=_mean([r.mean for r in group]),
                pass_rate=_mean([r.pass_rate for r in group]),
                n=len(group),
            )
        )
    return rolled


def render_rollup(week: str, rows: Sequence[HistoryRow]) -> str:
    """A week's rollup file: the header, then one row per eval (a later fold replaces it)."""
    latest: dict[str, HistoryRow] = {}
    for row in rows:
        kept = latest.get(row.eval_id)
        if kept is None or row.build_ts >= kept.build_ts:
            latest[row.eval_id] = _merge(kept, row) if kept else row
    header = json.dumps({"schema_version": FORMAT_VERSION, "week": week}, separators=(",", ":"))
    body = [_compact(row) for _, row in sorted(latest.items())]
    return "\n".join([header, *body]) + "\n"


def parse_rollup(text: str, skipped: Callable[[str], None] | None = None) -> Iterator[HistoryRow]:
    """The rows of one week's rollup file, skipping (and telling ``skipped``) as ``parse_file``."""
    for line in text.splitlines()[1:]:
        data = _document(line, skipped)
        if data is not None and (row := _row(data, skipped)) is not None:
            yield row


def _document(line: str, skipped: Callable[[str], None] | None) -> dict[str, Any] | None:
    """One line's JSON object, or None (said) when it is not one we can read.

    A line longer than ``MAX_LINE`` is not parsed at all: no row is that long, and parsing
    garbage of a hundred megabytes is what a CI job cannot afford. Nesting deep enough to
    exhaust the parser's recursion is garbage too, not a reason to stop the command.
    """
    if not line.strip():
        return None
    if len(line) > MAX_LINE:
        _say(skipped, f"a line of {len(line):,} characters (at most {MAX_LINE:,} are read)")
        return None
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:
        _say(skipped, f"a line that is not JSON ({type(exc).__name__})")
        return None
    if not isinstance(data, dict):
        _say(skipped, "a line that is not a JSON object")
        return None
    return data


def _row(data: dict[str, Any], skipped: Callable[[str], None] | None) -> HistoryRow | None:
    try:
        row = HistoryRow.from_json(data)
    except (ValueError, TypeError, OverflowError, RecursionError):
        row = None
    if row is None:
        _say(skipped, "a line that is not a history row")
    return row


def _say(skipped: Callable[[str], None] | None, what: str) -> None:
    if skipped is not None:
        skipped(what)


def _merge(earlier: HistoryRow, later: HistoryRow) -> HistoryRow:
    """Two rollups of one eval and week (a week is folded in a night at a time) as one.

    Means and pass rates merge exactly (weighted by the runs each stands for); the
    median and the IQR's 80th percentile merge as weighted means of the parts, an
    approximation that trends and calibration can live with.
    """

    def weighted(a: float | None, b: float | None) -> float | None:
        if a is None or b is None:
            return b if a is None else a
        return (a * earlier.n + b * later.n) / (earlier.n + later.n)

    return dataclasses.replace(
        later,
        n=earlier.n + later.n,
        median=weighted(earlier.median, later.median),
        iqr=weighted(earlier.iqr, later.iqr),
        mean=weighted(earlier.mean, later.mean),
        pass_rate=weighted(earlier.pass_rate, later.pass_rate),
    )


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None
