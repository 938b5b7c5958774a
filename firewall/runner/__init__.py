"""Trials: run every (eval, seed) task with bounded concurrency, timeouts and no retries.

Each of ``concurrency`` slots is a thread that takes the next task, runs it
(a shell process for a command eval, a request to the slot's own long-lived
worker process for a Python eval) and hands back a ``TrialRecord``. Threads
suffice: the trials run in other processes, so the slots only wait.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import queue
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from firewall.runner.command import run_command
from firewall.runner.outcome import Outcome
from firewall.runner.python import PythonWorker
from firewall.runner.trial import TrialRecord, error_record, record_from_payload
from firewall.spec import EvalSpec

__all__ = ["Interrupted", "Runner", "Task", "execute", "replay"]


@dataclasses.dataclass(frozen=True)
class Task:
    """One trial to run: an eval, its 0-based index in the probe, and its seed."""

    spec: EvalSpec
    index: int
    seed: int
    k: int


class Interrupted(Exception):
    """The run was stopped; ``records`` holds the trials that finished before it."""

    def __init__(self, records: list[TrialRecord | None]) -> None:
        super().__init__("interrupted")
        self.records = records


Progress = Callable[[Task, TrialRecord], None]


class Runner:
    def __init__(self, *, concurrency: int, cwd: Path, progress: Progress | None = None) -> None:
        self._concurrency = concurrency
        self._cwd = cwd
        self._progress = progress
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._active: dict[int, int] = {}  # slot -> pid of the process running its trial

    def run(self, tasks: Sequence[Task]) -> list[TrialRecord]:
        """Run every task; the records come back in task order."""
        records: list[TrialRecord | None] = [None] * len(tasks)
        done: queue.SimpleQueue[tuple[int, TrialRecord]] = queue.SimpleQueue()
        pending = iter(enumerate(tasks))
        with tempfile.TemporaryDirectory(prefix="firewall-") as scratch:
            slots = [
                threading.Thread(
                    target=self._slot,
                    args=(n, pending, done, Path(scratch)),
                    name=f"firewall-slot-{n}",
                    daemon=True,
                )
                for n in range(min(self._concurrency, len(tasks)))
            ]
            try:
                for slot in slots:
                    slot.start()
                for _ in range(len(tasks)):
                    index, record = done.get()
                    records[index] = record
                    if self._progress is not None:
                        self._progress(tasks[index], record)
            except BaseException:
                self._halt(slots)
                while not done.empty():
                    index, record = done.get()
                    records[index] = record
                raise Interrupted(records) from None
            for slot in slots:
                slot.join()
        return [record for record in records if record is not None]

    def _halt(self, slots: list[threading.Thread]) -> None:
        self._stop.set()
        with self._lock:
            pids = list(self._active.values())
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for slot in slots:
            slot.join(timeout=10)

    def _slot(
        self,
        number: int,
        pending: Iterator[tuple[int, Task]],
        done: queue.SimpleQueue[tuple[int, TrialRecord]],
        scratch: Path,
    ) -> None:
        worker = PythonWorker(self._cwd)
        register = functools.partial(self._track, number)
        try:
            while not self._stop.is_set():
                with self._lock:
                    item = next(pending, None)
                    if item is None:
                        return
                    self._in_flight += 1
                    in_flight = self._in_flight
                position, task = item
                # Only a command eval has a result file: no Path to build for a Python trial.
                result_path = (
                    scratch if task.spec.kind == "python" else scratch / f"{position}.json"
                )
                started = time.perf_counter()
                try:
                    outcome = execute(
                        task,
                        cwd=self._cwd,
                        worker=worker,
                        result_path=result_path,
                        register=register,
                    )
                except Exception as exc:  # a runner bug costs one trial, not the run
                    outcome = Outcome(error=f"internal error running the trial: {exc!r}")
                duration = time.perf_counter() - started
                with self._lock:
                    self._in_flight -= 1
                if self._stop.is_set():
                    return  # killed by the halt: not a measurement
                done.put((position, to_record(task, outcome, duration, in_flight)))
        finally:
            worker.close()

    def _track(self, slot: int, pid: int | None) -> None:
        with self._lock:
            if pid is None:
                self._active.pop(slot, None)
            else:
                self._active[slot] = pid


def execute(
    task: Task,
    *,
    cwd: Path,
    worker: PythonWorker,
    result_path: Path,
    register: Callable[[int | None], None] = lambda pid: None,
) -> Outcome:
    """Run one trial of one eval and return what it reported."""
    spec = task.spec
    if spec.kind == "python":
        return worker.call(spec.target, task.seed, task.index, spec.timeout, register)
    return run_command(
        spec.target,
        eval_id=spec.id,
        seed=task.seed,
        trial=task.index,
        k=task.k,
        timeout=spec.timeout,
        exit_code_mode=spec.result == "exit-code",
        cwd=cwd,
        result_path=result_path,
        register=register,
    )


def to_record(task: Task, outcome: Outcome, duration_s: float, in_flight: int) -> TrialRecord:
    if outcome.error is not None:
        return error_record(
            index=task.index,
            seed=task.seed,
            error=outcome.error,
            duration_s=round(duration_s, 6),
            in_flight=in_flight,
        )
    return record_from_payload(
        outcome.payload,
        index=task.index,
        seed=task.seed,
        pass_score=task.spec.pass_score,
        duration_s=round(duration_s, 6),
        in_flight=in_flight,
    )


def replay(task: Task, *, cwd: Path) -> tuple[Outcome, TrialRecord]:
    """Run one trial on its own, as `firewall replay` does: what it reported, and its record."""
    worker = PythonWorker(cwd)
    try:
        with tempfile.TemporaryDirectory(prefix="firewall-") as scratch:
            outcome = execute(
                task, cwd=cwd, worker=worker, result_path=Path(scratch) / "result.json"
            )
    finally:
        worker.close()
    return outcome, to_record(task, outcome, 0.0, 1)
