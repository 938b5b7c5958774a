"""The history: one row per eval per run, append-only, for trends, calibration and triage.

A ``HistoryStore`` is where the rows live. ``LocalHistory`` keeps them in one
JSON-lines file (``history`` in the config); another backend only has to
append a run's rows and scan them back. Rows are typed from the writer to the
reader: ``rows_for`` builds them from a decided run, ``scan`` parses them back
leniently (a torn tail or a hand edit is skipped, never fatal), fast enough for
the triage view to read 100,000 of them in well under a second.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from firewall.artefact import Artefact
from firewall.policy import Status
from firewall.store.atomic import locked, write_atomic
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

    def to_json(self) -> str:
        # eval_id first: `scan` skips other evals' rows by this prefix before parsing them.
        document = {field: getattr(self, field) for field in _FIELDS}
        document["drift"] = dict(self.drift)
        document["model_ids"] = list(self.model_ids)
        document["prompt_versions"] = list(self.prompt_versions)
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, data: Any) -> HistoryRow | None:
        """A row from a parsed line, or None when it is not one (a wrong type keeps a default)."""
        if not isinstance(data, dict) or not isinstance(data.get("eval_id"), str):
            return None
        drift = data.get("drift")
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
        )


_FIELDS = tuple(field.name for field in dataclasses.fields(HistoryRow))


class HistoryStore(Protocol):
    """Where the history lives: appended to once per run, scanned by every reader."""

    def describe(self) -> str:
        """The store as messages name it, e.g. the file's path."""

    def append(self, rows: Sequence[HistoryRow]) -> None:
        """Add one run's rows, all or none, without losing a concurrent writer's."""

    def scan(self, eval_ids: Collection[str] | None = None) -> Iterator[HistoryRow]:
        """Rows in the order they were written; with ``eval_ids``, only those evals'."""

    def last_run(self) -> list[HistoryRow]:
        """The rows of the most recent run."""


def rows_for(artefact: Artefact, *, run_id: Callable[[], str] | None = None) -> list[HistoryRow]:
    """One row per eval the run probed (an eval skipped in quarantine has no numbers to keep)."""
    current = (run_id or _new_run_id)()
    rows = []
    for report in artefact.evals:
        if report.status is Status.QUARANTINED and not report.trials:
            continue
        scored = [t for t in report.trials if t.error is None]
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
                sd=statistics.stdev(scores) if len(scores) >= 2 else None,
                n=len(scores),
                pass_rate=report.stats.pass_rate,
                drift=dict(report.drift),
                model_ids=tuple(sorted({t.model_id for t in scored if t.model_id})),
                prompt_versions=tuple(
                    sorted({t.prompt_version for t in scored if t.prompt_version})
                ),
                git_sha=artefact.run.git_sha,
                git_ref=artefact.run.git_ref,
            )
        )
    return rows


class LocalHistory:
    """The history as one JSON-lines file, appended under a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def describe(self) -> str:
        return str(self.path)

    def append(self, rows: Sequence[HistoryRow]) -> None:
        """Append rows as one write under the lock, so concurrent runs never interleave lines."""
        text = "".join(row.to_json() + "\n" for row in rows)
        if not text:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with locked(self.path, "history"):
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                data = text.encode()
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # a torn last line must not swallow our first row
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)

    def scan(self, eval_ids: Collection[str] | None = None) -> Iterator[HistoryRow]:
        """Rows in file order. With ``eval_ids``, rows of other evals are skipped before they
        are parsed (rows written here start with their ``eval_id``)."""
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return
        wanted = None if eval_ids is None else {i.encode() for i in eval_ids}
        with handle:
            for line in handle:
                if wanted is not None:
                    prefix = next((p for p in _PREFIXES if line.startswith(p)), None)
                    if (
                        prefix is not None
                        and line[len(prefix) : line.find(b'"', len(prefix))] not in wanted
                    ):
                        continue
                row = _parse(line)
                if row is not None and (wanted is None or row.eval_id.encode() in wanted):
                    yield row

    def last_run(self, chunk: int = 1 << 18) -> list[HistoryRow]:
        """The rows of the most recent run, read from the end of the file.

        A run's rows are appended in one write, so they are the last contiguous
        lines sharing a ``run_id``.
        """
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return []
        with handle:
            size = handle.seek(0, 2)
            start = size
            while True:
                start = max(0, start - chunk)
                handle.seek(start)
                lines = handle.read(size - start).split(b"\n")
                if start > 0:
                    lines = lines[1:]  # maybe cut in the middle
                rows = [row for row in map(_parse, lines) if row is not None]
                if not rows:
                    if start == 0:
                        return []
                    continue
                run_id = rows[-1].run_id
                first = next(
                    (i for i in range(len(rows) - 1, -1, -1) if rows[i].run_id != run_id), None
                )
                if first is not None or start == 0:
                    return rows[(first + 1) if first is not None else 0 :]

    def compact(self, *, keep_after: str) -> tuple[int, int]:
        """Drop rows whose build_ts is before ``keep_after`` (ISO text); return (kept, dropped)."""
        if not self.path.exists():
            return 0, 0
        with locked(self.path, "history"):
            kept, dropped = [], 0
            with self.path.open("rb") as handle:
                for line in handle:
                    row = _parse(line)
                    if row is not None and row.build_ts >= keep_after:
                        kept.append(line if line.endswith(b"\n") else line + b"\n")
                    else:
                        dropped += 1
            write_atomic(self.path, b"".join(kept).decode("utf-8"))
        return len(kept), dropped


def _new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def _parse(line: bytes) -> HistoryRow | None:
    try:
        data = json.loads(line.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError included
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
_PREFIXES = (b'{"eval_id":"', b'{"eval_id": "')
