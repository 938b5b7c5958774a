"""A line of ``recent.jsonl`` changed on its text: how the usual push folds a run in.

Every push of a run changes the line of every eval it ran: 5,000 lines at 5,000
evals, about fifteen megabytes. A line as ``firewall.store.recentfold`` writes it,
whose runs the new ones come after, is changed on its text (``appended``): each
column's new values are written after its old ones, which are neither built into
entries nor written again. Nine pushes in ten a line gets one run and rolls none
up: it is cut where its columns end, and read no further than their names and its
runs (``_grown``). At the eval's turn its columns are read, a column of numbers
still not decoded, its oldest values cut off the front of each, and rolled up
straight from the columns, decoding only the values that fall out. Any other line
is left to ``recentfold``, which decodes it; the three give the same bytes for a
line it wrote.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from firewall.store.recent import COLUMNS, NEWEST_ONLY
from firewall.store.rollups import rolled_span
from firewall.store.statefiles import EMPTY, LINE_START, MAX_LINE

# What falls out of a line: per week its runs fall into, their rolled-up row (as fields).
Rolled = tuple[str, dict[str, Any]]
Folded = tuple[str, list[str], list[Rolled]]  # an eval's line, the runs it names, the fallen
WeekSpan = tuple[str, range, str]  # a week, the runs of a line falling into it, the last's time


class Asked(Protocol):
    """What the fold knows of the runs its lines name, and when a line rolls up
    (``recentfold._Asked``)."""

    @property
    def limits(self) -> _Dropping: ...

    def in_order(self, ids: list[Any], named: list[Any], entries: list[dict[str, Any]]) -> bool: ...

    def named(self, ids: str, entry: dict[str, Any]) -> list[str] | None: ...

    def weeks(self, ids: list[str], drop: int) -> list[WeekSpan]: ...


class _Dropping(Protocol):
    def dropped(self, eval_id: str, held: int) -> int: ...


def fallen_rows(eval_id: str, old: Mapping[str, list[Any]], weeks: list[WeekSpan]) -> list[Rolled]:
    """A line's oldest runs rolled up, a row per week they fall into (``weeks``: the
    fold's ``_Asked.weeks``)."""
    return [(week, rolled_span(eval_id, week, old, span, last)) for week, span, last in weeks]


# A value decoded where it stands, and where it ends: json's own scanner, which its
# decoder calls for each value (typeshed does not declare it).
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_Span = tuple[int, int, int]  # a column's comma before its key, its list's start and end
# The columns of numbers alone. Their text is passed over, not decoded: a float made for
# each of 35 runs of ten columns of 5,000 lines was most of a push's fold. A roll-up
# decodes what it reads of them (``_Flat``).
_NUMERIC = frozenset(
    {"k", "median", "iqr", "mean", "sd", "n", "pass_rate", "trials", "seconds", "cost_usd"}
)
_FLAT = re.compile(r"\[[-+.0-9eEnulNaIfity,]*\]")  # no string, list or map: commas split values


class _Garbled(ValueError):
    """A column passed over as numbers is not JSON: the line is folded whole (and dropped)."""


class _Flat:
    """A column of numbers as its line holds it, decoded only as far as it is read."""

    __slots__ = ("count", "text")

    def __init__(self, text: str):
        self.text = text
        self.count = text.count(",") + 1 if len(text) > 2 else 0

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, at: int | slice) -> Any:
        tokens = self.text[1:-1].split(",")
        try:
            if isinstance(at, slice):
                return json.loads(f"[{','.join(tokens[at])}]")
            return json.loads(tokens[at])
        except (ValueError, IndexError):
            raise _Garbled(self.text[:80]) from None


def appended(eval_id: str, line: str, entries: list[dict[str, Any]], asked: Asked) -> Folded | None:
    """``_fold_columns`` of the usual case on the line's text: the new runs come after the
    line's, so each column's new values are written after its old ones, and the oldest
    that fall out are cut off the front of its text. None when the line is not as
    ``_render_line`` writes it or a column is new to it (then the line is folded whole)."""
    if len(entries) == 1 and (grown := _grown(eval_id, line, entries[0], asked)) is not None:
        return grown
    read = _as_written(line, entries)
    if read is None:
        return None
    values, spans = read
    ids = values["run_id"]
    named = [*ids, *(e.get("run_id") for e in entries)]
    if not asked.in_order(ids, named, entries):
        return None
    change = _Change(values, entries, asked.limits.dropped(eval_id, len(named)))
    pieces, at = [], 0
    try:
        for column, (comma, start, end) in spans.items():
            text = change.column(column, line[start:end])
            pieces.append(line[at:comma])
            if text is not None:  # None: a column left with no value is left out
                pieces += [line[comma:start], text]
            at = end
        fallen = fallen_rows(eval_id, values, asked.weeks(ids, change.drop))
    except _Garbled:
        return None
    pieces.append(line[at:])
    return "".join(pieces), named[change.drop :], fallen


def _grown(eval_id: str, line: str, entry: dict[str, Any], asked: Asked) -> Folded | None:
    """``appended`` of nine pushes in ten: one new run, no roll-up due, every column the
    run has already in the line. Each column's text gets the run's value before its
    ``]``, and the line is read no further than its columns' names and its runs (which
    the fold decodes once for all the lines that hold the same). None for any other
    line or push (then ``appended`` reads the line column by column).

    The line is cut where a column ends (``],"``): nowhere else in a line as written,
    where a quote in a string is escaped and a string that ends in ``],`` is followed
    by a comma or a ``]``, not by a column's name. A line cut anywhere else does not
    read as names of columns, in order, each once, and is left to ``appended``. A
    column that does not hold a value per run (garbage) stays as it was; the line's
    turn to roll up, one push in ten, reads every column and writes it whole.
    """
    start = f'{LINE_START}{_text(eval_id)},"run_id":['
    if not line.startswith(start) or not line.endswith("]}"):
        return None
    parts = line[:-2].split('],"')
    names = [part[:at] for part in parts[1:] if (at := part.find('":[')) > 0]
    shape = _as_rendered(tuple(names)) if len(names) == len(parts) - 1 else None
    if shape is None or not entry.keys() <= shape or any(p[-1] == "[" for p in parts):
        return None  # not as written, a column new to the line, or one with no value
    named = asked.named(f"{parts[0][len(start) - 1 :]}]", entry)
    if named is None or asked.limits.dropped(eval_id, len(named)):
        return None
    held = len(named) - 1
    fresh = entry.get("fingerprint") not in EMPTY  # its NEWEST_ONLY values replace the line's
    pieces = [f"{parts[0]},{_text(entry['run_id'])}"]
    for name, part in zip(names, parts[1:], strict=True):
        if name not in NEWEST_ONLY:
            pieces.append(f"{part},{_text(entry.get(name))}")
        elif not fresh:  # the line's newest value stays the newest
            pieces.append(f"{part},null")
        elif (value := entry.get(name)) not in EMPTY:
            pieces.append(f'{name}":[{"null," * held}{_text(value)}')
    return '],"'.join(pieces) + "]}", named, []


@functools.lru_cache(maxsize=64)
def _as_rendered(names: tuple[str, ...]) -> frozenset[str] | None:
    """A line's columns, ``run_id`` with the ``names`` after it, when these are as
    ``_render_line`` writes them (known, each once, in ``COLUMNS``' order); else None."""
    if list(names) != [c for c in COLUMNS[1:] if c in names] or len(set(names)) != len(names):
        return None
    return frozenset(("run_id", *names))


def _as_written(
    line: str, entries: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, _Span]] | None:
    """A line's columns and their places, when it is as ``_render_line`` writes it (each
    column a value per run, one fingerprint at most) and holds every column the new
    entries have; else None."""
    read = _columns_in(line)
    if read is None:
        return None
    values, spans = read
    ids = values.get("run_id")
    if not isinstance(ids, list) or not ids:
        return None
    if any(type(v) not in _COLUMN_TYPES or len(v) != len(ids) for v in values.values()):
        return None
    if any(c not in spans for entry in entries for c in entry):
        return None
    marked = values.get("fingerprint", [])
    if len(marked) - marked.count(None) > 1:  # more than the newest: not as written
        return None
    return values, spans


class _Change:
    """What a line's columns become: ``drop`` oldest values off, the entries' on."""

    def __init__(self, values: dict[str, Any], entries: list[dict[str, Any]], drop: int):
        self.values, self.entries, self.drop = values, entries, drop
        self.held = len(values["run_id"])
        self.newest = _newest_marked(entries)
        self.marked = values.get("fingerprint") or [None] * self.held

    def column(self, column: str, text: str) -> str | None:
        """The column's new text, from its old ``text``; None when it is left empty."""
        old, entries, drop = self.values[column], self.entries, self.drop
        if column in NEWEST_ONLY:
            return self._newest_only(column, text)
        if drop:
            return _cut_column(text[1:-1], old, drop, entries, column)
        return f"{text[:-1]},{','.join([_text(entry.get(column)) for entry in entries])}]"

    def _newest_only(self, column: str, text: str) -> str | None:
        """A ``NEWEST_ONLY`` column: the newest fingerprinted run's value alone."""
        entries, newest = self.entries, self.newest
        if newest is not None:  # the new value replaces the old
            value = entries[newest].get(column)
            if value in EMPTY:
                return None
            after = ",null" * (len(entries) - newest - 1)
            return f"[{'null,' * (self.held - self.drop + newest)}{_text(value)}{after}]"
        if not self.drop:  # the line's newest value stays the newest
            return f"{text[:-1]}{',null' * len(entries)}]"
        return self._kept_newest(column, text)

    def _kept_newest(self, column: str, text: str) -> str | None:
        """A ``NEWEST_ONLY`` column whose newest value is the line's, its oldest cut off: the
        value's text moved to its new place (a line as written holds no other value), or
        None when it falls out too."""
        drop, held, added = self.drop, self.held, len(self.entries)
        at = _last_marked(self.marked, drop)
        if at is None or self.values[column][at] in EMPTY:
            return None
        before, after = "[" + "null," * at, ",null" * (held - at - 1) + "]"
        if not (text.startswith(before) and text.endswith(after)):  # not as written
            kept = [*self.values[column][drop:], *(e.get(column) for e in self.entries)]
            marks = [*self.marked[drop:], *(e.get("fingerprint") for e in self.entries)]
            return _newest_column(kept, marks)
        value = text[len(before) : len(text) - len(after)]
        return f"[{'null,' * (at - drop)}{value}{',null' * (held - at - 1 + added)}]"


def _holds_value(values: list[Any]) -> bool:
    """Whether any of ``values`` is not empty (``_render_line`` leaves a column without)."""
    return any(v is not None and v not in EMPTY for v in values)


def _newest_column(merged: list[Any], marks: list[Any]) -> str | None:
    """A ``NEWEST_ONLY`` column's text: the value of the newest run with a fingerprint
    (``marks``), the others null; None when that leaves it no value (``_newest_only``)."""
    newest = next((i for i in range(len(marks) - 1, -1, -1) if marks[i] not in EMPTY), None)
    kept = [v if i == newest else None for i, v in enumerate(merged)]
    if all(v is None or v in EMPTY for v in kept):
        return None
    return json.dumps(kept, separators=(",", ":"), ensure_ascii=False)


def _cut_column(
    inner: str, old: list[Any], drop: int, entries: list[dict[str, Any]], column: str
) -> str | None:
    """A column's text without its oldest ``drop`` values and with the new entries'; None
    when no value is left in it. The old values' text is cut at a comma where every comma
    separates two values (as many commas as values, less one); else written again."""
    news = [entry.get(column) for entry in entries]
    if not _holds_value(news) and not _holds_value(old[drop:]):
        return None
    if drop >= len(old):
        left = ""
    elif inner.count(",") == len(old) - 1:
        left = inner.split(",", drop)[drop]
    else:
        left = json.dumps(old[drop:], separators=(",", ":"), ensure_ascii=False)[1:-1]
    added = ",".join([_text(value) for value in news])
    return f"[{left},{added}]" if left else f"[{added}]"


def _columns_in(line: str) -> tuple[dict[str, Any], dict[str, _Span]] | None:
    """A line's columns and where each stands, read as ``_render_line`` writes a line (no
    space, the eval first, each key once); None for any other line."""
    if len(line) > MAX_LINE or not line.startswith(LINE_START) or not line.endswith("}"):
        return None
    values: dict[str, Any] = {}
    spans: dict[str, _Span] = {}
    try:
        _, at = _SCAN(line, len(LINE_START))
        while line.startswith(',"', at):
            column, after = _SCAN(line, at + 1)
            if column not in COLUMNS or column in values or line[after] != ":":
                return None
            if column in _NUMERIC and (flat := _FLAT.match(line, after + 1)) is not None:
                end = flat.end()
                values[column] = _Flat(line[after + 1 : end])
            else:
                values[column], end = _SCAN(line, after + 1)
            spans[column] = (at, after + 1, end)
            at = end
    except (StopIteration, ValueError, RecursionError, IndexError):
        return None
    return (values, spans) if at == len(line) - 1 else None


def _last_marked(marked: list[Any], start: int) -> int | None:
    """The index of a line's newest run with a fingerprint (``marked``: its fingerprints),
    from ``start`` on; None when none has one."""
    for i in range(len(marked) - 1, start - 1, -1):
        if marked[i] not in EMPTY:
            return i
    return None


_COLUMN_TYPES = (list, _Flat)


def _newest_marked(entries: list[dict[str, Any]]) -> int | None:
    """The newest of the new entries with a fingerprint: its ``NEWEST_ONLY`` values replace
    the line's (``_newest_only``); None when none has one (the line's stay)."""
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].get("fingerprint") not in EMPTY:
            return i
    return None


def _plain(text: str) -> bool:
    """Whether json.dumps writes a printable ASCII string as it is: nothing to escape."""
    return '"' not in text and "\\" not in text


def _text(value: Any) -> str:
    """A value as ``_render_line``'s ``json.dumps`` writes it, the common ones directly."""
    kind = type(value)
    if value is None:
        return "null"
    if (kind is float and math.isfinite(value)) or kind is int:
        return repr(value)
    if kind is str and value.isascii() and value.isprintable() and _plain(value):
        return f'"{value}"'
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
