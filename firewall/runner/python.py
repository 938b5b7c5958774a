"""Python evals: a long-lived worker process per runner slot, killed on timeout."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from firewall.runner.outcome import Outcome, signal_name, tail

MAX_REPLY_BYTES = 16 * 1024 * 1024
_BOOT = (
    "import sys; sys.path.append({parent!r}); "
    "from firewall._worker import main; main()"
)


class PythonWorker:
    """One worker process that imports eval modules once and runs trials one at a time."""

    def __init__(self, cwd: Path) -> None:
        self._cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._buffer = bytearray()

    def call(
        self,
        target: str,
        seed: int,
        trial: int,
        timeout: float,
        register: Callable[[int | None], None] = lambda pid: None,
    ) -> Outcome:
        """Run one trial; a hang or a crash costs this trial and this worker, nothing more."""
        proc = self._proc if self._proc and self._proc.poll() is None else self._start()
        register(proc.pid)
        try:
            return self._exchange(proc, target, seed, trial, timeout)
        finally:
            register(None)

    def _exchange(
        self, proc: subprocess.Popen[bytes], target: str, seed: int, trial: int, timeout: float
    ) -> Outcome:
        assert proc.stdin is not None and proc.stdout is not None
        self._log.truncate(0)
        request = json.dumps({"target": target, "seed": seed, "trial": trial}) + "\n"
        try:
            proc.stdin.write(request.encode())
            proc.stdin.flush()
        except BrokenPipeError:
            return self._died(proc)
        line = self._read_line(proc.stdout.fileno(), time.monotonic() + timeout)
        if line is None:
            self.kill()
            return Outcome(error=f"timed out after {timeout:g} s; the worker was killed")
        if line == b"":
            return self._died(proc)
        try:
            reply = json.loads(line)
        except ValueError:
            self.kill()
            return Outcome(error="the worker's reply was not JSON (was the protocol stream written to?)")
        if "error" in reply:
            return Outcome(error=str(reply["error"]))
        return Outcome(payload=reply["result"])

    def kill(self) -> None:
        proc, self._proc = self._proc, None
        self._buffer.clear()
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
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
        parent = str(Path(__file__).resolve().parents[2])
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT.format(parent=parent)],
            cwd=self._cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,
        )
        return self._proc

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
        self.kill()
        how = f"was killed by {signal_name(-status)}" if status < 0 else f"exited with status {status}"
        return Outcome(error=f"the worker process {how} during the trial{stderr}")
