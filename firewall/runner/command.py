"""Command evals: one ``/bin/sh -c`` process per trial, its result read from a file or stdout."""

from __future__ import annotations

import json
import os
import re
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from firewall.files import Refused, os_reason, read_capped
from firewall.runner._supervisor import descendants, kill_all
from firewall.runner.junit import MAX_BYTES, NotJUnit, parse_junit
from firewall.runner.outcome import Outcome, output_tail, signal_name, tail
from firewall.runner.reaper import shell_mark
from firewall.runner.trial import shorten

STDOUT_KEEP_BYTES = 16 * 1024 * 1024
STDERR_KEEP_BYTES = 64 * 1024
RESULT_MAX_BYTES = 64 << 20  # a trial's result JSON larger than this is not one
_TICK_S = 0.1  # how often a quiet command is checked for having exited
_ORPHAN_GRACE_S = 0.2  # how long a background child may hold the pipes after the command exits
_PLACEHOLDER = re.compile(r"\{(seed|trial|eval_id|result)\}")


_DEVNULL: list[int] = []
_DEVNULL_LOCK = threading.Lock()


def _devnull() -> int:
    """The stdin of every command: /dev/null, as subprocess.DEVNULL opens it, but opened once."""
    with _DEVNULL_LOCK:
        if not _DEVNULL:
            _DEVNULL.append(os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC))
        return _DEVNULL[0]


def render(command: str, values: dict[str, str]) -> str:
    """Put shell-quoted values for {seed}, {trial}, {eval_id} and {result}; leave other braces."""
    return _PLACEHOLDER.sub(lambda match: shlex.quote(values[match.group(1)]), command)


def run_command(
    command: str,
    *,
    eval_id: str,
    seed: int,
    trial: int,
    k: int,
    timeout: float,
    exit_code_mode: bool,
    cwd: Path,
    result_path: Path,
    scratch: Path,
    register: Callable[[int | None], None] = lambda pid: None,
    keep_output: bool = False,
    junit: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Outcome:
    """Run one trial of a command eval (``keep_output``: what it printed, passed or not).

    The shell itself exports the ``FIREWALL_*`` variables, on the command's first
    line. The first of them, ``FIREWALL_SCRATCH``, is the run's mark (``reaper.py``):
    at the head of the shell's script, and in the environment of whatever it starts.

    The process inherits the rest of the environment unless ``env`` is given: handing
    Popen an ``env`` mapping makes it encode every variable again for every trial,
    about 7 % of the cost of spawning a short command, so the runner hands one only
    when the trial's environment must differ from the firewall's (its GitHub token
    left out). The shell cannot leave the token out itself: ``unset`` takes no
    ``INPUT_GITHUB-TOKEN``, whose name is no shell variable's.
    """
    result = str(result_path)
    values = {"seed": str(seed), "trial": str(trial), "eval_id": eval_id, "result": result}
    script = (
        f"{shell_mark(str(scratch))}FIREWALL_SEED={seed} FIREWALL_TRIAL={trial} FIREWALL_K={k} "
        f"FIREWALL_EVAL_ID={shlex.quote(eval_id)} FIREWALL_RESULT={shlex.quote(result)}; "
        + render(command, values)
    )
    proc = subprocess.Popen(
        ["/bin/sh", "-c", script],
        cwd=cwd,
        stdin=_devnull(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
    )
    register(proc.pid)
    try:
        stdout, stderr, timed_out = _collect(proc, time.monotonic() + timeout)
    finally:
        register(None)
    if junit is not None and not timed_out and proc.returncode >= 0:
        outcome = _suite(junit, proc.returncode, stderr, cwd)
    else:
        outcome = _outcome(proc, stdout, stderr, timed_out, timeout, exit_code_mode, result_path)
    if keep_output or outcome.error is not None or (exit_code_mode and outcome.payload == _FAILED):
        outcome.output = output_tail(stdout, stderr)  # the evidence: what the command said
    return outcome


_FAILED = {"score": 0.0}


def _outcome(
    proc: subprocess.Popen[bytes],
    stdout: bytes,
    stderr: bytes,
    timed_out: bool,
    timeout: float,
    exit_code_mode: bool,
    result_path: Path,
) -> Outcome:
    if timed_out:
        return Outcome(error=f"timed out after {timeout:g} s; the command was killed{tail(stderr)}")
    status = proc.returncode
    if status < 0:
        return Outcome(error=f"killed by {signal_name(-status)}{tail(stderr)}")
    if exit_code_mode:
        if status in (0, 1):
            return Outcome(payload={"score": 1.0} if status == 0 else dict(_FAILED))
        return Outcome(
            error=f"exit status {status} (a plain test passes with 0 and fails with 1)"
            f"{tail(stderr)}"
        )
    return _result(result_path, stdout, status, stderr)


def _suite(path: Path, status: int, stderr: bytes, cwd: Path) -> Outcome:
    """One run of a JUnit suite: its cases, and as the trial's score the share that passed.

    A test runner exits non-zero when a test fails, so the exit status counts only when
    no report was written (a crash, a usage error) and says so then. The working
    directory is where pytest's cases' files are found again (``parse_junit``).
    """
    try:
        data = read_capped(path, MAX_BYTES)
    except FileNotFoundError:
        return Outcome(
            error=f"no JUnit XML at {path} (exit status {status}): the suite wrote no report"
            f"{tail(stderr)}"
        )
    except Refused as exc:
        return Outcome(error=f"the JUnit XML {path} {exc} (exit status {status}){tail(stderr)}")
    except OSError as exc:
        return Outcome(
            error=f"cannot read the JUnit XML {path} ({os_reason(exc)}; exit status {status})"
            f"{tail(stderr)}"
        )
    try:
        cases = parse_junit(data, cwd)
    except NotJUnit as exc:
        return Outcome(error=f"{path}: {exc} (exit status {status}){tail(stderr)}")
    ran = {
        case.id: 1.0 if case.outcome == "passed" else 0.0
        for case in cases
        if case.outcome != "skipped"
    }
    if not ran:
        return Outcome(error=f"{path}: no test case ran (exit status {status})", cases=cases)
    return Outcome(payload={"score": sum(ran.values()) / len(ran), "items": ran}, cases=cases)


def _result(result_path: Path, stdout: bytes, status: int, stderr: bytes) -> Outcome:
    """The trial's result: the FIREWALL_RESULT file's, else the last line of stdout.

    The file is read without waiting and within ``RESULT_MAX_BYTES`` (``files.read_capped``):
    a command that leaves a FIFO there, or a link to ``/dev/zero``, costs its trial, not
    the run's time or memory.
    """
    try:
        written = read_capped(result_path, RESULT_MAX_BYTES)
    except FileNotFoundError:  # most commands write none
        written = b""
    except Refused as exc:
        return Outcome(error=f"FIREWALL_RESULT {exc}; exit status {status}{tail(stderr)}")
    except OSError as exc:
        return Outcome(
            error=f"cannot read the FIREWALL_RESULT file ({os_reason(exc)}); "
            f"exit status {status}{tail(stderr)}"
        )
    if written.strip():
        try:
            return Outcome(payload=json.loads(written))
        except (ValueError, RecursionError) as exc:
            return Outcome(
                error=f"the FIREWALL_RESULT file is not valid JSON ({exc}); "
                f"exit status {status}{tail(stderr)}"
            )
    last = _last_line(stdout)
    try:
        value = json.loads(last) if last else None
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        return Outcome(payload=value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Outcome(payload={"score": value})  # a bare number is the score (contract §3)
    shown = shorten(last.decode("utf-8", "replace"), 80)
    seen = (
        "no output"
        if not last
        else f"its last stdout line ({shown!r}) is neither a JSON object nor a number"
    )
    return Outcome(
        error=f"no result: the command wrote no FIREWALL_RESULT file and {seen} "
        f"(exit status {status}){tail(stderr)}"
    )


def _last_line(stdout: bytes) -> bytes:
    for line in reversed(stdout.splitlines()):
        if line.strip():
            return line.strip()
    return b""


def _collect(proc: subprocess.Popen[bytes], deadline: float) -> tuple[bytes, bytes, bool]:
    """Drain stdout and stderr, keeping bounded tails, until the command is done.

    Done means the process exited and both pipes closed, or the process exited
    and a background child it left behind still holds a pipe (after a short
    grace), or the deadline passed. Then the whole process group is killed,
    whatever is left in it, before the shell is reaped: until then its pid, and
    so the group's id, cannot pass to another process. The exit is watched
    through a pidfd where the kernel has them, so nothing polls on a timer.
    """
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    kept = {out_fd: bytearray(), err_fd: bytearray()}
    limits = {out_fd: STDOUT_KEEP_BYTES, err_fd: STDERR_KEEP_BYTES}
    timed_out = False
    exited_at: float | None = None
    pidfd = _pidfd(proc.pid)
    open_pipes = 2
    # poll(2) rather than the default epoll: no epoll descriptor to create, fill and close
    # for each trial, for the two pipes of one short-lived process.
    with selectors.PollSelector() as selector:
        selector.register(out_fd, selectors.EVENT_READ)
        selector.register(err_fd, selectors.EVENT_READ)
        if pidfd is not None:
            selector.register(pidfd, selectors.EVENT_READ)
        try:
            while open_pipes or exited_at is None:
                now = time.monotonic()
                if now >= deadline:
                    timed_out = True
                    break
                if exited_at is not None and now - exited_at >= _ORPHAN_GRACE_S:
                    break  # only a background child holds the pipes now
                wait = deadline - now
                if exited_at is not None:
                    wait = min(wait, exited_at + _ORPHAN_GRACE_S - now)
                elif pidfd is None:
                    wait = min(wait, _TICK_S)  # no pidfd: look at the process now and then
                ready = selector.select(wait)
                if pidfd is None and exited_at is None and _exited(proc):
                    exited_at = time.monotonic()
                for key, _ in ready:
                    if key.fd == pidfd:
                        selector.unregister(pidfd)
                        exited_at = time.monotonic()
                        continue
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fd)
                        open_pipes -= 1
                        continue
                    buffer = kept[key.fd]
                    buffer += chunk
                    if len(buffer) > limits[key.fd]:
                        del buffer[: len(buffer) - limits[key.fd]]
        finally:
            if pidfd is not None:
                os.close(pidfd)
    # A shell killed for its timeout is still there to say what it started.
    stray = descendants(proc.pid) if timed_out else []
    kill_group(proc)
    kill_all(stray)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return bytes(kept[out_fd]), bytes(kept[err_fd]), timed_out


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the shell has exited; where waitid can tell, without reaping it."""
    waitid = getattr(os, "waitid", None)
    if waitid is None:  # macOS: only reaping tells; the group's id is then held by its members
        return proc.poll() is not None
    try:
        return waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux 5.3+), else None."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
