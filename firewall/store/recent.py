"""``recent.jsonl`` on the state branch: each eval's newest runs, one line per eval.

    recent.jsonl                                   each eval's newest runs, one line per eval

``recent.jsonl`` says each run's fields once, in its header (``runs``: run id
to mode, time, commit, ref; and ``pushes``, the count of pushes folded in, which
sets each eval's turn to roll up), and gives each eval one line whose fields are
columns, one value per run, oldest first: what every CI command reads (trends,
baselines, the comment's statuses) is there, and a reader that wants a few
evals skips the other lines unparsed. Values are kept as a run file keeps them
(``firewall.store.statefiles``). ``firewall.store.recentfold`` writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any

from firewall.store.history import HistoryRow
from firewall.store.statefiles import (
    EMPTY,
    FORMAT_VERSION,
    MAX_LINE,
    iter_lines,
    line_eval,
    parse_line,
    parse_list,
    say,
    to_row,
)

RECENT = "recent.jsonl"
# Each eval's newest ``RECENT_RUNS`` runs kept whole (and up to ``ROLL_UP_EVERY - 1`` more):
# the most any CI reader asks for (the HTML report's TREND_RUNS, the regression baseline's
# BASELINE_RUNS, the summary's TREND_POINTS; firewall.constants says each once).
HEADER_FIELDS = ("mode", "build_ts", "git_sha", "git_ref")  # a run's, said once
COLUMNS = (
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
NEWEST_ONLY = ("fingerprint", "inputs")


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
    runs = runs_of(next(lines, ""), skipped)
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
    runs = runs_of(next(lines, ""), skipped)
    drawn = _Drawn({run_id: run.get("build_ts", "") for run_id, run in runs.items()}, since, last)
    wanted = set(eval_ids)
    found: dict[str, list[float | None]] = {}
    for line in lines:
        read = _two_columns(line, wanted)
        places = drawn.of_text(read[1]) if read is not None else None
        medians: Any
        if read is not None and places is not None:
            eval_id, medians = read[0], read[2]
        elif (whole := _wanted_line(line, wanted, skipped)) is not None:
            eval_id, data = whole
            ids, medians = data.get("run_id"), data.get("median")
            places = drawn.of(ids) if isinstance(ids, list) else (0, [])
        else:
            continue
        if eval_id not in found:
            found[eval_id] = _points(places, medians)
    return found


Places = tuple[int, list[int]]  # a line's count of runs, and the places of those drawn


class _Drawn:
    """Which of a line's runs a sparkline draws: the newest ``last`` of those built at
    ``since`` or later. Asked once for each list of runs: most lines of a suite hold the
    same (5,000 of them at 5,000 evals)."""

    def __init__(self, stamps: dict[str, str], since: str, last: int):
        self.stamps, self.since, self.last = stamps, since, last
        self._known: dict[str, Places | None] = {}

    def of_text(self, ids: str) -> Places | None:
        """``of`` a list of runs as its line holds it; None when the text is not a list."""
        if ids not in self._known:
            decoded = parse_list(ids)
            self._known[ids] = None if decoded is None else self.of(decoded)
        return self._known[ids]

    def of(self, ids: list[Any]) -> Places:
        """The places drawn of a line's runs, oldest first (a run the header does not know
        is passed over)."""
        places: list[int] = []
        for i in range(len(ids) - 1, -1, -1):
            stamp = self.stamps.get(ids[i]) if isinstance(ids[i], str) else None
            if stamp is None:
                continue
            if stamp < self.since or len(places) >= self.last:
                break
            places.append(i)
        return len(ids), places[::-1]


def _points(places: Places, medians: Any) -> list[float | None]:
    """The medians at ``places`` (none drawn of a column that is not a value per run)."""
    count, at = places
    if not isinstance(medians, list) or len(medians) != count:
        return [None] * len(at)
    return [_number(medians[i]) for i in at]


def _number(value: Any) -> float | None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if number else None


def _two_columns(line: str, wanted: set[str]) -> tuple[str, str, list[Any]] | None:
    """A wanted eval's line of ``recent.jsonl`` read for a sparkline: its id, its runs'
    list as text (``_Drawn`` decodes each text once) and its medians, each found where
    its key stands (``"median":[``), the rest of the line passed over. None when the
    line is not as ``_render_line`` writes it, or of an eval not wanted (then the caller
    reads it whole, and says what is wrong).

    A key followed by ``[`` is a column: nothing else in a line is (a drift's field
    name is followed by a number, an input's by a string). A column's text is cut at
    its first ``]``: a list decodes from that cut only if it is the whole of it.
    """
    if len(line) > MAX_LINE or (eval_id := line_eval(line)) is None or eval_id not in wanted:
        return None
    ids, medians = _list_text(line, '"run_id":['), _list_text(line, '"median":[')
    decoded = None if medians is None else parse_list(medians)
    return None if ids is None or decoded is None else (eval_id, ids, decoded)


def _list_text(line: str, key: str) -> str | None:
    """The text of the list after ``key`` (which ends with its ``[``), up to its first ``]``."""
    at = line.find(key)
    end = line.find("]", at) if at >= 0 else -1
    return line[at + len(key) - 1 : end + 1] if end >= 0 else None


def recent_run_ids(text: str | bytes) -> set[str]:
    """The runs ``recent.jsonl`` holds rows of: a run file of one of them is no news."""
    return set(runs_of(next(iter_lines(text), ""), None))


def _entries_newest_first(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``_entries`` from the newest, each built only when asked for: a reader of a few
    points an eval builds a few entries, not thirty."""
    ids = data.get("run_id")
    if not isinstance(ids, list):
        return
    columns = columns_of(data, ids)
    for i in range(len(ids) - 1, -1, -1):
        if isinstance(ids[i], str):
            yield {c: values[i] for c, values in columns.items() if values[i] not in EMPTY}


def columns_of(data: dict[str, Any], ids: list[Any]) -> dict[str, list[Any]]:
    """A line's columns that hold a value for each of its runs (others are garbage)."""
    return {c: v for c in COLUMNS if isinstance(v := data.get(c), list) and len(v) == len(ids)}


def runs_of(line: str, skipped: Callable[[str], None] | None) -> dict[str, dict[str, Any]]:
    """The header's runs: run id to the fields a run says once (garbage left out)."""
    header = parse_line(line, skipped)
    if header is None or header.get("schema_version") != FORMAT_VERSION:
        if header is not None:
            say(skipped, f"a recent file of format {header.get('schema_version')!r}")
        return {}
    runs = header.get("runs")
    if not isinstance(runs, dict):
        return {}
    return {
        run_id: {f: run[f] for f in HEADER_FIELDS if isinstance(run.get(f), str)}
        for run_id, run in runs.items()
        if isinstance(run, dict)
    }
