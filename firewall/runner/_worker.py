"""The trial worker: a child process that imports eval modules once and serves many trials.

It speaks JSON lines: a request ``{"target": "module:function", "seed": S,
"trial": I}`` on stdin (a judge's also has the ``"output"`` it is called with),
one reply ``{"result": ...}`` or ``{"error": "..."}`` on the protocol stream,
which opens with one ``{"ready": true}`` line once the worker has booted. Eval
code never sees that stream: the worker moves it to a private descriptor and
points file descriptor 1 at stderr, so whatever an eval prints lands in the
worker's log and can never be taken for a reply.

``--pool`` serves many ``async def`` trials at once instead, each a task on one
event loop, with an id on every request and reply (the pool section below says
how it keeps a trial that blocks the loop from costing the others).
``--discover PATH...`` imports the files under the paths and prints the
``@firewall.eval`` functions it found, as one JSON document.

No process a trial starts outlives the trial. On Linux the worker is a child
subreaper: a process orphaned below it (a double fork, a ``setsid`` child whose
parent exited) becomes its child rather than init's, so every process a trial
started is still a descendant, in whatever session or group. Before it replies,
the worker kills and reaps all of its children but those started while an eval
module was imported, which belong to the module and live with the worker (a
server an eval talks to); a killed child's own children are adopted in turn,
and killed in the next round. A trial that started nothing costs one
``waitpid``. ``firewall/runner/reaper.py`` says what the rest of the runner
guarantees.

Every worker pays for its own start-up, once per runner slot, so serving
imports only what an interpreter has loaded anyway (json, os, re, signal, sys, time,
importlib), and ctypes for the one ``prctl`` call: no ``firewall`` package (the
runner loads this file by path), no typing, no inspect for plain functions.
asyncio, traceback, pathlib, inspect and ``firewall`` are imported on first
use, by the trials that need them.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    Eval = tuple[Callable[..., Any], bool, bool]  # function, takes `trial`, is async

Meter = tuple[str, int, float]
"""A rate limit's start log: its file, how many starts it keeps, the window (throttle.py)."""

_FUNCTION = type(lambda: None)
_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_VARARGS, _VARKEYWORDS, _COROUTINE = 0x04, 0x08, 0x80  # inspect.CO_VARARGS, ...
# What makes inspect look past a plain function's code object: then ask inspect.
_INTROSPECTED = (
    "__wrapped__",
    "__signature__",
    "_partialmethod",
    "__partialmethod__",
    "_is_coroutine_marker",
)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    # The orchestrator owns interruption: it kills the worker when it needs to.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.path[0] != os.getcwd():
        sys.path.insert(0, os.getcwd())
    if os.environ.get(READS_VAR):
        _Reads.start(os.environ[READS_VAR])
    if argv[:1] == ["--discover"]:
        from pathlib import Path

        adopting = adopt_orphans()
        found = discover([Path(p) for p in argv[1:]])
        if adopting:
            end_processes(set())  # what importing the modules started ends with discovery
        print(json.dumps(found))
        return
    if argv[:1] == ["--pool"]:
        serve_pool()
        return
    serve(own_log=argv[:1] == ["--own-log"])


def serve(*, own_log: bool = False) -> None:
    """Answer requests until stdin closes.

    With ``own_log`` (the runner's workers), stderr is a file the worker owns: it
    is emptied as each request arrives, so that when a trial kills the worker
    the log holds that trial's stderr only.
    """
    log = os.dup(2) if own_log else None  # private: an eval that moves fd 2 cannot redirect it
    requests_fd, replies_fd = _private_streams()
    replies = os.fdopen(replies_fd, "w", buffering=1, encoding="utf-8")
    requests = os.fdopen(requests_fd, "r", encoding="utf-8")
    sys.stdout = sys.stderr
    serial = _Serial(replies, log)
    replies.write('{"ready": true}\n')  # booted: the orchestrator may send requests
    for line in requests:
        replies.write(serial.answer(line) + "\n")


class _Serial:
    """The serial worker's state across requests: the evals it has loaded, and the
    processes their modules started, which live with it."""

    __slots__ = ("adopting", "cache", "imported", "log", "loop", "modules", "replies")

    def __init__(self, replies: Any, log: int | None) -> None:
        self.replies = replies
        self.log = log
        self.cache: dict[str, Eval] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.adopting = adopt_orphans()
        self.modules: set[int] = set()  # children started by importing an eval module
        self.imported: set[str] = set()  # eval modules this worker has imported

    def answer(self, line: str) -> str:
        """The reply to one request line, once every process its trial started has ended."""
        if self.log is not None:
            _empty(self.log)
        request = json.loads(line)
        if _reads is not None:
            _reads.target = request["target"]
        reply = self._call(request)
        if self.adopting:
            end_processes(self.modules)
        if isinstance(reply, str):
            return reply
        try:
            return json.dumps(reply)
        except (TypeError, ValueError) as exc:
            return json.dumps({"error": f"result is not JSON-serialisable: {exc}"})

    def _call(self, request: dict[str, Any]) -> str | dict[str, Any]:
        """Call the eval: the reply as its text (a bare score), or as a dict to dump."""
        called = 0.0
        try:
            target = request["target"]
            fn, takes_trial, is_async = self.cache.get(target) or self._load(target)
            kwargs = {"seed": request["seed"]}
            if takes_trial:
                kwargs["trial"] = request["trial"]
            if is_async and self.loop is None:
                import asyncio

                self.loop = asyncio.new_event_loop()
            if request.get("rate"):
                self._take_start(request["rate"])
            # A judge's request carries the output it scores, its first argument.
            args = (request["output"],) if "output" in request else ()
            called = time.perf_counter()  # the call alone: no boot, no import, no protocol
            if is_async:
                assert self.loop is not None
                value = self.loop.run_until_complete(fn(*args, **kwargs))
            else:
                value = fn(*args, **kwargs)
            return _result(value, time.perf_counter() - called)
        except (Exception, SystemExit) as exc:  # any failure costs one trial
            return self._failure(exc, called)

    def _load(self, target: str) -> Eval:
        """An eval's first request: load it, and say how long its module's import took."""
        started = time.perf_counter()
        entry = _load(target, self.cache)
        # Said at once: the trial's own timeout starts now, not at the request. Once
        # per module: its other functions cost a getattr (PythonWorker._answer).
        module = target.partition(":")[0]
        if module not in self.imported:
            self.imported.add(module)
            self.replies.write(json.dumps({"imported": time.perf_counter() - started}) + "\n")
            if self.adopting:  # what its import started lives with the worker
                self.modules.update(children())
        return entry

    def _take_start(self, meter: Meter) -> None:
        """Wait for the rate limit's turn; the trial's own timeout starts after it."""
        waited = take_start(meter)
        if waited:  # the trial's own timeout starts now, not at the request
            self.replies.write(json.dumps({"waited": waited}) + "\n")

    def _failure(self, exc: BaseException, called: float) -> dict[str, Any]:
        """The error reply: with how long the call ran, if it started, and what it printed."""
        reply: dict[str, Any] = {"error": describe(exc), "traceback": own_traceback(exc)}
        if called:
            reply["took"] = time.perf_counter() - called
        if self.log is not None:
            reply["output"] = printed(self.log)
        return reply


def _result(value: Any, took: float) -> str | dict[str, Any]:
    """The reply of a call that returned."""
    if (type(value) is float or type(value) is int) and value - value == 0:
        # A finite bare score, the common reply: the text json.dumps would write.
        return f'{{"result": {{"score": {float(value)!r}}}, "took": {took!r}}}'
    return {"result": to_payload(value), "took": took}


def _empty(log: int) -> None:
    """Empty the worker's log for the next trial."""
    try:
        os.ftruncate(log, 0)
    except OSError:
        pass


PRINTED_BYTES = 8000  # the tail of a trial's log an error reply carries (4 x OUTPUT_TAIL_CHARS)


def printed(log: int) -> str:
    """The tail of what the current trial printed: its worker's log holds it alone.

    Sent with an error reply, because the runner may have sent the next trials with
    this one (``PythonWorker.pipeline``): by the time it reads the reply, the worker
    has emptied the log for the next trial."""
    sys.stderr.flush()
    try:
        size = os.fstat(log).st_size
        data = os.pread(log, PRINTED_BYTES, max(0, size - PRINTED_BYTES))
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def _private_streams() -> tuple[int, int]:
    """Move the protocol streams out of the eval's reach: (requests, replies) descriptors.

    Descriptor 1 becomes stderr, so that whatever an eval prints lands in the worker's
    log and can never be taken for a reply, and descriptor 0 reads an empty file, as a
    command eval's stdin does: eval code can neither hang on the protocol stream nor eat
    a request from it.
    """
    replies, requests = os.dup(1), os.dup(0)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - lives with the worker
    return requests, replies


# ------------------------------------------------------------------ the pool: async trials
#
# `--pool` serves many trials at once: each request becomes a task on one event loop, so
# a worker holds as many model calls in flight as the runner sends it. The protocol is the
# serial one with an "id" on every request and reply, and two more kinds of line:
# {"beat": true} once a second, from a thread, so that the runner can tell a worker whose
# interpreter is held (by blocking C code) from one whose trials are merely slow; and
# {"id": N, "sync": true} for a target that turned out not to be a coroutine function,
# which the runner then runs in a worker of its own.
#
# A trial that blocks the loop (time.sleep or a synchronous client in an `async def`)
# stalls every trial beside it. The heartbeat, a callback every BEAT_S, sees the stall
# when it runs late: the time is added to the deadlines and taken off the durations of
# the trials that were made to wait, so that they neither time out nor read slow for it.
# While the loop is stalled, a watchdog thread signals the main thread; the handler runs
# inside the blocking code, in the blocking trial's context, so it knows whom to blame,
# and once that trial is past its own deadline it raises there: the blocking trial fails
# with a message that says what happened, and the loop, and every other trial, go on.

BEAT_S = 0.05  # the heartbeat's period
STALL_S = 0.2  # a heartbeat this late means a step held the loop
WATCH_S = 0.1  # how often the watchdog looks at the heartbeat
TELL_S = 1.0  # the runner hears from the worker at least this often
HOPELESS_S = 2.0  # past the culprit's deadline, a stall the signal did not end
_BLAME = signal.SIGUSR2


class Blocked(BaseException):  # an interruption, like KeyboardInterrupt
    """Raised inside a trial that has held the event loop past its own deadline."""


class _Trial:
    __slots__ = (
        "began",
        "blocked",
        "captured",
        "deadline",
        "held",
        "id",
        "import_timeout",
        "importing",
        "request",
        "started",
        "task",
        "timeout",
    )

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.id = request["id"]
        self.timeout = float(request["timeout"])
        self.import_timeout = float(request.get("import_timeout", 120.0))
        self.deadline = float("inf")  # set when it starts: a trial waiting to start cannot be late
        self.importing: str | None = None  # the module being imported for this trial
        self.began = 0.0  # monotonic, when its task first ran; 0 until then
        self.started = 0.0  # perf_counter, when the eval was called
        self.held = 0.0  # seconds other trials held the loop while this one waited
        self.blocked = 0.0  # the longest this trial held the loop
        self.captured = _Captured()
        self.task: asyncio.Task[None] | None = None


class _Captured:
    """The tail of what one trial printed through sys.stdout or sys.stderr."""

    __slots__ = ("parts", "size")
    LIMIT = 8000  # kept while it runs; its record keeps TAIL
    TAIL = 2000  # outcome.OUTPUT_TAIL_CHARS (the worker does not import the package)

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size > 2 * self.LIMIT:
            joined = "".join(self.parts)[-self.LIMIT :]
            self.parts, self.size = [joined], len(joined)

    def text(self) -> str | None:
        joined = "".join(self.parts).rstrip()
        if not joined:
            return None
        return joined if len(joined) <= self.TAIL else "…" + joined[-self.TAIL :]


class _Tee:
    """sys.stdout and sys.stderr of a pool worker: each write goes to the worker's log,
    and to the captured output of the trial whose code wrote it (its context says which)."""

    def __init__(self, stream: Any, current: Any) -> None:
        self._stream = stream
        self._current = current

    def write(self, text: str) -> int:
        trial = self._current.get(None)
        if trial is not None:
            trial.captured.add(text)
        return int(self._stream.write(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def serve_pool() -> None:
    """Answer requests until stdin closes, each trial a task on this process's loop."""
    import asyncio
    import contextvars
    import threading

    requests, replies = _private_streams()
    current: contextvars.ContextVar[_Trial | None] = contextvars.ContextVar("trial")
    sys.stdout = sys.stderr = _Tee(sys.stderr, current)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    pool = _Pool(loop, replies, current)
    if _reads is not None:
        _reads.current = current
    signal.signal(_BLAME, pool.on_signal)
    threading.Thread(target=pool.watch, name="firewall-watchdog", daemon=True).start()
    loop.add_reader(requests, pool.on_readable, requests)
    pool.send({"ready": True})
    loop.call_soon(pool.beat)
    while not pool.closed:
        try:
            loop.run_until_complete(pool.closing)
        except (SystemExit, KeyboardInterrupt):  # raised in a task the trial did not await
            continue


class _Pool:
    def __init__(self, loop: asyncio.AbstractEventLoop, replies: int, current: Any) -> None:
        import contextvars
        import threading

        self.loop = loop
        self.current = current
        self.replies = replies
        self.writing = threading.Lock()  # the loop and the watchdog both write replies
        self.outbox: list[str] = []
        self.quiet = contextvars.copy_context()  # the loop's own context: no trial's
        self.flight: dict[int, _Trial] = {}
        self.cache: dict[str, Eval] = {}
        self.buffer = b""
        self.closed = False
        self.closing: asyncio.Future[None] = loop.create_future()
        self.main = threading.main_thread().ident
        self.beat_at = time.monotonic()  # when the heartbeat last ran
        self.told_at = 0.0  # when the runner last heard from this worker
        self.blamed: _Trial | None = None  # the trial seen holding the loop in this stall
        self.adopting = adopt_orphans()
        self.modules: set[int] = set()  # children started by importing an eval module

    # -- the loop's side

    def on_readable(self, fd: int) -> None:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            self.loop.remove_reader(fd)
            self.closed = True
            if not self.closing.done():
                self.closing.set_result(None)
            return
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            try:
                trial = _Trial(json.loads(line))
            except (ValueError, KeyError, TypeError):
                # A request that cannot be read cannot be answered: end the worker, so that
                # the runner sees it go and runs its trials alone, rather than wait on one.
                os._exit(70)  # EX_SOFTWARE
            self.flight[trial.id] = trial
            trial.task = self.loop.create_task(self.run(trial))

    async def run(self, trial: _Trial) -> None:
        import asyncio  # loaded already: the pool runs on it

        self.current.set(trial)  # this task's own context, and its children's
        trial.began = time.monotonic()
        request = trial.request
        try:
            entry = self.cache.get(request["target"])
            if entry is None:
                trial.importing = request["target"].partition(":")[0]
                trial.deadline = time.monotonic() + trial.import_timeout
                started = time.perf_counter()
                entry = _load(request["target"], self.cache)  # holds the loop: others wait
                # Said at once, not with the turn's replies: the runner's own limit for the
                # trials of this target counts from here, even if one then holds the loop.
                imported = {"id": trial.id, "imported": time.perf_counter() - started}
                self.write((json.dumps(imported) + "\n").encode())
                trial.importing = None
                if self.adopting:
                    self.modules.update(children())
            fn, takes_trial, is_async = entry
            if not is_async:
                self.finish(trial, {"id": trial.id, "sync": True})
                return
            kwargs = {"seed": request["seed"]}
            if takes_trial:
                kwargs["trial"] = request["trial"]
            rate = request.get("rate")
            if rate:  # the token, taken where the trial starts: nothing awaits in between
                trial.deadline = float("inf")
                while (due := try_start(*rate)) > 0:
                    await asyncio.sleep(due)
            trial.held = 0.0
            trial.deadline = time.monotonic() + trial.timeout
            trial.started = time.perf_counter()
            value = await fn(*((request["output"],) if "output" in request else ()), **kwargs)
            took = time.perf_counter() - trial.started - trial.held
            reply = {"id": trial.id, "result": to_payload(value), "took": max(0.0, took)}
        except Blocked:
            reply = {"id": trial.id, "error": self.overdue(trial)}
        except asyncio.CancelledError:
            if self.flight.get(trial.id) is not trial:
                return  # timed out: the reply has gone
            reply = {"id": trial.id, "error": "the trial was cancelled (asyncio.CancelledError)"}
        except (Exception, SystemExit) as exc:  # any failure costs one trial
            reply = {"id": trial.id, "error": describe(exc), "traceback": own_traceback(exc)}
        if trial.started and "took" not in reply:
            reply["took"] = max(0.0, time.perf_counter() - trial.started - trial.held)
        self.finish(trial, reply)

    def finish(self, trial: _Trial, reply: dict[str, Any]) -> None:
        if self.flight.get(trial.id) is not trial:
            return  # timed out meanwhile: its reply has gone
        del self.flight[trial.id]
        if "error" in reply:
            reply["output"] = trial.captured.text()
        if trial.blocked:
            reply["blocked"] = trial.blocked
        try:
            text = json.dumps(reply)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"id": trial.id, "error": f"result is not JSON-serialisable: {exc}"})
        self.send_text(text)
        if not self.flight and self.adopting:
            end_processes(self.modules)  # between trials: what they started ends

    def overdue(self, trial: _Trial) -> str:
        """Why a trial that is past its deadline failed."""
        if trial.importing is not None:
            return (
                f"importing {trial.importing} took longer than import_timeout "
                f"{trial.import_timeout:g} s"
            )
        message = f"timed out after {trial.timeout:g} s"
        if trial.blocked >= STALL_S:
            message += (
                f": it held its worker's event loop for {trial.blocked:.1f} s without "
                "awaiting (blocking code in an async def, such as time.sleep or a "
                "synchronous client); the trials beside it were paused, not failed"
            )
        return message

    def beat(self) -> None:
        """Every BEAT_S: charge a stall to the trial that caused it, and time out the late."""
        now = time.monotonic()
        late = now - self.beat_at - BEAT_S
        if late > STALL_S:
            culprit = self.blamed
            for trial in self.flight.values():
                if trial is culprit:
                    trial.blocked = max(trial.blocked, late)
                elif trial.began:  # it waited for the culprit: the time is not its own
                    waited = min(late, now - trial.began)
                    trial.deadline += waited
                    trial.held += waited
        self.blamed = None
        for trial in [t for t in self.flight.values() if t.deadline <= now]:
            self.finish(trial, {"id": trial.id, "error": self.overdue(trial)})
            if trial.task is not None:
                trial.task.cancel()
        self.beat_at = now
        self.loop.call_at(now + BEAT_S, self.beat)

    def send(self, reply: dict[str, Any]) -> None:
        self.send_text(json.dumps(reply))

    def send_text(self, text: str) -> None:
        """Queue a reply line; the lines of one turn of the loop go out in one write."""
        self.outbox.append(text)
        if len(self.outbox) == 1:  # in no trial's context: a flush is nobody's to interrupt
            self.loop.call_soon(self.flush, context=self.quiet)

    def flush(self) -> None:
        lines, self.outbox = self.outbox, []
        self.write(("\n".join(lines) + "\n").encode())

    def write(self, data: bytes) -> None:
        with self.writing:
            while data:
                data = data[os.write(self.replies, data) :]
            self.told_at = time.monotonic()

    # -- the watchdog's side

    def watch(self) -> None:
        """A thread: signal the main thread while the loop is held; tell the runner we live."""
        while not self.closed:
            time.sleep(WATCH_S)
            now = time.monotonic()
            stalled = bool(self.flight) and now - self.beat_at > BEAT_S + STALL_S
            if stalled:
                signal.pthread_kill(self.main, _BLAME)  # type: ignore[arg-type]
                if now > self.hopeless():
                    continue  # silence: the runner kills this worker and runs its trials alone
            if now - self.told_at >= TELL_S:
                self.write(b'{"beat": true}\n')

    def hopeless(self) -> float:
        """When a stall has outlasted whoever caused it, the signal having failed to end it
        (an eval that took the signal for itself, a step deaf to it): the blamed trial's
        deadline, else the latest of the trials in flight, with grace."""
        blamed = self.blamed
        if blamed is not None:
            return blamed.deadline + HOPELESS_S
        deadlines = [t.deadline for t in list(self.flight.values()) if t.deadline != float("inf")]
        return max(deadlines, default=float("inf")) + HOPELESS_S

    def on_signal(self, signum: int, frame: Any) -> None:
        """In the main thread, inside whatever code holds the loop."""
        trial: _Trial | None = self.current.get(None)
        if trial is None:
            return  # the loop itself
        if self.flight.get(trial.id) is not trial:
            return  # a trial already answered for
        self.blamed = trial
        now = time.monotonic()
        trial.blocked = max(trial.blocked, now - self.beat_at)  # so far: it may reply first
        if now >= trial.deadline:
            raise Blocked


# ------------------------------------------------------------------ rate limits
#
# A bucket's start log (throttle.py says why): ``starts`` doubles, oldest first, in a file
# every process of the run opens; a start is taken under an exclusive flock, so that the
# log orders the starts of every worker and slot of the run.

_LOGS: dict[str, int] = {}  # path -> an open descriptor
# A start is logged when its token is taken; the eval's own first instruction follows a
# moment later, later still when the process is switched out on a loaded machine. The
# window is kept this much longer than it says, so that a start delayed by up to this
# much still falls in its own window (it costs a limit of 20/s under 5% of its rate).
SLACK_S = 0.05


def new_log(path: str, starts: int) -> None:
    """An empty start log: no start yet, so the first ``starts`` go at once."""
    import struct

    with open(path, "wb") as file:
        file.write(struct.pack(f"{starts}d", *([float("-inf")] * starts)))


def try_start(
    path: str, starts: int, window: float, clock: Callable[[], float] = time.monotonic
) -> float:
    """Take a start now (0.0), or say how long until one is due (seconds).

    The clock is read under the lock: a start logged earlier than it happened would let
    the start one window later come early."""
    import fcntl
    import struct

    fd = _LOGS.get(path)
    if fd is None:
        fd = _LOGS[path] = os.open(path, os.O_RDWR)
    size = 8 * starts
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        log = struct.unpack(f"{starts}d", os.pread(fd, size, 0))
        now = clock()
        due: float = log[0] + window + SLACK_S - now
        if due > 0:
            return due
        os.pwrite(fd, struct.pack(f"{starts}d", *log[1:], now), 0)
        return 0.0
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def take_start(meter: Meter) -> float:
    """Wait for a start of this bucket; the seconds waited."""
    waited = 0.0
    while (due := try_start(*meter)) > 0:
        time.sleep(due)
        waited += due
    return waited


def adopt_orphans() -> bool:
    """Make this process the reaper of its descendants' orphans; False where it cannot be."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (ImportError, OSError, AttributeError):  # an interpreter built without ctypes
        return False


def end_processes(spared: set[int]) -> None:
    """SIGKILL and reap every child but the ``spared``, until none is left.

    With ``adopt_orphans`` in force that is every process started below this one,
    since an orphaned descendant becomes a child here. ``spared`` loses the pids
    that are no longer children, so that a pid passed on is not spared by mistake,
    and gains those that refuse the signal.
    """
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no children at all: the usual case
        if pid:
            spared.discard(pid)
            continue  # reaped one that had exited; look again
        left = children()
        spared.intersection_update(left)
        doomed = [child for child in left if child not in spared]
        if not doomed:
            return
        killed = []
        for child in doomed:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:  # reaped meanwhile, by a thread of the eval's
                continue
            except PermissionError:  # a setuid program: not the worker's to kill
                spared.add(child)
                continue
            killed.append(child)
        if killed:
            try:
                os.waitpid(killed[0], 0)
            except ChildProcessError:
                pass


def children() -> list[int]:
    """This process's children (each thread has a list of its own), zombies included."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)  # reaps nothing
    except ChildProcessError:
        return []  # none: no need to read /proc
    pids: list[int] = []
    try:
        for thread in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{thread}/children", "rb") as file:
                pids.extend(int(pid) for pid in file.read().split())
    except FileNotFoundError:  # a thread that just ended, or no CONFIG_PROC_CHILDREN
        return _children_by_parent()
    return pids


def _children_by_parent() -> list[int]:
    """This process's children, found by reading every process's parent."""
    me = str(os.getpid()).encode()
    pids: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc mounted: nothing can be found
        return pids
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                parent = file.read().rpartition(b")")[2].split(maxsplit=2)[1]
        except (OSError, IndexError):
            continue
        if parent == me:
            pids.append(int(name))
    return pids


# ------------------------------------------------------------------ what an eval reads
#
# With FIREWALL_READS set (firewall.runner.reads), the worker notes, for each eval
# target it serves, the project files (under its working directory, outside installed
# packages) that the target imports or opens, so that the next run knows an eval's
# inputs without being told. An audit hook sees every `open` (a module loaded from
# source or bytecode is one too, its .pyc read as its .py); a module that another target
# had imported already is found by following the import statements of the project's
# modules from the target's own. Each new (target, file) is one JSON line, written at
# once to a file of this worker's own: a trial that kills the worker loses nothing.

READS_VAR = "FIREWALL_READS"  # firewall/runner/reads.py names it too
_PLAIN = re.compile(r"[\w.:/ -]*\Z", re.ASCII).match  # text json.dumps writes as it is
_reads: _Reads | None = None


class _Reads:
    def __init__(self, directory: str) -> None:
        self.root = os.path.join(os.getcwd(), "")
        path = os.path.join(directory, f"{os.getpid()}.jsonl")
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.seen: set[tuple[str, str]] = set()
        self.target: str | None = None  # the serial worker's trial
        self.current: Any = None  # the pool's: the context variable of the running trial
        # module -> (len(sys.modules) when its files were found, the project files it
        # reaches); (module, file) -> the modules its import statements name
        self.reached: dict[str, tuple[int, list[str]]] = {}
        self.parsed: dict[tuple[str, str], list[str]] = {}

    @classmethod
    def start(cls, directory: str) -> None:
        global _reads
        _reads = cls(directory)
        sys.addaudithook(_reads.audit)

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event != "open" or not args or isinstance(args[0], int):
            return
        mode, flags = (args[1], args[2]) if len(args) > 2 else (None, 0)
        if (mode is not None and "r" not in mode and "+" not in mode) or (
            mode is None and isinstance(flags, int) and flags & 3 == os.O_WRONLY
        ):
            return  # written, not read
        trial = self.current.get(None) if self.current is not None else None
        target = trial.request["target"] if trial is not None else self.target
        if target is not None:
            self.note(target, os.fsdecode(args[0]))

    def note(self, target: str, path: str) -> None:
        relative = self.relative(path)
        if relative is not None:
            self.write(target, relative)

    def relative(self, path: str) -> str | None:
        """The project file ``path`` names (a .pyc as its .py), relative to the project;
        None for a file outside it, in an installed package or in .git."""
        path = os.path.normpath(os.path.join(os.getcwd(), path))
        head, name = os.path.split(path)
        if os.path.basename(head) == "__pycache__" and name.endswith(".pyc"):
            path = os.path.join(os.path.dirname(head), name.split(".", 1)[0] + ".py")
        if not path.startswith(self.root) or "-packages" + os.sep in path:
            return None
        relative = path[len(self.root) :].replace(os.sep, "/")
        return None if relative.startswith(".git/") else relative

    def write(self, target: str, relative: str) -> None:
        if (target, relative) in self.seen:
            return
        self.seen.add((target, relative))
        if _PLAIN(target) and _PLAIN(relative):  # nothing to escape: the line json.dumps writes
            line = f'{{"target": "{target}", "file": "{relative}"}}\n'
        else:
            line = json.dumps({"target": target, "file": relative}) + "\n"
        os.write(self.fd, line.encode())

    def imported(self, target: str, module_name: str) -> None:
        """The project modules ``module_name`` imports, however many steps away.

        A module's files are found once and kept while no module joins ``sys.modules``
        (every function of a 1,000-eval module is a target of its own): a worker
        parses each project file once, not once per target."""
        known = self.reached.get(module_name)
        if known is None or known[0] != len(sys.modules):
            files = [self.relative(file) for file in self._reach(module_name)]
            known = (len(sys.modules), [file for file in files if file is not None])
            self.reached[module_name] = known
        for relative in known[1]:
            self.write(target, relative)

    def _reach(self, module_name: str) -> list[str]:
        files = {name: getattr(module, "__file__", None) for name, module in sys.modules.items()}
        project = {
            name: file
            for name, file in files.items()
            if isinstance(file, str)
            and file.startswith(self.root)
            and "-packages" + os.sep not in file
        }
        reached: list[str] = []
        todo, done = [module_name], set()
        while todo:
            name = todo.pop()
            if name in done or name not in project:
                continue
            done.add(name)
            reached.append(project[name])
            if len(done) == len(project):
                break  # every project module is reached: its imports can add none
            named = self._names(name, project[name])
            for found in named:  # a package's __init__ runs with each of its modules
                parts = found.split(".")
                todo += [".".join(parts[: i + 1]) for i in range(len(parts))]
        return reached

    def _names(self, name: str, file: str) -> list[str]:
        """The modules a project module's import statements name (parsed once a file)."""
        named = self.parsed.get((name, file))
        if named is not None:
            return named
        import ast

        named = []
        try:
            with open(file, "rb") as handle:
                tree = ast.parse(handle.read())
        except (OSError, SyntaxError, ValueError):
            self.parsed[(name, file)] = named
            return named
        package = name if file.endswith("__init__.py") else name.rpartition(".")[0]
        named.append(name.rpartition(".")[0])
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                named += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join([*base, node.module or ""] if node.level else [node.module or ""])
                stem = stem.strip(".")
                named += [stem, *(f"{stem}.{alias.name}" for alias in node.names)]
        self.parsed[(name, file)] = named
        return named


def _load(target: str, cache: dict[str, Eval]) -> Eval:
    module_name, _, qualname = target.partition(":")
    obj: Any = sys.modules.get(module_name)  # another function of an imported module
    if obj is None or getattr(getattr(obj, "__spec__", None), "_initializing", False):
        obj = importlib.import_module(module_name)
    if _reads is not None:
        _reads.imported(target, module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{target} is not callable")
    entry = (obj, *shape(obj))
    cache[target] = entry
    return entry


def shape(fn: Callable[..., Any]) -> tuple[bool, bool]:
    """Whether fn takes `trial` (by name or **kwargs), and whether it is a coroutine function.

    For a plain function this reads the code object, as inspect.signature and
    inspect.iscoroutinefunction would, without importing inspect.
    """
    if type(fn) is _FUNCTION and not any(hasattr(fn, name) for name in _INTROSPECTED):
        code = fn.__code__
        flags = code.co_flags
        count = code.co_argcount + code.co_kwonlyargcount
        count += bool(flags & _VARARGS) + bool(flags & _VARKEYWORDS)
        names = code.co_varnames[:count]
        return "trial" in names or bool(flags & _VARKEYWORDS), bool(flags & _COROUTINE)
    import inspect

    parameters = inspect.signature(fn).parameters
    takes_trial = "trial" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )
    return takes_trial, inspect.iscoroutinefunction(fn)


def to_payload(value: Any) -> Any:
    """The trial result JSON of what an eval function returned."""
    # An eval can only return a TrialResult if `firewall` has been imported (by the eval).
    trial_result = getattr(sys.modules.get("firewall"), "TrialResult", None)
    if trial_result is not None and isinstance(value, trial_result):
        return value.to_json()
    if isinstance(value, bool):
        return {"score": 1.0 if value else 0.0}
    if isinstance(value, (int, float)):
        return {"score": float(value)}  # NaN and inf travel as such and are refused upstream
    if isinstance(value, dict):
        return value
    if isinstance(value, str):  # an output for the eval's judge to score (trial.py checks)
        return {"output": value}
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return to_payload(value.item())
    raise TypeError(
        f"returned {type(value).__name__}; expected a number, a bool, a dict "
        "or firewall.TrialResult"
    )


def describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"eval called sys.exit({exc.code!r})"
    from pathlib import Path

    frames = _own_frames(exc)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def own_traceback(exc: BaseException) -> str | None:
    """The traceback of the eval's own frames: neither this worker's nor importlib's."""
    if isinstance(exc, SystemExit):
        return None
    import traceback

    lines = [
        "Traceback (most recent call last):\n",
        *traceback.format_list(_own_frames(exc)),
        *traceback.format_exception_only(type(exc), exc),
    ]
    text = "".join(lines)
    return text if len(text) <= _TRACEBACK_CHARS else "…" + text[-_TRACEBACK_CHARS:]


_TRACEBACK_CHARS = 6000


def _own_frames(exc: BaseException) -> list[Any]:
    import traceback

    return [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if frame.filename != __file__ and not frame.filename.startswith("<frozen ")
    ]


def discover(paths: list[Path]) -> dict[str, Any]:
    """Import every module under the paths and list the decorated evals."""
    import inspect
    from pathlib import Path

    from firewall import EVAL_ATTRIBUTE

    root = Path.cwd()
    found: list[dict[str, Any]] = []
    errors: list[str] = []
    for file in _python_files(paths):
        module_name = ".".join(file.relative_to(root).with_suffix("").parts)
        try:
            module = importlib.import_module(module_name)
        except BaseException as exc:  # report, do not crash discovery
            errors.append(f"{file.relative_to(root)}: cannot import: {describe(exc)}")
            continue
        for name, obj in vars(module).items():
            options = getattr(obj, EVAL_ATTRIBUTE, None)
            if options is None or getattr(obj, "__module__", None) != module.__name__:
                continue
            line = _first_line(obj)
            found.append(
                {
                    "options": options,
                    "target": f"{module_name}:{getattr(obj, '__qualname__', name)}",
                    "file": str(file.relative_to(root)),
                    "line": line,
                    "asynchronous": inspect.iscoroutinefunction(obj),
                }
            )
    return {"evals": found, "errors": errors}


def _first_line(obj: Any) -> int | None:
    """The line an eval's source starts on, its decorators included, as
    ``inspect.getsourcelines`` says: read from a function's code object, without the
    tokenizing of its block that made discovering a thousand evals cost a tenth of a
    second; asked of inspect for anything else."""
    import inspect

    try:
        code = getattr(inspect.unwrap(obj), "__code__", None)
        if code is not None:
            return int(code.co_firstlineno)
        return inspect.getsourcelines(obj)[1]
    except (OSError, TypeError, ValueError):
        return None


def _python_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        path = path.resolve()
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(
                p
                for p in sorted(path.rglob("*.py"))
                if not any(part.startswith((".", "__")) for part in p.relative_to(path).parts)
            )
    return files


if __name__ == "__main__":
    main()
