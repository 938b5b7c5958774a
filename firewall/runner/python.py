"""Python evals: a long-lived worker process per runner slot, killed on timeout.

A worker says ``{"ready": true}`` on its protocol stream once it has booted. Booting
is pure CPU (an interpreter and a few imports), so at most one boot per CPU holds a
"boot permit" at a time: with more slots than CPUs, the first workers are ready and
serving trials while the others are still booting, instead of all of them sharing
the CPUs and becoming ready together at the end. The permit is a throttle, never a
gate: a boot gives it up after ``BOOT_HOLD_S``, and a boot that waits longer than
that for one goes ahead without it.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from firewall.runner._supervisor import descendants, kill_all
from firewall.runner.outcome import OUTPUT_TAIL_CHARS, Outcome, output_tail, signal_name, tail

if TYPE_CHECKING:
    from firewall.spec import EvalSpec

MAX_REPLY_BYTES = 16 * 1024 * 1024
READY = b'{"ready": true}'
GARBLED = "the worker's reply was not JSON (was the protocol stream written to?)"
BOOT_HOLD_S = 0.5
DEFAULT_IMPORT_TIMEOUT = 120.0


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


WORKER_MB = 15
"""A synchronous eval's worker, resident: benchmarks/run.py's sync16 row (239 MB summed
over 18 processes) and the 64-slot case (985 MB and more in 66)."""


def sync_fanout(specs: Sequence[EvalSpec], concurrency: int) -> str | None:
    """What a concurrency well above the CPUs costs synchronous Python evals, or None.

    Each slot that runs a synchronous eval keeps a worker process of its own (only a
    process can be killed at a trial's timeout), so ``concurrency = 64`` boots 64
    interpreters; an ``async def`` eval's trials share one worker per CPU instead."""
    sync = [
        spec.id
        for spec in specs
        if spec.kind in ("python", "inspect") and not (spec.asynchronous and not spec.isolate)
    ]
    if not sync or concurrency <= 2 * cpus():
        return None
    named = ", ".join(sync[:3]) + (f" and {len(sync) - 3} more" if len(sync) > 3 else "")
    return (
        f"concurrency {concurrency} with synchronous Python evals ({named}) runs one worker "
        f"process per slot: up to {concurrency} interpreters, about "
        f"{concurrency * WORKER_MB:,} MB, on {cpus()} CPUs; an eval that waits on a model "
        "can be `async def`, whose trials share one worker per CPU (64 in flight in about "
        "100 MB)"
    )


_BOOT_PERMITS = threading.BoundedSemaphore(cpus())
# The worker module is loaded by its path, not imported, so that booting a worker does not
# import the `firewall` package (and its typing, dataclasses, inspect); `firewall` stays
# importable by eval code, from where it was found before or from this checkout.
_WORKER = Path(__file__).resolve().with_name("_worker.py")
_BOOT = (
    f"import sys; sys.path.append({str(_WORKER.parents[2])!r}); "
    "from importlib.util import spec_from_file_location as _s, module_from_spec as _m; "
    f"_w = _s('firewall.runner._worker', {str(_WORKER)!r}); _x = _m(_w); "
    "sys.modules[_w.name] = _x; _w.loader.exec_module(_x); _x.main(sys.argv[1:])"
)


def worker_command(*args: str) -> list[str]:
    """The command line that boots a worker process (``--own-log`` to serve trials)."""
    return [sys.executable, "-c", _BOOT, *args]


class Call(NamedTuple):
    """One trial of a batch sent to a worker at once (``PythonWorker.pipeline``)."""

    target: str
    seed: int
    trial: int
    timeout: float
    import_timeout: float = DEFAULT_IMPORT_TIMEOUT


def _requests(calls: Sequence[Call]) -> bytes:
    """The request lines of a batch, as ``json.dumps`` of each would write them, at a
    fraction of its cost (the slot thread writes one per trial)."""
    return "".join(
        f'{{"target": {json.dumps(c.target)}, "seed": {c.seed:d}, "trial": {c.trial:d}}}\n'
        for c in calls
    ).encode()


class PythonWorker:
    """One worker process that imports eval modules once and runs trials one at a time.

    ``env`` is the worker's environment (the caller's by default); the runner marks
    it with the run's scratch directory, so that the worker and whatever its trials
    start can be found when the run ends (``reaper.py``).
    """

    def __init__(self, cwd: Path, env: Mapping[str, str] | None = None) -> None:
        self._cwd = cwd
        self._env = env
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._buffer = bytearray()
        self._permit = False  # this worker's boot holds one of the _BOOT_PERMITS
        self._loaded: set[str] = set()  # eval modules this process has imported

    def call(
        self,
        target: str,
        seed: int,
        trial: int,
        timeout: float,
        register: Callable[[int | None], None] = lambda pid: None,
        import_timeout: float = DEFAULT_IMPORT_TIMEOUT,
        rate: tuple[str, int, float] | None = None,
        output: Any = None,
    ) -> Outcome:
        """Run one trial; a hang or a crash costs this trial and this worker, nothing more.

        Importing the eval's module, the first time this worker meets it, is not the
        trial's: it has ``import_timeout`` of its own, and its time is reported apart
        (``Outcome.import_s``), so that a slow import (torch, an SDK) neither times the
        first trials out nor reads as their latency. ``output``: a judge's call, which
        is handed the output it scores (``firewall.runner.judged``).
        """
        if self._proc is not None and self._proc.poll() is None:
            proc, booting = self._proc, False  # the worker empties its log per request
        else:
            proc, booting = self._start(), True
        deadline = time.monotonic() + timeout  # a worker's boot counts against its first trial
        register(proc.pid)
        try:
            failed, booted = None, None
            if booting:
                began = time.monotonic()
                failed = self._boot(proc, deadline, timeout)
                booted = time.monotonic() - began
            if failed is not None:
                outcome = failed
            else:
                outcome = self._exchange(
                    proc, target, seed, trial, timeout, deadline, import_timeout, rate, output
                )
                outcome.boot_s = booted
        finally:
            register(None)
        outcome.worker_lost = self._proc is not proc  # killed, or died: the next trial reboots
        return outcome

    def pipeline(
        self, calls: Sequence[Call], register: Callable[[int | None], None] = lambda pid: None
    ) -> list[Outcome]:
        """Run several trials sent in one write, answered one by one: the outcomes of the
        first of them, up to and including the first that loses the worker (its timeout,
        its crash), after which the rest were never started and are the caller's to send
        again.

        Each trial keeps its own limits: its ``timeout`` (and ``import_timeout`` the first
        time this worker meets its target) runs from the previous trial's reply, when the
        worker starts it, and the worker kills what it started before replying, as for
        ``call``. No rate limits here: a trial that waits for a token would hold the ones
        queued behind it (``Runner`` sends those one at a time).
        """
        first = calls[0]
        if self._proc is not None and self._proc.poll() is None:
            proc, booting = self._proc, False
        else:
            proc, booting = self._start(), True
        deadline = time.monotonic() + first.timeout  # a boot counts against the first trial
        register(proc.pid)
        outcomes: list[Outcome] = []
        try:
            booted = None
            if booting:
                began = time.monotonic()
                failed = self._boot(proc, deadline, first.timeout)
                booted = time.monotonic() - began
                if failed is not None:
                    failed.worker_lost = True
                    return [failed]
            assert proc.stdin is not None
            try:
                proc.stdin.write(_requests(calls))
                proc.stdin.flush()
            except BrokenPipeError:
                outcomes.append(self._died(proc))
            else:
                for call in calls:
                    began = time.perf_counter()
                    if outcomes:
                        deadline = time.monotonic() + call.timeout
                    outcome = self._answer(
                        proc, call.target, call.timeout, deadline, call.import_timeout
                    )
                    if outcome.call_s is None:  # the worker did not say: from when it began
                        spent = time.perf_counter() - began - (outcome.import_s or 0.0)
                        outcome.call_s = max(0.0, spent)
                    outcomes.append(outcome)
                    if self._proc is not proc:
                        break
            outcomes[0].boot_s = booted
        finally:
            register(None)
        outcomes[-1].worker_lost = self._proc is not proc
        return outcomes

    def _boot(
        self, proc: subprocess.Popen[bytes], deadline: float, timeout: float
    ) -> Outcome | None:
        """Wait for a fresh worker's ready line; an Outcome when it died or hung instead."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        try:
            line = self._read_line(fd, min(deadline, time.monotonic() + BOOT_HOLD_S))
        finally:
            self._release_permit()
        if line is None and time.monotonic() < deadline:
            line = self._read_line(fd, deadline)
        if line is None:
            self.kill()
            return Outcome(error=f"timed out after {timeout:g} s; the worker was killed")
        if line == b"":
            return self._died(proc)
        if line != READY:
            self.kill()
            return Outcome(error=GARBLED)
        return None

    def _exchange(
        self,
        proc: subprocess.Popen[bytes],
        target: str,
        seed: int,
        trial: int,
        timeout: float,
        deadline: float,
        import_timeout: float,
        rate: tuple[str, int, float] | None = None,
        output: Any = None,
    ) -> Outcome:
        assert proc.stdin is not None
        fields: dict[str, Any] = {"target": target, "seed": seed, "trial": trial}
        if rate is not None:
            fields["rate"] = rate  # the worker takes the token just before the call
        if output is not None:
            fields["output"] = output  # a judge's call: the output it scores
        request = json.dumps(fields) + "\n"
        try:
            proc.stdin.write(request.encode())
            proc.stdin.flush()
        except BrokenPipeError:
            return self._died(proc)
        return self._answer(proc, target, timeout, deadline, import_timeout)

    def _answer(
        self,
        proc: subprocess.Popen[bytes],
        target: str,
        timeout: float,
        deadline: float,
        import_timeout: float,
    ) -> Outcome:
        """Read the replies of the trial the worker is on, until its last (or its loss)."""
        assert proc.stdout is not None
        module = target.partition(":")[0]
        importing = module not in self._loaded  # the worker says "imported" once per module
        if importing:  # the import's own limit, then the trial's from when it is done
            deadline = time.monotonic() + import_timeout
        imported: float | None = None
        while True:
            line = self._read_line(proc.stdout.fileno(), deadline)
            if line is None:
                self.kill()
                if importing and imported is None:
                    return Outcome(
                        error=f"importing {module} took longer than import_timeout "
                        f"{import_timeout:g} s; the worker was killed",
                        output=self.printed(),
                    )
                return Outcome(
                    error=f"timed out after {timeout:g} s; the worker was killed",
                    output=self.printed(),
                    import_s=imported,
                    call_s=timeout,  # the call ran to its limit (the boot is the worker's)
                )
            if line == b"":
                died = self._died(proc)
                died.import_s = imported
                return died
            try:
                reply = json.loads(line.decode())
            except ValueError:  # UnicodeDecodeError too
                self.kill()
                return Outcome(error=GARBLED)
            if "imported" in reply and imported is None:
                imported = float(reply["imported"])
                self._loaded.add(module)
                deadline = time.monotonic() + timeout
                continue
            if "waited" in reply:  # for its rate limit's token: the timeout starts now
                deadline = time.monotonic() + timeout
                continue
            break
        took = reply.get("took")
        call_s = float(took) if isinstance(took, (int, float)) else None
        if "error" in reply:
            said = reply.get("output")  # the worker's own log tail, from this trial alone
            return Outcome(
                error=str(reply["error"]),
                traceback=reply.get("traceback"),
                output=self.printed() if said is None else output_tail(str(said).encode()) or None,
                import_s=imported,
                call_s=call_s,
            )
        return Outcome(payload=reply["result"], import_s=imported, call_s=call_s)

    def printed(self) -> str | None:
        """The tail of what the current trial printed (the worker's log holds it alone)."""
        if self._log is None:
            return None
        try:
            self._log.flush()
            size = os.fstat(self._log.fileno()).st_size
            data = os.pread(
                self._log.fileno(), OUTPUT_TAIL_CHARS * 4, max(0, size - OUTPUT_TAIL_CHARS * 4)
            )
        except OSError:
            return None
        return output_tail(data) or None

    def kill(self) -> None:
        self._release_permit()
        proc, self._proc = self._proc, None
        self._buffer.clear()
        self._loaded.clear()
        if proc is None:
            return
        stray = descendants(proc.pid)  # in sessions of their own: the group kill misses them
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        kill_all(stray)
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()

    def close(self) -> None:
        self.kill()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _start(self) -> subprocess.Popen[bytes]:
        self.kill()
        if self._log is None:
            self._log = tempfile.TemporaryFile(mode="a+b")  # noqa: SIM115 - lives as long as the worker
            # "a" on the descriptor tempfile opens does not set O_APPEND; without it the worker's
            # writes after a truncation land at the old offset, behind a run of NUL bytes.
            fd = self._log.fileno()
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
        else:
            self._log.truncate(0)
        self._permit = _BOOT_PERMITS.acquire(timeout=BOOT_HOLD_S)
        try:
            self._proc = subprocess.Popen(
                worker_command("--own-log"),
                cwd=self._cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                env=self._env,
                start_new_session=True,
            )
        except BaseException:
            self._release_permit()
            raise
        return self._proc

    def _release_permit(self) -> None:
        if self._permit:
            self._permit = False
            _BOOT_PERMITS.release()

    def _read_line(self, fd: int, deadline: float) -> bytes | None:
        """The next reply line; b"" at end of stream, None past the deadline."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) > MAX_REPLY_BYTES:
                self.kill()
                return b'{"error": "result larger than 16 MiB"}'
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            self._buffer += chunk

    def _died(self, proc: subprocess.Popen[bytes]) -> Outcome:
        status = proc.wait()
        self._log.seek(0)
        stderr = tail(self._log.read())
        printed = self.printed()
        self.kill()
        how = (
            f"was killed by {signal_name(-status)}"
            if status < 0
            else f"exited with status {status}"
        )
        return Outcome(error=f"the worker process {how} during the trial{stderr}", output=printed)
