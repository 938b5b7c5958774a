"""The files on the state branch: each eval's newest runs, the newest run, weekly rollups.

    recent.jsonl                                   each eval's newest runs, one line per eval
    runs/2026/12/01/090512Z-3f2a9c1b7d4e.jsonl   the newest run: a header, then a row per eval
    rollup/2026-W44.jsonl                          one row per eval for an older week

Each line of a run file is a history row without the fields its header
already says (run id, mode, time, commit, ref), without empty ones, and with
its numbers to four decimals. ``recent.jsonl`` says each run's fields once, in
its header (``runs``: run id to mode, time, commit, ref), and gives each eval
one line whose fields are columns, one value per run, oldest first: what
every CI command reads (trends, baselines, the comment's statuses) is there,
and a reader that wants a few evals skips the other lines unparsed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from firewall.constants import RECENT_RUNS
from firewall.store.history import HistoryRow, RunSummary

FORMAT_VERSION = 1
DECIMALS = 4
MAX_LINE = 256 * 1024  # characters; a row is a few hundred, with many drift fields a few thousand
_RUN_FIELDS = ("run_id", "mode", "build_ts", "git_sha", "git_ref")
_EMPTY: tuple[object, ...] = (None, "", (), [], {})
_ROW_FIELDS = tuple(field.name for field in dataclasses.fields(HistoryRow))  # eval_id first


def run_file(rows: Sequence[HistoryRow]) -> tuple[str, str]:
    """The path and text of one run's file."""
    first = rows[0]
    header: dict[str, object] = {
        "schema_version": FORMAT_VERSION,
        **{f: getattr(first, f) for f in _RUN_FIELDS},
    }
    # `firewall status` shows the run's counts: said here, they cost a line, not 5,000 rows.
    header["counts"] = dict(sorted(Counter(row.status for row in rows).items()))
    stamp = first.build_ts  # 2026-12-01T09:05:12Z
    path = (
        f"runs/{stamp[0:4]}/{stamp[5:7]}/{stamp[8:10]}/"
        f"{stamp[11:13]}{stamp[14:16]}{stamp[17:19]}Z-{first.run_id}.jsonl"
    )
    lines = [json.dumps(header, separators=(",", ":"))]
    lines += [_compact(row, leave_out=_RUN_FIELDS) for row in rows]
    return path, "\n".join(lines) + "\n"


def _compact(row: HistoryRow, *, leave_out: Sequence[str] = ()) -> str:
    """A row as one short line: no empty fields, numbers to 4 decimals."""
    return json.dumps(_short(row, leave_out=leave_out), separators=(",", ":"), ensure_ascii=False)


def _short(row: HistoryRow, *, leave_out: Sequence[str] = ()) -> dict[str, object]:
    """A row's fields as a run file keeps them: no empty ones, numbers to 4 decimals.

    Four decimals are finer than any decision looks (a threshold, an IQR limit, a
    drop of 0.01), and random trailing digits are what compresses worst: at a
    thousand evals they were most of what a job had to fetch.
    """
    document: dict[str, object] = {}
    for key in _ROW_FIELDS:
        value = getattr(row, key)
        if key in leave_out or value in _EMPTY:
            continue
        if isinstance(value, float):
            value = round(value, DECIMALS)
        elif key == "drift":
            value = {k: round(v, DECIMALS) for k, v in value.items()}
        elif isinstance(value, tuple):
            value = list(value)
        elif key == "inputs":
            value = dict(value)
        document[key] = value
    return document


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


def run_summary(text: str, skipped: Callable[[str], None] | None = None) -> RunSummary | None:
    """The run a run file is of and its counts, from its header; counted from its rows
    (as ``parse_file`` reads them) when the header does not say them. None for no rows."""
    header = _document(next(_lines(text), ""), None)
    counts = None if header is None else header.get("counts")
    if (
        header is None
        or header.get("schema_version") != FORMAT_VERSION
        or not isinstance(counts, dict)
        or not all(
            isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in counts.values()
        )
    ):
        return RunSummary.of(list(parse_file(text, skipped)))
    if not counts:
        return None
    run_id, mode, build_ts = (header.get(f) for f in ("run_id", "mode", "build_ts"))
    return RunSummary(
        run_id if isinstance(run_id, str) else "",
        mode if isinstance(mode, str) else "",
        build_ts if isinstance(build_ts, str) else "",
        counts,
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
    body = [_compact(row) for _, row in sorted(latest.items())]
    return "\n".join([header, *body]) + "\n"


def fold_week(week: str, texts: Sequence[str], fallen: Iterable[HistoryRow]) -> str:
    """A week's rollup file: the rows of its files so far (``texts``: the ref's, and an
    older tip's) with the ``fallen`` runs rolled in, as ``render_rollup`` renders them.

    A push folds a run into its week every time, 5,000 evals' rows at 5,000 evals: so the
    rows are merged as the lines' own fields, with no row built but for a line that is
    not as this module writes it. What cannot be read is dropped (its reader said so).
    """
    merged: dict[str, dict[str, Any]] = {}
    for text in texts:
        lines = _lines(text)
        next(lines, None)
        for line in lines:
            if (document := _rollup_document(line)) is not None:
                _fold_document(merged, document)
    for document in _rolled_documents(week, fallen):
        _fold_document(merged, document)
    header = json.dumps({"schema_version": FORMAT_VERSION, "week": week}, separators=(",", ":"))
    body = [_render_document(document) for _, document in sorted(merged.items())]
    return "\n".join([header, *body]) + "\n"


_ROLLED = ("median", "iqr", "mean", "pass_rate")  # what a rollup averages over its runs
_ROLLUP_FIELDS = {"eval_id", "run_id", "mode", "status", "k", "build_ts", "n", "trials", *_ROLLED}


def _rolled_documents(week: str, rows: Iterable[HistoryRow]) -> list[dict[str, Any]]:
    """``roll_up``'s rows of one week, as ``_short`` gives their fields."""
    groups: dict[str, list[HistoryRow]] = defaultdict(list)
    for row in rows:
        groups[row.eval_id].append(row)
    documents = []
    for eval_id, group in groups.items():
        group.sort(key=lambda r: r.build_ts)
        last = group[-1]
        document: dict[str, Any] = {
            "eval_id": eval_id,
            "run_id": f"rollup-{week}",
            "mode": "rollup",
            "status": last.status,
            "k": last.k,
            "build_ts": last.build_ts,
            "n": len(group),
            "trials": 0,
        }
        for name in _ROLLED:
            document[name] = _mean([getattr(r, name) for r in group])
        documents.append(document)
    return documents


def _rollup_document(line: str) -> dict[str, Any] | None:
    """A rollup line's fields, checked as ``HistoryRow.from_json`` checks them; a line of
    other types is read through a row (and one that is no row is None)."""
    data = _document(line, None)
    if data is None:
        return None
    plain = (
        isinstance(data.get("eval_id"), str)
        and isinstance(data.get("build_ts"), str)
        and all(_is_count(data.get(name)) for name in ("n", "k", "trials"))
        and all(_is_number(data.get(name)) for name in _ROLLED)
        and set(data) <= _ROLLUP_FIELDS
        and all(isinstance(data.get(name, ""), str) for name in ("run_id", "mode", "status"))
    )
    if plain:
        return data
    row = _row(data, None)
    return None if row is None else _short(row)


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
    """A rollup's fields as ``_compact`` writes a row: in the row's order, no empty ones,
    numbers to four decimals."""
    out: dict[str, Any] = {}
    for key in _ROW_FIELDS:
        value = document.get(key)
        if value in _EMPTY:
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
    lines = _lines(text)
    next(lines, None)
    wanted = None if eval_ids is None else set(eval_ids)
    for line in lines:
        if wanted is not None and (named := _line_eval(line)) is not None and named not in wanted:
            continue
        data = _document(line, skipped)
        row = None if data is None else _row(data, skipped)
        if row is not None and (wanted is None or row.eval_id in wanted):
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


# --- recent.jsonl: each eval's newest runs -------------------------------------------

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
    lines = _lines(text)
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
    if wanted is not None and (named := _line_eval(line)) is not None and named not in wanted:
        return None
    data = _document(line, skipped)
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
        row = _row({**document, **run, "eval_id": eval_id}, skipped)
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
    lines = _lines(text)
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
    if len(line) > MAX_LINE or (eval_id := _line_eval(line)) is None or eval_id not in wanted:
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


def _lines(text: str | bytes) -> Iterator[str]:
    """The text's lines, one at a time: a reader of a few lines of a big file holds no list
    of all of them, nor (given bytes) a decoded copy of the file."""
    at, end = 0, len(text)
    while at < end:
        if isinstance(text, bytes):
            stop = text.find(b"\n", at)
            stop = end if stop < 0 else stop
            line = text[at:stop].decode("utf-8", "replace")
        else:
            stop = text.find("\n", at)
            stop = end if stop < 0 else stop
            line = text[at:stop]
        yield line.rstrip("\r")
        at = stop + 1


def recent_run_ids(text: str | bytes) -> set[str]:
    """The runs ``recent.jsonl`` holds rows of: a run file of one of them is no news."""
    return set(_runs_of(next(_lines(text), ""), None))


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
        data = _document(line, None)
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
        document = _short(row)
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
        entry = {c: values[i] for c, values in old.items() if values[i] not in _EMPTY}
        if (row := _row({**entry, **runs[run_id], "eval_id": eval_id}, None)) is not None:
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
    newest = next((i for i in range(len(marks) - 1, -1, -1) if marks[i] not in _EMPTY), None)
    for column in _NEWEST_ONLY:
        if column in columns:
            values = columns[column]
            columns[column] = [v if i == newest else None for i, v in enumerate(values)]


def _render_line(eval_id: str, columns: Mapping[str, list[Any]]) -> str:
    """One eval's line of ``recent.jsonl``: its id first, then each column that holds a value."""
    document: dict[str, object] = {"eval_id": eval_id}
    for column, values in columns.items():
        if any(value is not None and value not in _EMPTY for value in values):
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
        if (row := _row({**entry, **runs[entry["run_id"]], "eval_id": eval_id}, None))
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
        {c: values[i] for c, values in columns.items() if values[i] not in _EMPTY}
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
            yield {c: values[i] for c, values in columns.items() if values[i] not in _EMPTY}


def _columns_of(data: dict[str, Any], ids: list[Any]) -> dict[str, list[Any]]:
    """A line's columns that hold a value for each of its runs (others are garbage)."""
    return {c: v for c in _COLUMNS if isinstance(v := data.get(c), list) and len(v) == len(ids)}


def _runs_of(line: str, skipped: Callable[[str], None] | None) -> dict[str, dict[str, Any]]:
    header = _document(line, skipped)
    if header is None or header.get("schema_version") != FORMAT_VERSION:
        if header is not None:
            _say(skipped, f"a recent file of format {header.get('schema_version')!r}")
        return {}
    runs = header.get("runs")
    if not isinstance(runs, dict):
        return {}
    return {
        run_id: {f: run[f] for f in _HEADER_FIELDS if isinstance(run.get(f), str)}
        for run_id, run in runs.items()
        if isinstance(run, dict)
    }


_LINE_START = '{"eval_id":'
_STRING = json.JSONDecoder()


def _line_eval(line: str) -> str | None:
    """The eval a line of ``recent.jsonl`` is of, from its first field alone (as ``_fold``
    writes it); None when it does not begin so (the line is parsed whole then)."""
    if not line.startswith(_LINE_START):
        return None
    try:
        value, _ = _STRING.raw_decode(line, len(_LINE_START))
    except ValueError:
        return None
    return value if isinstance(value, str) else None
