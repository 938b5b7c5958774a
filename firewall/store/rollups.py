"""The weekly rollups on the state branch: one row per eval for an older week.

    rollup/2026-W44.jsonl                          one row per eval for an older week

A rollup's row is the means of the week's runs of its eval (``n`` counts them),
written as a run file's rows are (``firewall.store.statefiles``); a week is
folded in a push at a time, and each week is a ref of its own
(``firewall.store.weeks``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from firewall.store.history import HistoryRow
from firewall.store.statefiles import (
    DECIMALS,
    EMPTY,
    FORMAT_VERSION,
    ROW_FIELDS,
    compact_line,
    iter_lines,
    line_eval,
    parse_line,
    short_fields,
    to_row,
)


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
        if kept is None:
            latest[row.eval_id] = row
        else:  # in either order: concurrent jobs' runs fall out of the recent file unsorted
            earlier, later = (kept, row) if row.build_ts >= kept.build_ts else (row, kept)
            latest[row.eval_id] = _merge(earlier, later)
    header = json.dumps({"schema_version": FORMAT_VERSION, "week": week}, separators=(",", ":"))
    body = [compact_line(row) for _, row in sorted(latest.items())]
    return "\n".join([header, *body]) + "\n"


def fold_week(week: str, texts: Sequence[str], rolled: Iterable[Mapping[str, Any]]) -> str:
    """A week's rollup file: the rows of its files so far (``texts``: the ref's, and an
    older tip's) with the ``rolled`` rows merged in (``rolled``'s: each one eval's runs of
    the week that fell out of the recent file), as ``render_rollup`` renders them.

    Every push folds rows into a week: the tenth of a suite's evals whose turn it is,
    into a week of 5,000 lines at 5,000 evals. So the line of an eval none of whose
    runs fell out is kept as it is, once it is read as a row of the types this module
    writes; the others are merged as their own fields, with no row built but for a line
    that is not as this module writes it. What cannot be read is dropped (its reader
    said so).
    """
    folding = [dict(row) for row in rolled]
    touched = {row["eval_id"] for row in folding}
    kept: dict[str, str] = {}  # an eval's line as it is
    merged: dict[str, dict[str, Any]] = {}
    for text in texts:
        lines = iter_lines(text)
        next(lines, None)
        for line in lines:
            data = parse_line(line, None)
            if data is None:
                continue
            plain = _plain(data)
            eval_id = data["eval_id"] if plain else None
            if eval_id is not None and eval_id not in touched and eval_id not in merged:
                if eval_id not in kept:
                    kept[eval_id] = line
                    continue
                _fold_document(merged, json.loads(kept.pop(eval_id)))  # an eval twice
            if (document := data if plain else _row_document(data)) is not None:
                _fold_document(merged, document)
    for row in folding:
        _fold_document(merged, row)
    header = json.dumps({"schema_version": FORMAT_VERSION, "week": week}, separators=(",", ":"))
    rendered = ((eval_id, _render_document(document)) for eval_id, document in merged.items())
    body = [line for _, line in sorted([*kept.items(), *rendered])]
    return "\n".join([header, *body]) + "\n"


_ROLLED = ("median", "iqr", "mean", "pass_rate")  # what a rollup averages over its runs
_ROLLUP_FIELDS = {"eval_id", "run_id", "mode", "status", "k", "build_ts", "n", "trials", *_ROLLED}
_RUN_READ = ("status", "k", "build_ts", *_ROLLED)  # what ``rolled`` reads of a run


def rolled(eval_id: str, week: str, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``roll_up``'s row of one eval's ``runs`` of one week, as a rollup line's fields: each
    run its fields as a line keeps them (``build_ts`` among them), a field of the wrong
    type read as ``HistoryRow.from_json`` reads it (a number that is none left out of its
    mean)."""
    ordered = sorted(runs, key=lambda run: _text(run.get("build_ts")))
    last = ordered[-1]
    k = last.get("k")
    document: dict[str, Any] = {
        "eval_id": eval_id,
        "run_id": f"rollup-{week}",
        "mode": "rollup",
        "status": _text(last.get("status")),
        "k": k if isinstance(k, int) and not isinstance(k, bool) else 0,
        "build_ts": _text(last.get("build_ts")),
        "n": len(ordered),
        "trials": 0,
    }
    for name in _ROLLED:
        document[name] = _mean([_number(run.get(name)) for run in ordered])
    return document


def rolled_span(
    eval_id: str, week: str, columns: Mapping[str, Sequence[Any]], span: range, last_ts: str
) -> dict[str, Any]:
    """``rolled`` of the runs ``span`` of a line's ``columns`` (a recent file's, its runs in
    time order; ``last_ts`` the last one's time): the same row, with no run's fields built."""
    last = span[-1]
    status, k = (columns[name][last] if name in columns else None for name in ("status", "k"))
    document: dict[str, Any] = {
        "eval_id": eval_id,
        "run_id": f"rollup-{week}",
        "mode": "rollup",
        "status": _text(status),
        "k": k if isinstance(k, int) and not isinstance(k, bool) else 0,
        "build_ts": last_ts,
        "n": len(span),
        "trials": 0,
    }
    start, stop = span.start, span.stop
    for name in _ROLLED:  # _number's test, inlined: called for every line that rolls up
        values = columns.get(name) or ()
        present = [float(v) for v in values[start:stop] if type(v) is float or type(v) is int]
        document[name] = math.fsum(present) / len(present) if present else None
    return document


def rolled_rows(week: str, rows: Iterable[HistoryRow]) -> list[dict[str, Any]]:
    """``rolled`` of each eval's ``rows`` of one week."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row.eval_id].append({name: getattr(row, name) for name in _RUN_READ})
    return [rolled(eval_id, week, runs) for eval_id, runs in groups.items()]


def week_or_none(build_ts: object) -> str | None:
    """``week_of`` a run's time, or None for one that is no time (garbage on the branch)."""
    return _week_of_text(build_ts) if isinstance(build_ts, str) else None


@functools.lru_cache(maxsize=1024)  # a roll-up asks of the same few runs for every eval
def _week_of_text(build_ts: str) -> str | None:
    try:
        return week_of(build_ts)
    except ValueError:
        return None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _row_document(data: dict[str, Any]) -> dict[str, Any] | None:
    """The fields of a rollup line of other types than ``_plain``'s, read through a row
    (None for one that is no row)."""
    row = to_row(data, None)
    return None if row is None else short_fields(row)


def _plain(data: dict[str, Any]) -> bool:
    """Whether a rollup line's fields are of the types this module writes, checked as
    ``HistoryRow.from_json`` checks them."""
    return (
        isinstance(data.get("eval_id"), str)
        and isinstance(data.get("build_ts"), str)
        and all(_is_count(data.get(name)) for name in ("n", "k", "trials"))
        and all(_is_number(data.get(name)) for name in _ROLLED)
        and set(data) <= _ROLLUP_FIELDS
        and all(isinstance(data.get(name, ""), str) for name in ("run_id", "mode", "status"))
    )


def _is_number(value: object) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _is_count(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _fold_document(merged: dict[str, dict[str, Any]], document: dict[str, Any]) -> None:
    """``_merge`` on a rollup's fields: the later one's, with n summed and the means
    weighted by the runs each stands for."""
    eval_id = document["eval_id"]
    kept = merged.get(eval_id)
    if kept is None:
        merged[eval_id] = document
        return
    earlier, later = (
        (kept, document)
        if document.get("build_ts", "") >= kept.get("build_ts", "")
        else (document, kept)
    )
    n_earlier, n_later = earlier.get("n") or 0, later.get("n") or 0
    folded = dict(later)
    folded["n"] = n_earlier + n_later
    for name in _ROLLED:
        a, b = earlier.get(name), later.get(name)
        if a is None or b is None or not n_earlier + n_later:
            folded[name] = b if a is None else a if b is None else b
        else:
            folded[name] = (a * n_earlier + b * n_later) / (n_earlier + n_later)
    merged[eval_id] = folded


def _render_document(document: dict[str, Any]) -> str:
    """A rollup's fields as ``compact_line`` writes a row: in the row's order, no empty ones,
    numbers to four decimals."""
    out: dict[str, Any] = {}
    for key in ROW_FIELDS:
        value = document.get(key)
        if value in EMPTY:
            continue
        out[key] = round(value, DECIMALS) if isinstance(value, float) else value
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False)


def parse_rollup(
    text: str,
    skipped: Callable[[str], None] | None = None,
    *,
    eval_ids: Collection[str] | None = None,
) -> Iterator[HistoryRow]:
    """The rows of one week's rollup file, skipping (and telling ``skipped``) as ``parse_file``;
    with ``eval_ids``, only theirs, the other lines passed over by their first bytes."""
    lines = iter_lines(text)
    next(lines, None)
    wanted = None if eval_ids is None else set(eval_ids)
    for line in lines:
        if wanted is not None and (named := line_eval(line)) is not None and named not in wanted:
            continue
        data = parse_line(line, skipped)
        row = None if data is None else to_row(data, skipped)
        if row is not None and (wanted is None or row.eval_id in wanted):
            yield row


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
    return math.fsum(present) / len(present) if present else None  # statistics.fmean's sum
