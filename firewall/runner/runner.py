"""The Runner: ``concurrency`` slots that run a run's trials (the package's docstring
says how), the early pool, one trial's execution and its record, a replay."""

from __future__ import annotations

import dataclasses
import functools
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from firewall.adapters import inspect_eval
from firewall.runner import judged
from firewall.runner.command import run_command
from firewall.runner.outcome import Outcome
from firewall.runner.pool import Alone, AsyncPool
from firewall.runner.python import Call, PythonWorker
from firewall.runner.reads import Reads, note_reads, recorded
from firewall.runner.reaper import Reaper
from firewall.runner.schedule import Schedule, Task
from firewall.runner.throttle import Meter, Throttle
from firewall.runner.trial import SuiteCase, TrialRecord, error_record, record_from_payload
from firewall.secrets import TOKEN_NAMES, without_token
from firewall.spec import EvalSpec

__all__ = ["Early", "Interrupted", "Runner", "Schedule", "Task", "execute", "replay"]


class Interrupted(Exception):
    """The run was stopped; ``records`` holds the trials that finished before it, by the
    position of their task (None for a trial that did not finish)."""

    def __init__(self, records: list[TrialRecord | None]) -> None:
        super().__init__("interrupted")
        self.records = records


Progress = Callable[[Task, TrialRecord], None]


class _Source(Protocol):
    """Where a runner's tasks come from, and where their records go."""

    @property
    def most(self) -> int: ...

    @property
    def specs(self) -> list[EvalSpec]: ...

    def next_task(self) -> Task | None: ...

    def next_task_if(self, fits: Callable[[EvalSpec], bool]) -> Task | None: ...

    def record(self, task: Task, record: TrialRecord) -> None: ...


class _Listed:
    """The tasks of a list, in order."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        self._tasks = tasks
        self._next = 0
        self.most = len(tasks)
        self.specs = list({id(task.spec): task.spec for task in tasks}.values())

    def next_task(self) -> Task | None:
        if self._next >= len(self._tasks):
            return None
        self._next += 1
        return self._tasks[self._next - 1]

    def next_task_if(self, fits: Callable[[EvalSpec], bool]) -> Task | None:
        if self._next < len(self._tasks) and fits(self._tasks[self._next].spec):
            return self.next_task()
        return None

    def record(self, task: Task, record: TrialRecord) -> None:
        pass


_DONE = -1  # the position a slot hands back when nothing is left to run
_Done = queue.SimpleQueue[list[tuple[int, TrialRecord | None]]]
"""Where slots hand back records: a trial's, a batch's, or ``[(_DONE, None)]``."""


class Early:
    """A run's pool workers, booting from the moment its evals are known: while the
    orchestrator still reads the registry, the state branch and the history, and plans.

    Only when some of ``specs`` are async Python evals (``_pooled``); the first ``Runner``
    given it takes its reaper and pool (``take``); one not taken is closed with the block,
    its workers killed and its scratch directory removed, like a run's.
    """

    def __init__(
        self,
        specs: Sequence[EvalSpec],
        *,
        concurrency: int,
        cwd: Path,
        share_token: bool = False,
        pool_workers: int | None = None,
        reads: bool = False,
    ) -> None:
        self._held: tuple[Reaper, AsyncPool] | None = None
        if not any(_pooled(spec) for spec in specs):
            return
        reaper = Reaper(trial_environment(share_token=share_token))
        try:
            if reads:  # the workers note what each eval reads (firewall.runner.reads)
                note_reads(reaper.scratch, reaper.environment)
            pool = AsyncPool(cwd, reaper.environment, concurrency, pool_workers)
            pool.warm()
        except BaseException:
            reaper.close()
            raise
        self._held = (reaper, pool)

    def take(self) -> tuple[Reaper, AsyncPool] | None:
        """The reaper and the booting pool, once; None when there are none (left)."""
        held, self._held = self._held, None
        return held

    def __enter__(self) -> Early:
        return self

    def __exit__(self, *exc: object) -> None:
        held = self.take()
        if held is not None:
            reaper, pool = held
            try:
                pool.close()
            finally:
                reaper.close()


# Batches: a slot whose next trials are quick synchronous Python calls sends its worker
# several at once (``PythonWorker.pipeline``), up to BATCH trials expected to take
# BATCH_S together by the longest call each eval has made so far: a trial of
# microseconds then costs the slot one reply read, not a round trip and a wake-up of
# every thread on the way. An eval whose calls are slow, or not yet seen, goes alone.
BATCH = 128
BATCH_S = 0.005


class Runner:
    def __init__(
        self,
        *,
        concurrency: int,
        cwd: Path,
        progress: Progress | None = None,
        pool_workers: int | None = None,
        share_token: bool = False,
        reads: Reads | None = None,
        early: Early | None = None,
    ) -> None:
        """``share_token``: the trials inherit the firewall's GitHub token (``[github]
        share_token``); by default they do not. ``reads``: filled with the project files
        each Python eval target imported or opened (``firewall.runner.reads``).
        ``early``: pool workers already booting (made with the same settings, and asked
        to note reads when ``reads`` is given), for the first run to take."""
        self._early = early
        self._share_token = share_token
        self._reads = reads
        self._concurrency = concurrency
        self._pool_workers = pool_workers  # async trials' worker processes; None: one per CPU
        self._cwd = cwd
        self._progress = progress
        self._stop = threading.Event()  # no more trials start: all done, or halted
        self._halted = threading.Event()  # and the ones running are not measurements
        self._lock = threading.Condition()
        self._in_flight = 0  # trials running now
        self._unrecorded = 0  # trials handed out whose records the schedule has not had
        self._active: dict[int, int] = {}  # slot -> pid of the process running its trial
        self._throttle = Throttle()  # the run's rate limits (their logs in the scratch)
        self._pool: AsyncPool | None = None  # the async trials' workers, while a run lasts
        self._command_env: Mapping[str, str] | None = None  # a command's, if not inherited
        self._longest: dict[str, float] = {}  # eval id -> its longest call so far (batches)
        self._typical: float | None = None  # a recent Python call, for an eval not seen yet

    def run(self, tasks: Sequence[Task]) -> list[TrialRecord]:
        """Run every task; the records come back in task order."""
        finished = self._drive(_Listed(tasks))
        return [finished[i] for i in range(len(tasks)) if i in finished]

    def run_schedule(self, schedule: Schedule) -> None:
        """Run the trials a schedule hands out, until it wants no more; each finished
        trial goes back to it (``schedule.results()``), in the order they finish."""
        self._drive(schedule)

    def _drive(self, source: _Source) -> dict[int, TrialRecord]:
        """Run the source's trials in ``concurrency`` slots; their records by position.

        Interrupted (Ctrl-C, or any exception here): every trial still running is
        killed, the records that came in are kept, and ``Interrupted`` carries them."""
        finished: dict[int, TrialRecord] = {}
        handed: list[Task] = []
        done: _Done = queue.SimpleQueue()
        base = trial_environment(share_token=self._share_token)
        early = None if self._early is None else self._early.take()
        with early[0] if early is not None else Reaper(base) as reaper:
            self._throttle = Throttle(reaper.scratch)
            noted = None if self._reads is None else note_reads(reaper.scratch, reaper.environment)
            # A command's shell inherits the firewall's environment (the cheaper spawn)
            # unless the trials' must differ from it.
            self._command_env = None if base is None else reaper.environment
            pool = self._pool = early[1] if early is not None else self._boot(source, reaper)
            slots = [
                threading.Thread(
                    target=self._slot,
                    args=(n, source, handed, done, reaper, pool),
                    name=f"firewall-slot-{n}",
                    daemon=True,
                )
                for n in range(min(self._concurrency, source.most))
            ]
            try:
                self._gather(slots, source, handed, done, finished)
            except BaseException:
                self._halt(slots)
                self._salvage(source, handed, done, finished)
                raise Interrupted([finished.get(i) for i in range(len(handed))]) from None
            finally:
                pool.close()
                if noted is not None and self._reads is not None:
                    recorded(noted, self._reads)
            for slot in slots:
                slot.join()
        return finished

    def _boot(self, source: _Source, reaper: Reaper) -> AsyncPool:
        """The run's pool, its workers booting now if any eval will need them: while the
        slots start and the first trials go out."""
        pool = AsyncPool(self._cwd, reaper.environment, self._concurrency, self._pool_workers)
        if any(_pooled(spec) for spec in source.specs):
            pool.warm()
        return pool

    def _gather(
        self,
        slots: list[threading.Thread],
        source: _Source,
        handed: list[Task],
        done: _Done,
        finished: dict[int, TrialRecord],
    ) -> None:
        """Start the slots and take their records as they come, until one says all done."""
        for slot in slots:
            slot.start()
        while slots:
            records = done.get()  # a slot's trial, or the trials of its batch
            if records[0][1] is None:
                break
            with self._lock:
                self._keep(records, source, handed, finished)
                self._unrecorded -= len(records)
                self._lock.notify_all()
            if self._progress is not None:
                for position, record in records:
                    assert record is not None
                    self._progress(handed[position], record)

    def _salvage(
        self, source: _Source, handed: list[Task], done: _Done, finished: dict[int, TrialRecord]
    ) -> None:
        """Keep the records the halted slots handed back but the run had not taken yet."""
        while not done.empty():
            self._keep(done.get(), source, handed, finished)

    @staticmethod
    def _keep(
        records: list[tuple[int, TrialRecord | None]],
        source: _Source,
        handed: list[Task],
        finished: dict[int, TrialRecord],
    ) -> None:
        """Keep the finished trials among a slot's records, and tell the source."""
        for position, record in records:
            if record is not None:
                finished[position] = record
                source.record(handed[position], record)

    def _next(
        self,
        source: _Source,
        handed: list[Task],
        done: _Done,
        finished: bool = False,
    ) -> tuple[list[tuple[int, Task]], int] | None:
        """The next tasks for a slot, with their positions, and how many trials run with
        them (one per busy slot); None: stop. One task, or a batch (``_batch``).

        ``finished``: the slot's last trial has just ended (one lock for both, since
        sixty-four slots contend for it)."""
        with self._lock:
            if finished:
                self._in_flight -= 1
            while not self._stop.is_set():
                task = source.next_task()
                if task is not None:
                    tasks = self._batch(source, task)
                    first = len(handed)
                    handed.extend(tasks)
                    self._unrecorded += len(tasks)
                    self._in_flight += 1
                    return list(enumerate(tasks, first)), self._in_flight
                if self._unrecorded == 0:  # nothing running, nothing to record: all done
                    self._stop.set()
                    self._lock.notify_all()
                    done.put([(_DONE, None)])
                    return None
                self._lock.wait()  # a result still to come may ask for more trials
        return None

    def _batch(self, source: _Source, task: Task) -> list[Task]:
        """The task, and the ones to send its worker with it: quick synchronous Python
        calls, BATCH_S of them at most by the longest call each eval has made."""
        budget = BATCH_S - self._guess(task.spec)
        if budget < 0 or not self._batchable(task.spec):
            return [task]
        tasks = [task]
        guess = 0.0

        def fits(spec: EvalSpec) -> bool:
            nonlocal guess
            guess = self._guess(spec)
            return guess <= budget and self._batchable(spec)

        while len(tasks) < BATCH and (more := source.next_task_if(fits)) is not None:
            tasks.append(more)
            budget -= guess
        return tasks

    def _batchable(self, spec: EvalSpec) -> bool:
        """A synchronous Python eval without a rate limit (a token's wait would hold the
        trials behind it; the pool takes async evals)."""
        return spec.kind == "python" and spec.rate is None and not _pooled(spec)

    def _guess(self, spec: EvalSpec) -> float:
        """How long a call of this eval may take: its longest so far, else a recent call
        of any eval; before any, too long to batch."""
        took = self._longest.get(spec.id, self._typical)
        return BATCH_S + 1.0 if took is None else took

    def _learn(self, spec: EvalSpec, outcome: Outcome) -> None:
        """Keep what a Python trial's call took (no lock: a lost update costs a guess)."""
        took = outcome.call_s
        if took is None or spec.kind != "python":
            return
        if outcome.error is not None and outcome.worker_lost:
            took = max(took, BATCH_S + 1.0)  # timed out or crashed: never batched again
        self._longest[spec.id] = max(took, self._longest.get(spec.id, 0.0))
        self._typical = took

    def _halt(self, slots: list[threading.Thread]) -> None:
        with self._lock:
            self._halted.set()
            self._stop.set()
            self._lock.notify_all()
            pids = list(self._active.values())
        if self._pool is not None:
            self._pool.stop()
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
        source: _Source,
        handed: list[Task],
        done: _Done,
        reaper: Reaper,
        pool: AsyncPool,
    ) -> None:
        worker = PythonWorker(self._cwd, reaper.environment)
        scratch = reaper.scratch
        register = functools.partial(self._track, number)
        try:
            finished = False
            while (item := self._next(source, handed, done, finished)) is not None:
                batch, in_flight = item
                finished = True
                if len(batch) > 1:
                    if not self._run_batch(batch, in_flight, worker, register, done):
                        return
                    continue
                [(position, task)] = batch
                # Only a command eval has a result file: no Path to build for a Python trial.
                result_path = (
                    scratch if task.spec.kind == "python" else scratch / f"{position}.json"
                )
                # A provider's rate limit: a Python trial takes its token in its worker, just
                # before the call; a command's is taken here, just before its shell starts.
                spec = task.spec
                rate = self._throttle.meter(spec.rate_bucket, spec.rate)
                if rate is not None and spec.kind == "command":
                    self._throttle.wait(spec.rate_bucket, spec.rate, self._halted.wait)
                    rate = None
                if self._halted.is_set():
                    return
                started = time.perf_counter()
                try:
                    outcome = execute(
                        task,
                        cwd=self._cwd,
                        worker=worker,
                        result_path=result_path,
                        scratch=scratch,
                        register=register,
                        pool=pool,
                        env=self._command_env,
                        rate=rate,
                    )
                except Exception as exc:  # a runner bug costs one trial, not the run
                    outcome = Outcome(error=f"internal error running the trial: {exc!r}")
                duration = time.perf_counter() - started
                if self._halted.is_set():
                    return  # killed by the halt: not a measurement
                self._learn(spec, outcome)
                done.put([(position, to_record(task, outcome, duration, in_flight))])
        finally:
            worker.close()

    def _run_batch(
        self,
        batch: list[tuple[int, Task]],
        in_flight: int,
        worker: PythonWorker,
        register: Callable[[int | None], None],
        done: _Done,
    ) -> bool:
        """Run a batch in the slot's worker, each trial's record handed back as it comes;
        the trials behind one that lost the worker were never started, and go to a fresh
        one. False when the run was halted meanwhile."""
        while batch:
            calls = [
                Call(t.spec.target, t.seed, t.index, t.spec.timeout, t.spec.import_timeout)
                for _, t in batch
            ]
            try:
                outcomes = worker.pipeline(calls, register)
            except Exception as exc:  # a runner bug costs one trial, not the run
                outcomes = [Outcome(error=f"internal error running the trial: {exc!r}")]
                worker.kill()
            if self._halted.is_set():
                return False  # killed by the halt: not measurements
            records: list[tuple[int, TrialRecord | None]] = []
            for (position, task), outcome in zip(batch, outcomes, strict=False):
                self._learn(task.spec, outcome)
                record = to_record(task, outcome, outcome.call_s or 0.0, in_flight)
                records.append((position, record))
            done.put(records)  # together: one wake-up of the thread that records them
            batch = batch[len(outcomes) :]
        return True

    def _track(self, slot: int, pid: int | None) -> None:
        # No lock: a dict's item assignment is atomic, and _halt copies the dict in one step.
        if pid is None:
            self._active.pop(slot, None)
        else:
            self._active[slot] = pid


def execute(
    task: Task,
    *,
    worker: PythonWorker,
    register: Callable[[int | None], None] = lambda pid: None,
    **options: Any,
) -> Outcome:
    """Run one trial (``generate``) and, for an eval with a judge, judge its output where
    the eval ran: the pool for an async eval, else the slot's worker (``judged.caller``)."""
    outcome = generate(task, worker=worker, register=register, **options)
    if task.spec.judge is None:
        return outcome
    pool = options.get("pool") if _pooled(task.spec) else None
    call = judged.caller(task.spec, task.index, worker, register, pool=pool)
    return judged.judge(task, outcome, call)


def generate(
    task: Task,
    *,
    cwd: Path,
    worker: PythonWorker,
    result_path: Path,
    scratch: Path,
    register: Callable[[int | None], None] = lambda pid: None,
    keep_output: bool = False,
    pool: AsyncPool | None = None,
    env: Mapping[str, str] | None = None,
    rate: Meter | None = None,
) -> Outcome:
    """Run one trial of one eval and return what it reported.

    ``scratch`` is the run's scratch directory (``Reaper.scratch``); a worker's
    environment carries its mark already. ``env``: a command's environment, when it
    is not the firewall's own (``trial_environment``). ``keep_output`` keeps what the trial
    printed even when it succeeded (`firewall replay`); otherwise only an errored
    trial's is kept. With a ``pool``, an async Python eval's trial runs there,
    unless the eval is isolated or the pool hands it back to run alone. ``rate``: the
    start log a Python trial takes its token from, in its worker (``throttle.py``).
    """
    spec = task.spec
    handed_back: Alone | None = None
    if pool is not None and _pooled(spec):
        pooled = pool.call(
            spec.target,
            task.seed,
            task.index,
            spec.timeout,
            register,
            import_timeout=spec.import_timeout,
            rate=rate,
        )
        if isinstance(pooled, Outcome):
            return pooled
        handed_back = pooled
    if spec.kind in ("python", "inspect"):
        began = time.perf_counter()
        outcome = worker.call(
            spec.target if spec.kind == "python" else _inspect_target(spec),
            task.seed,
            task.index,
            spec.timeout,
            register,
            import_timeout=spec.import_timeout,
            rate=rate,
        )
        if keep_output and outcome.output is None:
            outcome.output = worker.printed()
        if pool is not None and handed_back is not None:  # the time is this call's alone
            if outcome.call_s is None:
                apart = (outcome.import_s or 0.0) + (outcome.boot_s or 0.0)
                outcome.call_s = max(0.0, time.perf_counter() - began - apart)
            if outcome.worker_lost:
                pool.isolate(spec.target)  # it kills the worker it runs in: it runs alone now
            elif handed_back is Alone.TRIAL:
                worker.kill()  # booted for this one trial: not kept idle for the rest of the run
        return outcome
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
        scratch=scratch,
        register=register,
        keep_output=keep_output,
        junit=_junit_path(spec, cwd, result_path, task.index) if spec.result == "junit" else None,
        env=env,
    )


def _pooled(spec: EvalSpec) -> bool:
    """Whether the eval's trials go to the pool: an async Python eval not run alone."""
    return spec.kind == "python" and spec.asynchronous and not spec.isolate


def trial_environment(*, share_token: bool) -> dict[str, str] | None:
    """The environment of a run's trials, or None when it is the firewall's own: without
    the firewall's GitHub token unless ``share_token``."""
    if share_token or not any(name in os.environ for name in TOKEN_NAMES):
        return None
    return without_token(os.environ)


def _inspect_target(spec: EvalSpec) -> str:
    """The worker's target for an Inspect task: the adapter, with the task's settings."""
    return inspect_eval.worker_target(spec.target, spec.inspect_model, spec.task_args)


def _junit_path(spec: EvalSpec, cwd: Path, result_path: Path, trial: int) -> Path:
    """Where a suite's trial leaves its JUnit XML: ``junit_xml`` when the config names one
    (its ``{trial}`` the trial's index, so that trials in flight together do not share
    it; removed before the trial, so that no earlier run's report passes for this one),
    else ``{result}``."""
    if spec.junit_xml is None:
        return result_path
    path = cwd / spec.junit_xml.replace("{trial}", str(trial))
    path.unlink(missing_ok=True)
    return path


def to_record(task: Task, outcome: Outcome, duration_s: float, in_flight: int) -> TrialRecord:
    # Booting a worker and importing the eval's module are the worker's costs, not the
    # trial's: a Python eval's duration is its call as the worker timed it.
    imported = outcome.import_s
    if outcome.call_s is not None:
        duration_s = outcome.call_s
    else:
        duration_s = max(0.0, duration_s - (imported or 0.0) - (outcome.boot_s or 0.0))
    if outcome.error is not None:
        record = error_record(
            index=task.index,
            seed=task.seed,
            error=outcome.error,
            duration_s=round(duration_s, 6),
            in_flight=in_flight,
            traceback=outcome.traceback,
            output=outcome.output,
        )
    else:
        record = record_from_payload(
            outcome.payload,
            index=task.index,
            seed=task.seed,
            pass_score=task.spec.pass_score,
            duration_s=round(duration_s, 6),
            in_flight=in_flight,
        )
    # Set on the record just built (no one else holds it yet): a copy cost more than it.
    if imported is not None:
        record.import_s = round(imported, 6)
    if outcome.boot_s is not None:
        record.boot_s = round(outcome.boot_s, 6)
    if outcome.blocked_s is not None:
        record.blocked_s = round(outcome.blocked_s, 6)
    if outcome.output is not None and record.passed is False and task.spec.result == "exit-code":
        # A plain test's failed run: what the command printed says why (policy.failure_message).
        record = record.model_copy(update={"output": outcome.output})
    if outcome.cases is not None:
        cases = [SuiteCase(**dataclasses.asdict(case)) for case in outcome.cases]
        record = record.model_copy(update={"cases": cases})
    if outcome.judged is not None:
        record = record.model_copy(update={"judged": outcome.judged})
    return record


def replay(task: Task, *, cwd: Path, share_token: bool = False) -> tuple[Outcome, TrialRecord]:
    """Run one trial on its own, as `firewall replay` does: what it reported (and printed),
    and its record (``share_token`` as for ``Runner``)."""
    base = trial_environment(share_token=share_token)
    with Reaper(base) as reaper:
        worker = PythonWorker(cwd, reaper.environment)
        started = time.perf_counter()
        try:
            outcome = execute(
                task,
                cwd=cwd,
                worker=worker,
                result_path=reaper.scratch / "result.json",
                scratch=reaper.scratch,
                keep_output=True,
                env=None if base is None else reaper.environment,
            )
        finally:
            worker.close()
        took = time.perf_counter() - started
    return outcome, to_record(task, outcome, took, 1)
