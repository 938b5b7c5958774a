"""Writing ``recent.jsonl`` (``firewall.store.recent``): a push folds its run into it.

Every push of a run changes the line of every eval it ran: 5,000 lines at 5,000
evals, about fifteen megabytes. Each eval's line rolls its oldest runs up at the
eval's turn, one push in ``ROLL_UP_EVERY``, the turns staggered by the evals' ids
(``_Limits``), so that each push rolls up a tenth of a suite. The usual line, whose
runs the new ones come after, is changed on its text (``firewall.store.recenttext``);
any other line (a column new to it, runs out of order, a line not as written) is
decoded and folded entry by entry, and written whole (``_fold_columns``, ``_fold``);
the two give the same bytes for a line this module wrote.
"""

from __future__ import annotations

import json
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from firewall.constants import RECENT_RUNS, ROLL_UP_EVERY
from firewall.store.history import HistoryRow
from firewall.store.recent import COLUMNS, HEADER_FIELDS, NEWEST_ONLY, columns_of, runs_of
from firewall.store.recenttext import Folded, Rolled, WeekSpan, appended, fallen_rows
from firewall.store.rollups import rolled, week_or_none
from firewall.store.statefiles import (
    EMPTY,
    FORMAT_VERSION,
    iter_lines,
    line_eval,
    parse_line,
    parse_list,
    short_fields,
)

Fallen = dict[str, list[dict[str, Any]]]  # a week to the rolled-up rows falling into it


class _Limits(NamedTuple):
    """How many runs a line keeps, and when its oldest roll up: at its eval's turn, one push
    in ``period``, the turns staggered by the evals' ids (``_turn``), so that each push
    rolls up a ``period``-th of a suite's evals and no push rolls them all; and at any
    push when the line would hold more than ``most`` (an eval run twice in a push, or a
    line left over from a firewall that rolled every eval up at once)."""

    keep: int
    period: int
    push: int  # this push's number: the pushes folded into the file before it

    @property
    def most(self) -> int:
        return self.keep + 2 * self.period - 1

    def dropped(self, eval_id: str, held: int) -> int:
        """How many of ``held`` runs fall out of an eval's line: none while they fit."""
        if held <= self.keep:
            return 0
        due = held > self.most or (_turn(eval_id) + self.push) % self.period == 0
        return held - self.keep if due else 0


def _turn(eval_id: str) -> int:
    """An eval's place in the cycle of roll-ups: a hash of its id, the same in every process
    (``hash`` is salted per process)."""
    return zlib.crc32(eval_id.encode("utf-8", "surrogatepass"))


class _Asked:
    """What a fold asks of the runs its lines name, asked once for each list of runs: most
    lines name the same, 5,000 of them at 5,000 evals."""

    def __init__(self, runs: dict[str, dict[str, Any]], limits: _Limits):
        self.runs, self.limits = runs, limits
        self._order: dict[tuple[str, ...], bool] = {}
        self._weeks: dict[tuple[str, ...], list[WeekSpan]] = {}
        self._named: dict[tuple[str, Any], list[str] | None] = {}

    def in_order(self, ids: list[Any], named: list[Any], entries: list[dict[str, Any]]) -> bool:
        """``_come_after`` for a line's runs (``ids``) and the new ones (``named``: both)."""
        try:
            return self._order[tuple(named)]
        except KeyError:
            pass
        except TypeError:  # a run id that is a list or a map: garbage
            return False
        fine = all(isinstance(run_id, str) for run_id in named)
        self._order[tuple(named)] = fine and _come_after(ids, entries, self.runs, self.limits.keep)
        return self._order[tuple(named)]

    def named(self, ids: str, entry: dict[str, Any]) -> list[str] | None:
        """The runs a line names (``ids``: their list as the line holds it) with the entry's
        run after them; None when the list is not of run ids or the entry's run does not
        simply come after them (``in_order``). One list, decoded once, for every line
        that holds the same text."""
        key = (ids, entry.get("run_id"))
        if key not in self._named:
            decoded = parse_list(ids)
            named = None if decoded is None else [*decoded, key[1]]
            if decoded is not None and named is not None:
                named = named if self.in_order(decoded, named, [entry]) else None
            self._named[key] = named
        return self._named[key]

    def weeks(self, ids: list[str], drop: int) -> list[WeekSpan]:
        """The weeks a line's oldest ``drop`` runs (in time order) fall into, each with its
        runs and the last one's time; a run of no time (garbage on the branch) is left out."""
        key = tuple(ids[:drop])
        if key not in self._weeks:
            stamps = [self.runs.get(run_id, {}).get("build_ts") for run_id in key]
            spans: list[WeekSpan] = []
            at = 0
            while at < drop:
                week, end = week_or_none(stamps[at]), at + 1
                while end < drop and week_or_none(stamps[end]) == week:
                    end += 1
                if week is not None:
                    spans.append((week, range(at, end), str(stamps[end - 1])))
                at = end
            self._weeks[key] = spans
        return self._weeks[key]


def fold_recent(
    text: str | bytes | None,
    rows: Iterable[HistoryRow],
    *,
    keep: int = RECENT_RUNS,
    room: int = ROLL_UP_EVERY - 1,
) -> tuple[str, Fallen]:
    """``recent.jsonl`` with ``rows`` added, and what falls out of it, rolled up (per week,
    one row per eval: ``firewall.store.rollups.rolled``): each eval keeps its newest
    ``keep`` runs, and about ``room`` more; at its turn, one push in ``room + 1``, its
    line falls back to ``keep`` (``_Limits``). Lines of evals without new rows are kept
    as they are; a line that cannot be read is dropped (its reader said so)."""
    lines = iter_lines(text or "")  # each line decoded alone: no copy of the whole file
    header = next(lines, "")
    runs = runs_of(header, None)
    new = _new_entries(rows, runs)
    push = _pushes(header)
    asked = _Asked(runs, _Limits(keep, room + 1, push))
    folded: dict[str, Folded] = {}
    for line in lines:
        named = line_eval(line)
        if named is not None and named in new and named not in folded:
            on_text = appended(named, line, new[named], asked)
            if on_text is not None:
                folded[named] = on_text
                del new[named]
                continue
        data = parse_line(line, None)
        if data is None or not isinstance(eval_id := data.get("eval_id"), str):
            continue
        if eval_id not in folded:
            entries = new.pop(eval_id, None)
            folded[eval_id] = _fold_line(eval_id, line, data, entries, asked)
    for eval_id, entries in new.items():
        folded[eval_id] = _fold(eval_id, entries, runs, asked.limits)
    fallen: Fallen = defaultdict(list)
    for _, _, out in folded.values():
        for week, document in out:
            fallen[week].append(document)
    return _render_recent(runs, folded, push + 1), dict(fallen)


def _new_entries(
    rows: Iterable[HistoryRow], runs: dict[str, dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """The rows as each eval's entries (its columns' values of one run), their runs' own
    fields added to ``runs``."""
    new: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        document = short_fields(row)
        runs[row.run_id] = {f: document[f] for f in HEADER_FIELDS if f in document}
        new[row.eval_id].append({c: document[c] for c in COLUMNS if c in document})
    return new


def _fold_line(
    eval_id: str,
    line: str,
    data: dict[str, Any],
    entries: list[dict[str, Any]] | None,
    asked: _Asked,
) -> Folded:
    """One eval's line with its new entries folded in; without any, the line as it is."""
    if entries is None:
        ids = data.get("run_id")
        return line, [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else [], []
    folded = _fold_columns(eval_id, data, entries, asked)
    if folded is None:  # out of order, a run twice, garbage: entry by entry
        folded = _fold(eval_id, _entries(data) + entries, asked.runs, asked.limits)
    return folded


def turn_comes(header: str, eval_ids: Iterable[str], room: int = ROLL_UP_EVERY - 1) -> bool:
    """Whether folding ``eval_ids`` into a recent file with this ``header`` is some eval's
    turn to roll up: known before the fold, so that its weeks can be fetched beside it
    (a guess: a line may hold too few runs yet to roll any up)."""
    push = _pushes(header)
    return any((_turn(eval_id) + push) % (room + 1) == 0 for eval_id in eval_ids)


def _pushes(header: str) -> int:
    """The pushes folded into a recent file so far, as its header counts them (0 for a
    file an older firewall wrote: it did not count)."""
    data = parse_line(header, None) if header else None
    count = data.get("pushes") if data is not None else None
    return count if type(count) is int and count >= 0 else 0


def _render_recent(runs: dict[str, dict[str, Any]], folded: dict[str, Folded], pushes: int) -> str:
    """``recent.jsonl``: the header with the pushes folded in and the runs its lines name,
    then a line per eval."""
    named = {run_id for _, ids, _ in folded.values() for run_id in ids}
    header = {
        "schema_version": FORMAT_VERSION,
        "pushes": pushes,
        "runs": {run_id: runs[run_id] for run_id in sorted(named) if run_id in runs},
    }
    body = [folded[eval_id][0] for eval_id in sorted(folded)]
    return "\n".join([json.dumps(header, separators=(",", ":")), *body, ""])


def _fold_columns(
    eval_id: str,
    data: dict[str, Any],
    entries: list[dict[str, Any]],
    asked: _Asked,
) -> Folded | None:
    """``_fold`` of the usual case, column by column, with no entry built but the fallen
    ones': the line's runs are known and in time order, and the new runs come after them.
    None when that is not so (then ``_fold`` sorts it out entry by entry)."""
    ids = data.get("run_id")
    if not isinstance(ids, list):
        return None
    named = [*ids, *(e.get("run_id") for e in entries)]
    if not asked.in_order(ids, named, entries):
        return None
    old = columns_of(data, ids)
    drop = asked.limits.dropped(eval_id, len(ids) + len(entries))
    fallen = fallen_rows(eval_id, old, asked.weeks(ids, drop))
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


def _rolled_up(eval_id: str, dropped: Iterable[dict[str, Any]]) -> list[Rolled]:
    """One eval's runs that fall out of its line (a run's fields each), rolled up by week;
    a run of no time (garbage on the branch) is left out."""
    weeks: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in dropped:
        if (week := week_or_none(run.get("build_ts"))) is not None:
            weeks[week].append(run)
    return [(week, rolled(eval_id, week, kept)) for week, kept in sorted(weeks.items())]


def _shifted(
    old: dict[str, list[Any]], staying: int, drop: int, entries: list[dict[str, Any]]
) -> dict[str, list[Any]]:
    """A line's columns without their oldest ``drop`` values and with the new entries'
    after the ``staying`` others (None where the line had no such column)."""
    present = set(old).union(*entries)
    pad = [None] * staying
    return {
        c: [*(old[c][drop:] if c in old else pad), *(e.get(c) for e in entries)]
        for c in COLUMNS
        if c in present
    }


def _newest_only(columns: dict[str, list[Any]]) -> None:
    """The ``NEWEST_ONLY`` columns emptied but for the newest fingerprinted run's value."""
    marks = columns.get("fingerprint", [])
    newest = next((i for i in range(len(marks) - 1, -1, -1) if marks[i] not in EMPTY), None)
    for column in NEWEST_ONLY:
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
    eval_id: str, entries: list[dict[str, Any]], runs: dict[str, dict[str, Any]], limits: _Limits
) -> Folded:
    """One eval's line from its runs' entries (one per run, the newest kept), the runs it
    names, and the rows of the runs that fell out, oldest first."""
    by_run = {e["run_id"]: e for e in entries if e.get("run_id") in runs}
    ordered = sorted(by_run.values(), key=lambda e: (runs[e["run_id"]].get("build_ts", ""),))
    drop = limits.dropped(eval_id, len(ordered))
    fallen = _rolled_up(eval_id, ({**entry, **runs[entry["run_id"]]} for entry in ordered[:drop]))
    ordered = ordered[drop:]
    newest = next((e for e in reversed(ordered) if e.get("fingerprint")), None)
    ordered = [
        e if e is newest else {c: v for c, v in e.items() if c not in NEWEST_ONLY} for e in ordered
    ]
    columns = {column: [entry.get(column) for entry in ordered] for column in COLUMNS}
    return _render_line(eval_id, columns), [e["run_id"] for e in ordered], fallen


def _entries(data: dict[str, Any]) -> list[dict[str, Any]]:
    """A line's columns as one entry per run (a value missing or of no run is left out)."""
    ids = data.get("run_id")
    if not isinstance(ids, list):
        return []
    columns = columns_of(data, ids)
    return [
        {c: values[i] for c, values in columns.items() if values[i] not in EMPTY}
        for i, run_id in enumerate(ids)
        if isinstance(run_id, str)
    ]
