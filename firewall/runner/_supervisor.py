"""The supervisor of a run (``reaper.py`` says what it guarantees), and the walks of ``/proc``.

It runs as ``python -I -S _supervisor.py SCRATCH ENTRY EXPORT``: the scratch
directory to remove, and the run's two marks: the environment entry
``FIREWALL_SCRATCH=...``, and the start of a command's shell's script.
It boots beside a run's first workers, and a short run waits for it, so it
imports only what a bare interpreter has at hand, and shutil: no ``firewall``,
no shlex, no subprocess (they took its start-up from 13 to 35 ms). The runner
imports ``descendants`` and ``kill_all`` from here too.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time

SWEEP_PATIENCE_S = 10.0  # a process stuck in the kernel (a dead NFS mount) is given up on
_SWEEP_PAUSE_S = 0.01  # between passes: the killed are given the time to die


def supervise(scratch: str, marks: tuple[bytes, bytes]) -> None:
    """Once stdin closes (the firewall is done, or dead), sweep and remove the scratch directory."""
    # Its life is bounded by the firewall's, and its work is to finish what a terminated
    # firewall left; a terminal's or a job's signals are the firewall's to handle.
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    while os.read(0, 1024):
        pass
    sweep(marks)
    shutil.rmtree(scratch, ignore_errors=True)


def sweep(marks: tuple[bytes, bytes]) -> None:
    """SIGKILL every process that carries a mark, and every descendant of one, till none lives.

    A pass that kills something is followed by another, for what forked meanwhile;
    the sweep ends with a pass that finds nothing alive (a zombie is not alive).
    """
    deadline = time.monotonic() + SWEEP_PATIENCE_S
    refused: set[int] = set()  # a setuid program a trial ran: not ours to kill
    while True:
        found = members(marks) - refused
        if not found or time.monotonic() > deadline:
            return
        refused.update(kill_all(sorted(found)))
        time.sleep(_SWEEP_PAUSE_S)


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` now, from each thread's list of children; [] without /proc.

    For a process about to be killed: what has left its group dies with it (by pid:
    once their parent is dead, nothing else finds them before the sweep).
    """
    found: list[int] = []
    parents = [pid]
    while parents:
        parent = parents.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                with open(f"/proc/{parent}/task/{thread}/children", "rb") as file:
                    below = [int(child) for child in file.read().split()]
            except OSError:
                continue
            found += below
            parents += below
    return found


def kill_all(pids: list[int]) -> list[int]:
    """SIGKILL each of ``pids`` that is still there; those that may not be signalled."""
    refused = []
    for pid in pids:
        # A pid read a moment ago could only name another process after the pid
        # space wrapped around in between.
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        except PermissionError:
            refused.append(pid)
    return refused


def members(marks: tuple[bytes, bytes]) -> set[int]:
    """The live processes that carry a mark, and their descendants; never this process.

    ``marks``: an environment entry, and how a marked ``sh -c`` script starts. Empty
    where there is no ``/proc``.
    """
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    me = os.getpid()
    children: dict[int, list[int]] = {}
    marked: list[int] = []
    entry, script = marks
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                state, parent = file.read().rpartition(b")")[2].split(maxsplit=2)[:2]
            if state in (b"Z", b"X"):
                continue  # dead already, waiting to be reaped
            children.setdefault(int(parent), []).append(int(name))
            with open(f"/proc/{name}/environ", "rb") as file:
                environ = file.read()
            with open(f"/proc/{name}/cmdline", "rb") as file:
                cmdline = file.read()
        except (OSError, ValueError):  # gone, or another user's
            continue
        arguments = cmdline.split(b"\0", 3)
        shell = len(arguments) > 2 and arguments[1] == b"-c" and arguments[2].startswith(script)
        if shell or entry in environ.split(b"\0"):
            marked.append(int(name))
    found: set[int] = set()
    while marked:
        pid = marked.pop()
        if pid not in found:
            found.add(pid)
            marked.extend(children.get(pid, ()))
    return found


if __name__ == "__main__":
    supervise(sys.argv[1], (sys.argv[2].encode(), sys.argv[3].encode()))
