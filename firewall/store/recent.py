"""``recent.jsonl`` on the state branch: each eval's newest runs, one line per eval.

    recent.jsonl                                   each eval's newest runs, one line per eval

``recent.jsonl`` says each run's fields once, in its header (``runs``: run id
to mode, time, commit, ref), and gives each eval one line whose fields are
columns, one value per run, oldest first: what every CI command reads (trends,
baselines, the comment's statuses) is there, and a reader that wants a few
evals skips the other lines unparsed. Values are kept as a run file keeps them
(``firewall.store.statefiles``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from firewall.constants import RECENT_RUNS
from firewall.store.history import HistoryRow
from firewall.store.statefiles import (
    EMPTY,
    FORMAT_VERSION,
    MAX_LINE,
    iter_lines,
    line_eval,
    parse_line,
    say,
    short_fields,
    to_row,
)

RECENT = "recent.jsonl"
# Each eval's newest ``RECENT_RUNS`` runs kept whole: the most any CI reader asks for (the
# HTML report's TREND_RUNS, the regression baseline's BASELINE_RUNS, the summary's
# TREND_POINTS; firewall.constants says each once).
_HEADER_FIELDS = ("mode", "build_ts", "git_sha", "git_ref")  # a run's, said once
_COLUMNS = (
    "run_id",
    "status",
    "k",
    "median",
    "iqr",
    "mean",
    "sd",
    "n",
    "pass_rate",
    "drift",
    "model_ids",
    "prompt_versions",
    "trials",
    "seconds",
    "cost_usd",
    "fingerprint",
    "inputs",
)
# What an affected-only run compares with (firewall.pipeline.affected): the newest
# fingerprinted run's alone, so that an eval's line does not hold thirty maps of files.
_NEWEST_ONLY = ("fingerprint", "inputs")
_STRING = json.JSONDecoder()  # decodes a column where its key stands


def recent_rows(
    text: str | bytes,
    *,
    eval_ids: Collection[str] | None = None,
    since: str | None = None,
    ref: str | None = None,
    last: int | None = None,
    skipped: Callable[[str], None] | None = None,
) -> dict[str, list[HistoryRow]]:
    """Each wanted eval's rows of ``recent.jsonl``, oldest first: built at ``since`` or
    later, of runs on ``ref``, the newest ``last`` of them. The lines of other evals are
    passed over by their first bytes, unparsed; what cannot be read is skipped and said."""
    lines = iter_lines(text)
    runs = _runs_of(next(lines, ""), skipped)
    wanted = None if eval_ids is None else set(eval_ids)
    strings: dict[str, str] = {}  # one object per status: a year of rows holds four
    found: dict[str, list[HistoryRow]] = {}
    for line in lines:
        if (read := _wanted_line(line, wanted, skipped)) is None:
            continue
        eval_id, data = read
        rows = _newest_rows(eval_id, data, runs, since, ref, last, strings, skipped)
        found.setdefault(eval_id, rows[::-1])
    return found


def _wanted_line(
    line: str, wanted: set[str] | None, skipped: Callable[[str], None] | None
) -> tuple[str, dict[str, Any]] | None:
    """The eval of a line of ``recent.jsonl`` and its columns, or None when the line is of an
    eval not ``wanted`` (passed over by its first bytes, unparsed) or cannot be read."""
    if wanted is not None and (named := line_eval(line)) is not None and named not in wanted:
        return None
    data = parse_line(line, skipped)
    if data is None or not isinstance(eval_id := data.get("eval_id"), str):
        return None
    if wanted is not None and eval_id not in wanted:
        return None
    return eval_id, data


def _newest_rows(
    eval_id: str,
    data: dict[str, Any],
    runs: dict[str, dict[str, Any]],
    since: str | None,
    ref: str | None,
    last: int | None,
    strings: dict[str, str],
    skipped: Callable[[str], None] | None,
) -> list[HistoryRow]:
    """One eval's rows of its line, the newest first: built at ``since`` or later, of runs
    on ``ref``, the newest ``last``. Entries are built only as far back as they are read."""
    rows: list[HistoryRow] = []
    for document in _entries_newest_first(data):
        run = runs.get(str(document.get("run_id", "")))
        if run is None:
            continue
        if since is not None and run.get("build_ts", "") < since:
            break
        if ref is not None and run.get("git_ref") != ref:
            continue
        if isinstance(status := document.get("status"), str):
            document["status"] = strings.setdefault(status, status)
        row = to_row({**document, **run, "eval_id": eval_id}, skipped)
        if row is not None:
            rows.append(row)
            if last is not None and len(rows) >= last:
                break
    return rows


def recent_medians(
    text: str | bytes,
    eval_ids: Collection[str],
    *,
    since: str,
    last: int,
    skipped: Callable[[str], None] | None = None,
) -> dict[str, list[float | None]]:
    """Each wanted eval's medians in ``recent.jsonl`` of runs built at ``since`` or later, the
    newest ``last``, oldest first: what a sparkline draws, read from two columns with no row
    built (a run's summary draws one for every eval)."""
    lines = iter_lines(text)
    runs = _runs_of(next(lines, ""), skipped)
    stamps = {run_id: run.get("build_ts", "") for run_id, run in runs.items()}
    wanted = set(eval_ids)
    found: dict[str, list[float | None]] = {}
    for line in lines:
        read = _columns_read(line, wanted, ("run_id", "median"))
        if read is None and (read := _wanted_line(line, wanted, skipped)) is None:
            continue
        eval_id, data = read
        if eval_id in found:
            continue
        ids, medians = data.get("run_id"), data.get("median")
        if not isinstance(ids, list):
            found[eval_id] = []
            continue
        if not isinstance(medians, list) or len(medians) != len(ids):
            medians = [None] * len(ids)
        points: list[float | None] = []
        for i in range(len(ids) - 1, -1, -1):
            stamp = stamps.get(ids[i]) if isinstance(ids[i], str) else None
            if stamp is None:
                continue
            if stamp < since or len(points) >= last:
                break
            value = medians[i]
            number = (
                value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
            )
            points.append(None if number is None else float(number))
        found[eval_id] = points[::-1]
    return found


def _columns_read(
    line: str, wanted: set[str], columns: Sequence[str]
) -> tuple[str, dict[str, Any]] | None:
    """A wanted eval's line of ``recent.jsonl`` with only ``columns`` decoded, each from where
    its key stands (``"median":[``), the rest of the line passed over: a sparkline of every
    eval reads two columns of fifteen. None when the line is not as ``_render_line`` writes
    it, or of an eval not wanted (then the caller reads it whole, and says what is wrong).

    A key followed by ``[`` is a column: nothing else in a line is (a drift's field
    name is followed by a number, an input's by a string).
    """
    if len(line) > MAX_LINE or (eval_id := line_eval(line)) is None or eval_id not in wanted:
        return None
    data: dict[str, Any] = {"eval_id": eval_id}
    for column in columns:
        at = line.find(f'"{column}":[')
        if at < 0:
            return None
        try:
            data[column], _ = _STRING.raw_decode(line, at + len(column) + 3)
        except (ValueError, RecursionError):
            return None
    return eval_id, data


def recent_run_ids(text: str | bytes) -> set[str]:
    """The runs ``recent.jsonl`` holds rows of: a run file of one of them is no news."""
    return set(_runs_of(next(iter_lines(text), ""), None))


_Folded = tuple[str, list[str], list[HistoryRow]]  # an eval's line, the runs it names, the fallen


def fold_recent(
    text: str | None, rows: Iterable[HistoryRow], *, keep: int = RECENT_RUNS
) -> tuple[str, list[HistoryRow]]:
    """``recent.jsonl`` with ``rows`` added, and the rows that fall out of it: each eval
    keeps its newest ``keep`` runs. Lines of evals without new rows are kept as they are,
    unparsed but for the runs they name; a line that cannot be read is dropped (its
    reader said so)."""
    lines = (text or "").splitlines()
    runs = _runs_of(lines[0] if lines else "", None)
    new = _new_entries(rows, runs)
    folded: dict[str, _Folded] = {}
    in_order: dict[tuple[str, ...], bool] = {}  # most lines name the same runs: asked once
    for line in lines[1:]:
        data = parse_line(line, None)
        if data is None or not isinstance(eval_id := data.get("eval_id"), str):
            continue
        if eval_id not in folded:
            entries = new.pop(eval_id, None)
            folded[eval_id] = _fold_line(eval_id, line, data, entries, runs, keep, in_order)
    for eval_id, entries in new.items():
        folded[eval_id] = _fold(eval_id, entries, runs, keep)
    fallen = [row for _, _, out in folded.values() for row in out]
    return _render_recent(runs, folded), fallen


def _new_entries(
    rows: Iterable[HistoryRow], runs: dict[str, dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """The rows as each eval's entries (its columns' values of one run), their runs' own
    fields added to ``runs``."""
    new: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        document = short_fields(row)
        runs[row.run_id] = {f: document[f] for f in _HEADER_FIELDS if f in document}
        new[row.eval_id].append({c: document[c] for c in _COLUMNS if c in document})
    return new


def _fold_line(
    eval_id: str,
    line: str,
    data: dict[str, Any],
    entries: list[dict[str, Any]] | None,
    runs: dict[str, dict[str, Any]],
    keep: int,
    in_order: dict[tuple[str, ...], bool],
) -> _Folded:
    """One eval's line with its new entries folded in; without any, the line as it is."""
    if entries is None:
        ids = data.get("run_id")
        return line, [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else [], []
    folded = _fold_columns(eval_id, data, entries, runs, keep, in_order)
    if folded is None:  # out of order, a run twice, garbage: entry by entry
        folded = _fold(eval_id, _entries(data) + entries, runs, keep)
    return folded


def _render_recent(runs: dict[str, dict[str, Any]], folded: dict[str, _Folded]) -> str:
    """``recent.jsonl``: the header with the runs its lines name, then a line per eval."""
    named = {run_id for _, ids, _ in folded.values() for run_id in ids}
    header = {
        "schema_version": FORMAT_VERSION,
        "runs": {run_id: runs[run_id] for run_id in sorted(named) if run_id in runs},
    }
    body = [folded[eval_id][0] for eval_id in sorted(folded)]
    return "\n".join([json.dumps(header, separators=(",", ":")), *body]) + "\n"


def _fold_columns(
    eval_id: str,
    data: dict[str, Any],
    entries: list[dict[str, Any]],
    runs: dict[str, dict[str, Any]],
    keep: int,
    in_order: dict[tuple[str, ...], bool],
) -> _Folded | None:
    """``_fold`` of the usual case, column by column, with no entry built but the fallen
    ones': the line's runs are known and in time order, and the new runs come after them.
    None when that is not so (then ``_fold`` sorts it out entry by entry). ``in_order``
    keeps the answer for each list of runs already asked about."""
    ids = data.get("run_id")
    if not isinstance(ids, list):
        return None
    named = [*ids, *(e.get("run_id") for e in entries)]
    if not all(isinstance(run_id, str) for run_id in named):
        return None
    key = tuple(named)
    if key not in in_order:
        in_order[key] = _come_after(ids, entries, runs, keep)
    if not in_order[key]:
        return None
    old = _columns_of(data, ids)
    drop = max(0, len(ids) + len(entries) - keep)
    fallen = _fallen(eval_id, old, ids[:drop], runs)
    columns = _shifted(old, len(ids) - drop, drop, entries)
    _newest_only(columns)
    return _render_line(eval_id, columns), columns["run_id"], fallen


def _come_after(
    ids: list[Any], entries: list[dict[str, Any]], runs: dict[str, dict[str, Any]], keep: int
) -> bool:
    """Whether the new entries simply come after a line's runs: no more of them than are
    kept, every run known, all in time order, none twice."""
    if len(entries) > keep:
        return False
    named = [*ids, *(e.get("run_id") for e in entries)]
    stamps = []
    for run_id in named:
        run = runs.get(run_id) if isinstance(run_id, str) else None
        if run is None:
            return False
        stamps.append(run.get("build_ts", ""))
    return stamps == sorted(stamps) and len(set(named)) == len(named)


def _fallen(
    eval_id: str,
    old: dict[str, list[Any]],
    dropped: list[str],
    runs: dict[str, dict[str, Any]],
) -> list[HistoryRow]:
    """The rows of a line's oldest runs, ``dropped`` to make room for the new ones."""
    fallen = []
    for i, run_id in enumerate(dropped):
        entry = {c: values[i] for c, values in old.items() if values[i] not in EMPTY}
        if (row := to_row({**entry, **runs[run_id], "eval_id": eval_id}, None)) is not None:
            fallen.append(row)
    return fallen


def _shifted(
    old: dict[str, list[Any]], staying: int, drop: int, entries: list[dict[str, Any]]
) -> dict[str, list[Any]]:
    """A line's columns without their oldest ``drop`` values and with the new entries'
    after the ``staying`` others (None where the line had no such column)."""
    present = set(old).union(*entries)
    pad = [None] * staying
    return {
        c: [*(old[c][drop:] if c in old else pad), *(e.get(c) for e in entries)]
        for c in _COLUMNS
        if c in present
    }


def _newest_only(columns: dict[str, list[Any]]) -> None:
    """The ``_NEWEST_ONLY`` columns emptied but for the newest fingerprinted run's value."""
    marks = columns.get("fingerprint", [])
    newest = next((i for i in range(len(marks) - 1, -1, -1) if marks[i] not in EMPTY), None)
    for column in _NEWEST_ONLY:
        if column in columns:
            values = columns[column]
            columns[column] = [v if i == newest else None for i, v in enumerate(values)]


def _render_line(eval_id: str, columns: Mapping[str, list[Any]]) -> str:
    """One eval's line of ``recent.jsonl``: its id first, then each column that holds a value."""
    document: dict[str, object] = {"eval_id": eval_id}
    for column, values in columns.items():
        if any(value is not None and value not in EMPTY for value in values):
            document[column] = values
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def _fold(
    eval_id: str, entries: list[dict[str, Any]], runs: dict[str, dict[str, Any]], keep: int
) -> _Folded:
    """One eval's line from its runs' entries (one per run, the newest kept), the runs it
    names, and the rows of the runs that fell out, oldest first."""
    by_run = {e["run_id"]: e for e in entries if e.get("run_id") in runs}
    ordered = sorted(by_run.values(), key=lambda e: (runs[e["run_id"]].get("build_ts", ""),))
    fallen = [
        row
        for entry in ordered[:-keep]
        if (row := to_row({**entry, **runs[entry["run_id"]], "eval_id": eval_id}, None))
    ]
    ordered = ordered[-keep:]
    newest = next((e for e in reversed(ordered) if e.get("fingerprint")), None)
    ordered = [
        e if e is newest else {c: v for c, v in e.items() if c not in _NEWEST_ONLY} for e in ordered
    ]
    columns = {column: [entry.get(column) for entry in ordered] for column in _COLUMNS}
    return _render_line(eval_id, columns), [e["run_id"] for e in ordered], fallen


def _entries(data: dict[str, Any]) -> list[dict[str, Any]]:
    """A line's columns as one entry per run (a value missing or of no run is left out)."""
    ids = data.get("run_id")
    if not isinstance(ids, list):
        return []
    columns = _columns_of(data, ids)
    return [
        {c: values[i] for c, values in columns.items() if values[i] not in EMPTY}
        for i, run_id in enumerate(ids)
        if isinstance(run_id, str)
    ]


def _entries_newest_first(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``_entries`` from the newest, each built only when asked for: a reader of a few
    points an eval builds a few entries, not thirty."""
    ids = data.get("run_id")
    if not isinstance(ids, list):
        return
    columns = _columns_of(data, ids)
    for i in range(len(ids) - 1, -1, -1):
        if isinstance(ids[i], str):
            yield {c: values[i] for c, values in columns.items() if values[i] not in EMPTY}


def _columns_of(data: dict[str, Any], ids: list[Any]) -> dict[str, list[Any]]:
    """A line's columns that hold a value for each of its runs (others are garbage)."""
    return {c: v for c in _COLUMNS if isinstance(v := data.get(c), list) and len(v) == len(ids)}


def _runs_of(line: str, skipped: Callable[[str], None] | None) -> dict[str, dict[str, Any]]:
    header = parse_line(line, skipped)
    if header is None or header.get("schema_version") != FORMAT_VERSION:
        if header is not None:
            say(skipped, f"a recent file of format {header.get('schema_version')!r}")
        return {}
    runs = header.get("runs")
    if not isinstance(runs, dict):
        return {}
    return {
        run_id: {f: run[f] for f in _HEADER_FIELDS if isinstance(run.get(f), str)}
        for run_id, run in runs.items()
        if isinstance(run, dict)
    }
