"""The newest run's file on the state branch, and the line helpers every state file shares.

    runs/2026/12/01/090512Z-3f2a9c1b7d4e.jsonl   the newest run: a header, then a row per eval

Each line of a run file is a history row without the fields its header
already says (run id, mode, time, commit, ref), without empty ones, and with
its numbers to four decimals. The other files on the branch are written the
same way, a header then one line per eval, and read with this module's
helpers: ``recent.jsonl`` is ``firewall.store.recent``'s, the weekly rollups
(``rollup/2026-W44.jsonl``) are ``firewall.store.rollups``'s.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from firewall.store.history import HistoryRow, RunSummary

FORMAT_VERSION = 1
DECIMALS = 4
MAX_LINE = 256 * 1024  # characters; a row is a few hundred, with many drift fields a few thousand
_RUN_FIELDS = ("run_id", "mode", "build_ts", "git_sha", "git_ref")
EMPTY: tuple[object, ...] = (None, "", (), [], {})
ROW_FIELDS = tuple(field.name for field in dataclasses.fields(HistoryRow))  # eval_id first


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
    lines += [compact_line(row, leave_out=_RUN_FIELDS) for row in rows]
    return path, "\n".join(lines) + "\n"


def compact_line(row: HistoryRow, *, leave_out: Sequence[str] = ()) -> str:
    """A row as one short line: no empty fields, numbers to 4 decimals."""
    return json.dumps(
        short_fields(row, leave_out=leave_out), separators=(",", ":"), ensure_ascii=False
    )


def short_fields(row: HistoryRow, *, leave_out: Sequence[str] = ()) -> dict[str, object]:
    """A row's fields as a run file keeps them: no empty ones, numbers to 4 decimals.

    Four decimals are finer than any decision looks (a threshold, an IQR limit, a
    drop of 0.01), and random trailing digits are what compresses worst: at a
    thousand evals they were most of what a job had to fetch.
    """
    document: dict[str, object] = {}
    for key in ROW_FIELDS:
        value = getattr(row, key)
        if key in leave_out or value in EMPTY:
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
    header = parse_line(lines[0], skipped) if lines else None
    if header is None or header.get("schema_version") != FORMAT_VERSION:
        if lines and header is not None:
            say(skipped, f"a run file of format {header.get('schema_version')!r}")
        return
    run = {f: header.get(f) for f in _RUN_FIELDS}
    for line in lines[1:]:
        data = parse_line(line, skipped)
        if data is not None and (row := to_row({**data, **run}, skipped)) is not None:
            yield row


def run_summary(text: str, skipped: Callable[[str], None] | None = None) -> RunSummary | None:
    """The run a run file is of and its counts, from its header; counted from its rows
    (as ``parse_file`` reads them) when the header does not say them. None for no rows."""
    header = parse_line(next(iter_lines(text), ""), None)
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


def parse_line(line: str, skipped: Callable[[str], None] | None) -> dict[str, Any] | None:
    """One line's JSON object, or None (said) when it is not one we can read.

    A line longer than ``MAX_LINE`` is not parsed at all: no row is that long, and parsing
    garbage of a hundred megabytes is what a CI job cannot afford. Nesting deep enough to
    exhaust the parser's recursion is garbage too, not a reason to stop the command.
    """
    if not line.strip():
        return None
    if len(line) > MAX_LINE:
        say(skipped, f"a line of {len(line):,} characters (at most {MAX_LINE:,} are read)")
        return None
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:
        say(skipped, f"a line that is not JSON ({type(exc).__name__})")
        return None
    if not isinstance(data, dict):
        say(skipped, "a line that is not a JSON object")
        return None
    return data


def parse_list(text: str) -> list[Any] | None:
    """A column's text (a JSON list, as a line holds it) decoded; None when it is not one:
    its line is then read whole, and what is wrong said there."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, list) else None


def to_row(data: dict[str, Any], skipped: Callable[[str], None] | None) -> HistoryRow | None:
    try:
        row = HistoryRow.from_json(data)
    except (ValueError, TypeError, OverflowError, RecursionError):
        row = None
    if row is None:
        say(skipped, "a line that is not a history row")
    return row


def say(skipped: Callable[[str], None] | None, what: str) -> None:
    if skipped is not None:
        skipped(what)


def iter_lines(text: str | bytes) -> Iterator[str]:
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


LINE_START = '{"eval_id":'
_STRING = json.JSONDecoder()


def line_eval(line: str) -> str | None:
    """The eval a line of ``recent.jsonl`` or of a rollup is of, from its first field alone
    (as ``firewall.store.recent`` writes it); None when it does not begin so (the line is
    parsed whole then)."""
    if not line.startswith(LINE_START):
        return None
    try:
        value, _ = _STRING.raw_decode(line, len(LINE_START))
    except ValueError:
        return None
    return value if isinstance(value, str) else None
