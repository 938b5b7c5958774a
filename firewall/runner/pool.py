"""Async Python evals: a few worker processes, each running many trials on one event loop.

``concurrency`` counts trials in flight, not processes. An ``async def`` eval spends
its trial waiting on a model, so one interpreter per CPU holds all of a run's async
trials: the pool sends each trial to its least busy worker (``_worker.serve_pool``
says how a worker runs them), and sixty-four calls in flight cost two interpreters
on a two-CPU runner, not sixty-four.

Sharing a process costs isolation, so the pool owns what the one-trial-per-process
worker (``python.py``) gets for free:
- **Timeouts** hold per trial inside the worker; a trial that holds the loop with
  blocking code is failed by the worker's watchdog, and the trials beside it are
  paused, not failed.
- **A worker that dies or stops answering** (a segfault, ``os._exit``, blocking C
  code that holds the interpreter itself, so that not even the watchdog can run)
  loses the trials in flight on it, none of which gave a result. Each of them is
  run again, alone, in a worker of its own (``Alone.TRIAL`` from ``call``): the one that
  killed the worker does so again and is charged with it, precisely; the others
  give the result they were about to give. That is not a retry: no result of
  theirs was ever seen. A target that kills a worker when alone runs alone from
  then on (``isolate``).
- **What a trial printed** through ``print`` or ``sys.stderr`` is kept per trial;
  what C code or a child process writes to descriptor 2 is no one trial's, and is
  dropped (a trial run again alone keeps its own).
- **Processes a trial starts** end when no trial is in flight on its worker, and
  with the worker at the end of the run.
"""

from __future__ import annotations

import enum
import itertools
import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from firewall.runner._supervisor import descendants, kill_all
from firewall.runner.outcome import Outcome
from firewall.runner.python import MAX_REPLY_BYTES, cpus, worker_command

INTERRUPTED = "the run was interrupted"
SILENT_S = 3.0  # a worker that beats every second and has said nothing for this long is held
GRACE_S = 2.0  # past a trial's own limits, before the runner steps in


class Alone(enum.Enum):
    """Why a trial the pool was given runs in a worker of its own instead."""

    TARGET = "its target runs alone: not a coroutine function, or it kills its worker"
    TRIAL = "its worker was lost under it, with no result of its own seen"


class _Pending:
    """One trial sent to a pool worker, until its reply (or its loss) comes.

    ``done`` is a bare lock, held until then: with sixty-four slots waiting, an Event
    (a Condition and a lock of its own per wait) was the runner's largest cost.
    """

    __slots__ = (
        "boot_s",
        "done",
        "import_timeout",
        "imported",
        "lost",
        "reply",
        "sent",
        "target",
        "timeout",
    )

    def __init__(self, target: str, timeout: float, import_timeout: float) -> None:
        self.target = target
        self.timeout = timeout
        self.import_timeout = import_timeout
        self.sent = time.monotonic()
        self.done = threading.Lock()
        self.done.acquire()
        self.reply: dict[str, Any] | None = None
        self.imported: float | None = None
        self.boot_s: float | None = None  # the worker's boot, carried by its first trial
        self.lost = False  # its worker went before it answered

    def resolve(self) -> None:
        self.done.release()

    def wait(self) -> None:
        self.done.acquire()


class _PoolWorker:
    """One ``--pool`` worker process and the thread that reads its replies.

    Only the reader thread takes trials out of ``_pending``, and it alone loses them
    all when the worker goes; ``_lock`` orders that against a slot putting one in.
    """

    def __init__(self, cwd: Path, env: Mapping[str, str] | None) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._loaded: dict[str, float] = {}  # target -> when the worker had imported it
        self._ids = itertools.count()
        self._started = time.monotonic()
        self._heard = self._started
        self._boot_s: float | None = None  # until the first trial's outcome carries it
        self._ready: float | None = None  # when the worker had booted
        self.alive = True
        self._ending = False  # killed by ``end``: once
        self.proc = subprocess.Popen(
            worker_command("--pool"),
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # What a trial prints through Python is kept per trial by the worker; what
            # C code writes to descriptor 2 is no one trial's, and a lost trial's rerun
            # alone keeps its own stderr.
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        assert self.proc.stdin is not None
        self._stdin = self.proc.stdin.fileno()
        self._reader = threading.Thread(
            target=self._read, name=f"firewall-pool-{self.proc.pid}", daemon=True
        )
        self._reader.start()

    @property
    def load(self) -> int:
        return len(self._pending)

    def send(
        self,
        target: str,
        seed: int,
        trial: int,
        timeout: float,
        import_timeout: float,
        rate: tuple[str, int, float] | None = None,
        output: Any = None,
    ) -> _Pending:
        ident = next(self._ids)
        pending = _Pending(target, timeout, import_timeout)
        request: dict[str, Any] = {
            "id": ident,
            "target": target,
            "seed": seed,
            "trial": trial,
            "timeout": timeout,
            "import_timeout": import_timeout,
        }
        if rate is not None:
            request["rate"] = rate  # the worker takes the token just before the call
        if output is not None:
            request["output"] = output  # a judge's call: the output it scores
        data = (json.dumps(request) + "\n").encode()
        with self._lock:
            if not self.alive or len(data) > select.PIPE_BUF:
                # A pipe writes at most PIPE_BUF bytes whole; a longer request (a target
                # name of kilobytes) could interleave with another slot's, so it runs alone.
                pending.lost = True
                pending.resolve()
                return pending
            self._pending[ident] = pending
        try:
            os.write(self._stdin, data)  # whole, so slots need no lock between them
        except OSError:
            pass  # the reader sees the end of the stream and loses the trial
        return pending

    def outcome(self, pending: _Pending) -> Outcome:
        reply = pending.reply
        assert reply is not None
        boot = pending.boot_s
        took, blocked = reply.get("took"), reply.get("blocked")
        outcome = Outcome(
            import_s=pending.imported,
            call_s=float(took) if isinstance(took, (int, float)) else None,
            boot_s=boot,
            blocked_s=float(blocked) if isinstance(blocked, (int, float)) else None,
        )
        if "error" in reply:
            outcome.error = str(reply["error"])
            outcome.traceback = reply.get("traceback")
            outcome.output = reply.get("output")
        else:
            outcome.payload = reply.get("result")
        return outcome

    def _read(self) -> None:
        """Dispatch replies until the worker ends, stops answering, or sends what is no
        reply (garbled, or over 16 MiB); then every trial in flight on it is lost. Why is
        not kept: each lost trial runs again alone, and that run says it precisely."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buffer = bytearray()
        while True:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                if self._held():
                    break
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk or len(buffer) + len(chunk) > MAX_REPLY_BYTES:
                break
            *lines, rest = bytes(buffer + chunk).split(b"\n")
            buffer = bytearray(rest)
            self._heard = time.monotonic()
            try:
                for line in lines:
                    self._dispatch(json.loads(line))
            except (ValueError, KeyError, TypeError):
                break
        self._lose_all()

    def _dispatch(self, reply: dict[str, Any]) -> None:
        if "beat" in reply:
            return
        if "ready" in reply:
            self._ready = time.monotonic()
            self._boot_s = self._ready - self._started
            return
        if "imported" in reply:
            pending = self._pending.get(reply["id"])
            if pending is not None:
                pending.imported = float(reply["imported"])
                self._loaded[pending.target] = time.monotonic()
            return
        pending = self._pending.pop(reply["id"], None)
        if pending is None:
            return
        pending.reply = reply
        pending.boot_s, self._boot_s = self._boot_s, None  # the first trial carries it, once
        pending.resolve()

    def _held(self) -> bool:
        """Whether the worker has been silent too long with a trial past the runner's limit."""
        now = time.monotonic()
        if now - self._heard < SILENT_S:
            return False
        return any(now > self._deadline(pending) for pending in list(self._pending.values()))

    def _deadline(self, pending: _Pending) -> float:
        """When the runner gives up on a trial: past its boot, import and timeout, with
        grace (the worker's own deadlines, paused for trials beside a blocking one, come
        first; this one is for a worker that cannot keep them)."""
        limit = pending.timeout + GRACE_S
        if self._ready is None:
            return self._started + pending.import_timeout + limit
        loaded = self._loaded.get(pending.target)
        if loaded is None:
            return max(pending.sent, self._ready) + pending.import_timeout + limit
        return max(pending.sent, loaded) + limit

    def _lose_all(self) -> None:
        self.kill()
        with self._lock:
            self.alive = False
            lost, self._pending = list(self._pending.values()), {}
        for pending in lost:
            pending.lost = True
            pending.resolve()

    def kill(self) -> None:
        self._signal()
        self.proc.wait()

    def _signal(self) -> None:
        stray = descendants(self.proc.pid)  # in sessions of their own: the group kill misses them
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        kill_all(stray)

    def end(self) -> None:
        """Kill the worker and what it started, without waiting for them to go (``close``)."""
        with self._lock:
            self.alive = False
            ending, self._ending = not self._ending, True
        if ending:
            self._signal()

    def close(self) -> None:
        self.end()
        self.proc.wait()
        self._reader.join(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


class AsyncPool:
    """The run's pool workers, one per CPU at most: all started at once when the run has
    async evals (``warm``), else on the first async trial."""

    def __init__(
        self, cwd: Path, env: Mapping[str, str] | None, size: int, workers: int | None = None
    ) -> None:
        """At most ``workers`` (one per CPU unless given) and no more than ``size``, the
        trials that can be in flight. One per CPU measured best (``benchmarks/pool_size.py``;
        the README's Performance section has the figures)."""
        self._cwd = cwd
        self._env = env
        self._size = max(1, min(size, cpus() if workers is None else workers))
        self._workers: list[_PoolWorker] = []
        self._retired: list[_PoolWorker] = []  # died or held: closed with the pool
        self._lock = threading.Lock()
        self._alone: set[str] = set()  # targets that run in a worker of their own
        self._stopped = False

    def call(
        self,
        target: str,
        seed: int,
        trial: int,
        timeout: float,
        register: Callable[[int | None], None] = lambda pid: None,
        import_timeout: float = 120.0,
        rate: tuple[str, int, float] | None = None,
        output: Any = None,
    ) -> Outcome | Alone:
        """Run one trial on a pool worker, or say why it must run alone instead.
        ``output``: the call is a judge's, of that output (``firewall.runner.judged``)."""
        if target in self._alone:
            return Alone.TARGET
        if self._stopped:
            return Outcome(error=INTERRUPTED)
        worker = self._pick()
        pending = worker.send(target, seed, trial, timeout, import_timeout, rate, output)
        register(worker.proc.pid)
        try:
            pending.wait()
        finally:
            register(None)
        if self._stopped:
            return Outcome(error=INTERRUPTED)  # not a measurement: the runner drops it
        if pending.lost:
            return Alone.TRIAL
        assert pending.reply is not None
        if pending.reply.get("sync"):
            self._alone.add(target)
            return Alone.TARGET
        return worker.outcome(pending)

    def warm(self) -> None:
        """Start every worker now, before the first trial needs one: the run's async trials
        then find them booted, instead of waiting on boots that began with them."""
        with self._lock:
            while len(self._workers) < self._size:
                self._workers.append(_PoolWorker(self._cwd, self._env))

    def isolate(self, target: str) -> None:
        """Run this target's trials alone from now on (one of them killed its worker)."""
        self._alone.add(target)

    def _pick(self) -> _PoolWorker:
        with self._lock:
            self._retired += [w for w in self._workers if not w.alive]
            self._workers = [w for w in self._workers if w.alive]
            if len(self._workers) < self._size and all(w.load for w in self._workers):
                self._workers.append(_PoolWorker(self._cwd, self._env))
            return min(self._workers, key=lambda w: w.load)

    def stop(self) -> None:
        """The run is halted: kill the workers, and run nothing alone for what they lose."""
        self._stopped = True
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            worker.kill()

    def close(self) -> None:
        with self._lock:
            workers, self._workers = [*self._workers, *self._retired], []
            self._retired = []
        for worker in workers:  # all killed first: their ends overlap instead of queueing
            worker.end()
        for worker in workers:
            worker.close()
