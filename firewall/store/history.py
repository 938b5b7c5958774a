"""The history: one row per eval per run, append-only, for trends, calibration and triage.

A ``HistoryStore`` is where the rows live. ``LocalHistory`` keeps them in one
JSON-lines file (``history`` in the config); another backend only has to
append a run's rows, scan them back, and read a recent window of them. Rows
are typed from the writer to the reader: ``rows_for`` builds them from a
decided run, ``scan`` parses them back leniently (a torn tail or a hand edit is
skipped, never fatal). What every run reads (the trends of its summary, the
last run of `firewall status`) is read from the end of the file, so that it
costs the same in a repository's first month as in its fifth year.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
import re
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from firewall import output
from firewall.artefact import Artefact
from firewall.errors import HistoryReadError, HistoryWriteError
from firewall.files import Refused, lines_capped, open_regular, os_reason
from firewall.policy import Status
from firewall.store.atomic import locked, write_atomic
from firewall.store.jsonfile import loads
from firewall.timeutil import to_text


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryRow:
    """One eval's probe in one run, as the history keeps it (contract §6)."""

    eval_id: str
    run_id: str
    mode: str
    status: str
    k: int
    build_ts: str  # ISO 8601 UTC with Z: compares as text in time order
    median: float | None = None
    iqr: float | None = None
    mean: float | None = None
    sd: float | None = None
    n: int = 0  # trials that scored
    pass_rate: float | None = None
    drift: Mapping[str, float] = dataclasses.field(default_factory=dict)
    model_ids: tuple[str, ...] = ()
    prompt_versions: tuple[str, ...] = ()
    git_sha: str | None = None
    git_ref: str | None = None
    # What the probe cost and what its eval's outcome depended on (firewall.fingerprint):
    # what an affected-only pull request compares with, and carries instead of probing.
    fingerprint: str | None = None
    inputs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    trials: int = 0
    seconds: float | None = None
    cost_usd: float | None = None

    def to_json(self) -> str:
        # eval_id first: `scan` skips other evals' rows by this prefix before parsing them.
        document = {field: getattr(self, field) for field in _FIELDS}
        document["drift"] = dict(self.drift)
        document["model_ids"] = list(self.model_ids)
        document["prompt_versions"] = list(self.prompt_versions)
        document["inputs"] = dict(self.inputs)
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, data: Any) -> HistoryRow | None:
        """A row from a parsed line, or None when it is not one (a wrong type keeps a default)."""
        if not isinstance(data, dict) or not isinstance(data.get("eval_id"), str):
            return None
        drift, inputs = data.get("drift"), data.get("inputs")
        return cls(
            eval_id=data["eval_id"],
            run_id=_text(data.get("run_id")) or "",
            mode=_text(data.get("mode")) or "",
            status=_text(data.get("status")) or "",
            k=_count(data.get("k")),
            build_ts=_text(data.get("build_ts")) or "",
            median=_number(data.get("median")),
            iqr=_number(data.get("iqr")),
            mean=_number(data.get("mean")),
            sd=_number(data.get("sd")),
            n=_count(data.get("n")),
            pass_rate=_number(data.get("pass_rate")),
            drift={
                str(name): float(rate)
                for name, rate in (drift.items() if isinstance(drift, dict) else ())
                if _number(rate) is not None
            },
            model_ids=_texts(data.get("model_ids")),
            prompt_versions=_texts(data.get("prompt_versions")),
            git_sha=_text(data.get("git_sha")),
            git_ref=_text(data.get("git_ref")),
            fingerprint=_text(data.get("fingerprint")),
            inputs={
                str(name): value
                for name, value in (inputs.items() if isinstance(inputs, dict) else ())
                if isinstance(value, str)
            },
            trials=_count(data.get("trials")),
            seconds=_number(data.get("seconds")),
            cost_usd=_number(data.get("cost_usd")),
        )


_FIELDS = tuple(field.name for field in dataclasses.fields(HistoryRow))


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """The most recent run as `firewall status` shows it: which run, and how its evals came
    out (a status to the number of evals that had it)."""

    run_id: str
    mode: str
    build_ts: str
    counts: Mapping[str, int]

    @classmethod
    def of(cls, rows: Sequence[HistoryRow]) -> RunSummary | None:
        """The summary of one run's rows; None for no rows."""
        if not rows:
            return None
        counts: dict[str, int] = {}
        for row in rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        return cls(rows[0].run_id, rows[0].mode, rows[0].build_ts, counts)


class HistoryStore(Protocol):
    """Where the history lives: appended to once per run, scanned by every reader."""

    def describe(self) -> str:
        """The store as messages name it, e.g. the file's path."""

    def append(self, rows: Sequence[HistoryRow]) -> None:
        """Add one run's rows, all or none, without losing a concurrent writer's."""

    def scan(self, eval_ids: Collection[str] | None = None) -> Iterator[HistoryRow]:
        """Rows in the order they were written; with ``eval_ids``, only those evals'."""

    def recent(
        self,
        eval_ids: Collection[str] | None = None,
        *,
        since: dt.datetime,
        last: int | None = None,
        ref: str | None = None,
        weeks: bool = False,
    ) -> list[HistoryRow]:
        """The rows built at ``since`` or later, as ``scan`` orders them, at the cost of
        those rows only: however old the history, a trend window reads the window. With
        ``ref``, only rows of runs on that git ref; with ``last``, only each eval's newest
        ``last`` of them (a sparkline's points, a baseline's runs).

        A store that keeps only each eval's newest runs whole (the state branch) gives
        those alone, unless ``weeks`` asks for the older ones too, as one row per eval per
        week (mode ``rollup``, of no ref), which it may have to fetch. A store that keeps
        every run ignores ``weeks``."""

    def medians(
        self, eval_ids: Collection[str], *, since: dt.datetime, last: int
    ) -> dict[str, list[float | None]]:
        """Each eval's medians of ``recent(eval_ids, since=since, last=last)``, oldest first
        (an eval without a row there is left out): what a sparkline draws."""

    def last_run(self) -> list[HistoryRow]:
        """The rows of the most recent run."""

    def last_run_summary(self) -> RunSummary | None:
        """The most recent run and its counts, at what they cost to read (the state branch
        keeps them in the run file's first line); None when there is no run."""


def sample_sd(values: Sequence[float]) -> float:
    """The sample standard deviation (n - 1), summed with ``math.fsum``: within an ulp or
    two of ``statistics.stdev``, which sums exact fractions (20 times the cost), and
    exactly 0 for equal values, as it is."""
    if len(values) < 2:
        raise ValueError("a sample standard deviation needs at least two values")
    if min(values) == max(values):
        return 0.0
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((value - mean) ** 2 for value in values) / (len(values) - 1))


def rows_for(artefact: Artefact, *, run_id: Callable[[], str] | None = None) -> list[HistoryRow]:
    """One row per eval the run probed (an eval skipped in quarantine has no numbers to keep,
    and one carried from the default branch has the row of the probe it carries)."""
    current = (run_id or _new_run_id)()
    rows = []
    for report in artefact.evals:
        if (report.status is Status.QUARANTINED and not report.trials) or report.carried:
            continue
        scored = [t for t in report.trials if t.error is None]
        costs = [t.metrics["cost_usd"] for t in report.trials if "cost_usd" in t.metrics]
        scores = [t.score for t in scored if t.score is not None]
        rows.append(
            HistoryRow(
                eval_id=report.id,
                run_id=current,
                mode=artefact.run.mode,
                status=report.status.value,
                k=report.k,
                build_ts=to_text(artefact.run.started_at),
                median=report.stats.median,
                iqr=report.stats.iqr,
                mean=report.stats.mean,
                sd=sample_sd(scores) if len(scores) >= 2 else None,
                n=len(scores),
                pass_rate=report.stats.pass_rate,
                drift=dict(report.drift),
                model_ids=tuple(sorted({t.model_id for t in scored if t.model_id})),
                prompt_versions=tuple(
                    sorted({t.prompt_version for t in scored if t.prompt_version})
                ),
                git_sha=artefact.run.git_sha,
                git_ref=artefact.run.git_ref,
                fingerprint=report.fingerprint,
                inputs=dict(report.inputs),
                trials=len(report.trials),
                seconds=round(sum(t.duration_s for t in report.trials), 3),
                cost_usd=sum(costs) if costs else None,
            )
        )
    return rows


class LocalHistory:
    """The history as one JSON-lines file, appended under a lock.

    Lines that are not rows (torn by an interrupted write of an older version, or
    edited by hand, nested past what a parser reads, longer than ``MAX_LINE_BYTES``)
    are skipped; the first read that meets one says so, once, through ``warn``. A
    torn tail (no newline yet) is skipped silently: it may be a write in progress.
    Every read holds at most a line (of at most ``MAX_LINE_BYTES``) and a chunk in
    memory. A history that is no regular file (a FIFO, a link to ``/dev/zero``) or
    cannot be opened is a ``HistoryReadError`` naming it; one this user may not read
    (``EACCES``) is said once, named, and read as empty, so the command goes on.
    """

    def __init__(self, path: Path, *, warn: Callable[[str], None] = output.warn) -> None:
        self.path = path
        self._warn = warn
        self._warned = False

    def describe(self) -> str:
        return str(self.path)

    def append(self, rows: Sequence[HistoryRow]) -> None:
        """Append one run's rows in one write under the lock: whole, or not at all.

        A write that fails part-way (a full disk, a file-size limit) is cut back to
        the file's length before it, so that no torn row is left for the next append
        to glue onto, and raises ``HistoryWriteError``.
        """
        data = "".join(row.to_json() + "\n" for row in rows).encode()
        if not data:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with locked(self.path, "history"):
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    self._append_locked(fd, data, len(rows))
                finally:
                    os.close(fd)
        except OSError as exc:
            raise self._write_error(len(rows), exc, intact=True) from exc

    def _open(self) -> BinaryIO | None:
        """The history file open for reading, or None when there is none yet."""
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return None
        except Refused as exc:
            raise HistoryReadError(
                f"{self.path}: the history {exc}; point `history` in the config at a "
                "JSON-lines file, or remove what is there"
            ) from None
        except PermissionError as exc:
            # A file this user may not read (another user's, a CI cache restored with its
            # owner's mode) loses the trends and baselines it holds, not the run: said once.
            if not self._warned:
                self._warned = True
                self._warn(
                    f"{self.path}: cannot read the history ({os_reason(exc)}); this command "
                    "reads no history from it: make it readable, or point `history` in the "
                    "config at another file"
                )
            return None
        except OSError as exc:
            raise HistoryReadError(
                f"{self.path}: cannot read the history ({os_reason(exc)}); make it a readable "
                "file, or point `history` in the config at another one"
            ) from None
        return os.fdopen(fd, "rb")

    def _append_locked(self, fd: int, data: bytes, count: int) -> None:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # a torn last line must not swallow our first row
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            try:
                os.ftruncate(fd, size)
            except OSError:
                raise self._write_error(count, exc, intact=False) from exc
            raise

    def _write_error(self, count: int, exc: OSError, *, intact: bool) -> HistoryWriteError:
        reason = exc.strerror or str(exc)
        left = (
            "the file is as it was before this run"
            if intact
            else "it could not be cut back, so it may end in a torn row (readers skip it)"
        )
        return HistoryWriteError(
            f"{self.path}: could not append this run's {count} history rows ({reason}); "
            f"{left}. Free space on its disk or make it writable, or point `history` in the "
            "config at another file",
            path=self.path,
        )

    def scan(self, eval_ids: Collection[str] | None = None) -> Iterator[HistoryRow]:
        """Rows in file order. With ``eval_ids``, rows of other evals are skipped before they
        are parsed (rows written here start with their ``eval_id``)."""
        handle = self._open()
        if handle is None:
            return
        wanted = _wanted(eval_ids)
        skipped = 0
        with handle:
            for line in lines_capped(handle.fileno(), MAX_LINE_BYTES):
                if line is None:
                    skipped += 1
                    continue
                if wanted is not None and _other_eval(line, wanted):
                    continue
                row = _parse(line)
                if row is None:
                    skipped += line.endswith(b"\n") and not line.isspace()
                elif wanted is None or row.eval_id.encode() in wanted:
                    yield row
        self._skipped(skipped)

    def recent(
        self,
        eval_ids: Collection[str] | None = None,
        *,
        since: dt.datetime,
        last: int | None = None,
        ref: str | None = None,
        weeks: bool = False,
        chunk: int = 1 << 18,
    ) -> list[HistoryRow]:
        """Rows built at ``since`` or later, in file order, read backwards from the end;
        with ``ref`` and ``last`` as ``HistoryStore.recent`` says (the file keeps every
        run whole: ``weeks`` changes nothing).

        Runs append their rows when they finish, so the file is in time order give or
        take the length of a run: the read stops at a row older than ``since`` by
        ``APPEND_LAG``. What it costs is the window's rows, not the history's age.
        """
        handle = self._open()
        if handle is None:
            return []
        start, stop = to_text(since), to_text(since - APPEND_LAG)
        wanted = _wanted(eval_ids)
        blocks: list[list[HistoryRow]] = []  # the newest first
        skipped = 0
        with handle:
            for lines in _blocks_backwards(handle, chunk):
                rows, unread = _rows_since(lines, start, wanted, last_block=not blocks)
                blocks.append(rows)
                skipped += unread
                if _begins_before(lines, stop):
                    break
        self._skipped(skipped)
        found = [row for rows in reversed(blocks) for row in rows]
        if ref is not None:
            found = [row for row in found if row.git_ref == ref]
        return found if last is None else _newest(found, last)

    def medians(
        self, eval_ids: Collection[str], *, since: dt.datetime, last: int
    ) -> dict[str, list[float | None]]:
        found: dict[str, list[float | None]] = {}
        for row in self.recent(eval_ids, since=since, last=last):
            found.setdefault(row.eval_id, []).append(row.median)
        return found

    def last_run(self, chunk: int = 1 << 18) -> list[HistoryRow]:
        """The rows of the most recent run, read from the end of the file.

        A run's rows are appended in one write, so they are the last contiguous
        lines sharing a ``run_id``.
        """
        handle = self._open()
        if handle is None:
            return []
        newest: list[HistoryRow] = []  # the last row first
        with handle:
            for lines in _blocks_backwards(handle, chunk):
                for line in reversed(lines):
                    row = None if line is None else _parse(line)
                    if row is None:
                        continue
                    if newest and row.run_id != newest[0].run_id:
                        return newest[::-1]
                    newest.append(row)
        return newest[::-1]

    def last_run_summary(self) -> RunSummary | None:
        """``HistoryStore.last_run_summary``, counted from ``last_run``'s rows."""
        return RunSummary.of(self.last_run())

    def compact(self, *, keep_after: str) -> tuple[int, int]:
        """Drop rows whose build_ts is before ``keep_after`` (ISO text); return (kept, dropped)."""
        there = self._open()
        if there is None:
            return 0, 0
        there.close()
        with locked(self.path, "history"):
            kept, dropped = [], 0
            handle = self._open()
            if handle is None:
                return 0, 0
            with handle:
                for line in lines_capped(handle.fileno(), MAX_LINE_BYTES):
                    row = None if line is None else _parse(line)
                    if line is not None and row is not None and row.build_ts >= keep_after:
                        kept.append(line if line.endswith(b"\n") else line + b"\n")
                    else:
                        dropped += 1
            write_atomic(self.path, b"".join(kept).decode("utf-8"))
        return len(kept), dropped

    def _skipped(self, count: int) -> None:
        if count and not self._warned:
            self._warned = True
            self._warn(
                f"{self.path}: skipped {count} line(s) that are not history rows (torn by an "
                "interrupted write, or edited by hand); `firewall history compact --keep-days N` "
                "rewrites the file without them (and without rows older than N days)"
            )


# A history row is a few hundred bytes: a line longer than this is none, and is skipped
# without being held in memory.
MAX_LINE_BYTES = 1 << 20

# How long after its start a run may append its rows: a row built this long before a
# window began ends the backward read (every row before it was appended before it).
APPEND_LAG = dt.timedelta(days=1)


def _newest(rows: Sequence[HistoryRow], last: int) -> list[HistoryRow]:
    """Each eval's last ``last`` rows of ``rows``, in their order."""
    seen: dict[str, int] = {}
    kept = []
    for row in reversed(rows):
        if seen.get(row.eval_id, 0) < last:
            seen[row.eval_id] = seen.get(row.eval_id, 0) + 1
            kept.append(row)
    return kept[::-1]


def _blocks_backwards(handle: BinaryIO, chunk: int) -> Iterator[list[bytes | None]]:
    """The file's lines, without their newlines, in blocks of about ``chunk`` bytes: the
    last block first, each block's lines in file order. A block's last item is what
    follows its last newline: empty, but in the first block the file's torn tail if
    it has one. A line longer than ``MAX_LINE_BYTES`` is None, its bytes dropped as they
    are read, so that a read holds at most a block and a line."""
    cap = MAX_LINE_BYTES
    pos = handle.seek(0, os.SEEK_END)
    carry = b""  # the start of the block after this one: the end of a line cut in two
    overlong = False  # that line is longer than ``cap``: its end was dropped
    while pos > 0:
        start = max(0, pos - chunk)
        handle.seek(start)
        block = handle.read(pos - start) + carry
        pos = start
        dropped, overlong, carry = overlong, False, b""  # dropped: the last line began here
        if start > 0:
            cut = block.find(b"\n") + 1  # this block's first line began before it
            if cut == 0:  # a line longer than a block
                overlong = dropped or len(block) > cap
                carry = b"" if overlong else block
                continue
            carry, block = block[:cut], block[cut:]
            if len(carry) > cap:
                carry, overlong = b"", True
        lines: list[bytes | None] = [
            line if len(line) <= cap else None for line in block.split(b"\n")
        ]
        if dropped:
            lines[-1] = None
        yield lines


def _rows_since(
    lines: Sequence[bytes | None], start: str, wanted: set[bytes] | None, *, last_block: bool
) -> tuple[list[HistoryRow], int]:
    """A block's rows built at ``start`` or later (of the ``wanted`` evals, the others
    passed over unparsed), and how many of its lines are not rows. The file's last
    line is not counted: it may be a row still being written."""
    rows: list[HistoryRow] = []
    unread = 0
    for index, line in enumerate(lines):
        if line is not None and wanted is not None and _other_eval(line, wanted):
            continue
        row = None if line is None else _parse(line)
        if row is None:
            tail = last_block and index == len(lines) - 1
            unread += not tail and (line is None or bool(line.strip()))
        elif row.build_ts >= start and (wanted is None or row.eval_id.encode() in wanted):
            rows.append(row)
    return rows, unread


def _begins_before(lines: Sequence[bytes | None], stop: str) -> bool:
    """Whether the first line of the block that carries a build time is older than ``stop``."""
    for line in lines:
        found = None if line is None else _BUILD_TS.search(line)
        if found is not None:
            return found.group(1).decode("utf-8", "replace") < stop
    return False


def _wanted(eval_ids: Collection[str] | None) -> set[bytes] | None:
    return None if eval_ids is None else {i.encode() for i in eval_ids}


def _other_eval(line: bytes, wanted: set[bytes]) -> bool:
    """Whether the raw line is a row of an eval not ``wanted``: a look at its prefix, no parse."""
    if line.startswith(_COMPACT):
        start = len(_COMPACT)
    elif line.startswith(_SPACED):
        start = len(_SPACED)
    else:
        return False
    return line[start : line.find(b'"', start)] not in wanted


def _new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def _parse(line: bytes) -> HistoryRow | None:
    try:
        data = loads(line.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and a line nested too deep included
        return None
    return HistoryRow.from_json(data)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


# How rows begin: as written here (compact), and as json.dumps writes them by hand.
_COMPACT, _SPACED = b'{"eval_id":"', b'{"eval_id": "'
_BUILD_TS = re.compile(rb'"build_ts"\s*:\s*"([^"]+)"')
