"""The end of a run's processes: its scratch directory, and a supervisor that outlives the firewall.

What is guaranteed, and by whom:

- When a trial ends, its process group is killed. A command eval's shell leads
  a group of its own; the group is killed (``command.py``) before the shell is
  reaped, so the group's id cannot have passed to another process. A Python
  trial runs in a long-lived worker that is a child subreaper (Linux): every
  process the trial started stays a descendant of the worker, whatever session
  or group it moved to, and the worker kills them all before it replies
  (``_worker.py``). Processes started while an eval module is imported are the
  module's, not a trial's: they live as long as the worker. A shell or a worker
  killed for a timeout takes its descendants with it, in any session.
- When a run ends, however it ends, every process of the run is killed and the
  scratch directory is removed. Every trial's processes carry the run's mark,
  ``FIREWALL_SCRATCH=<scratch directory>``: in their environment (the workers
  and whatever a trial starts) or, for a command's shell, which exports it, at
  the head of its script (``sh -c 'export FIREWALL_SCRATCH=...'``). The
  supervisor, a small process started with the run in a session of its own,
  waits for the firewall to close a pipe, which the kernel does for it when it
  is killed, even by SIGKILL; it then kills every marked process and every
  descendant of one (the sweep), and removes the scratch directory. The
  firewall waits for it on a normal exit, so that when a run returns none of
  its processes is alive.

Why a supervisor and a mark: a parent-death signal must be set in each child
(an extra process, or a ``preexec_fn``, per command trial: slower, and not safe
in the runner's threads), and it does not reach a grandchild. A process that
left its trial's group (``setsid``, ``setpgid``) cannot be reached by killing
the group, and once orphaned it is no longer anyone's descendant; only a
cgroup, which an unprivileged CI job usually cannot make, would hold it. The
mark it inherited still names it. The firewall is not made a subreaper itself:
a command's orphans would come back to it from every slot at once, told apart
only by reading their marks, and it would change the process for whoever embeds
the runner; a worker serves one trial at a time, so what it adopts is that
trial's.

What still escapes: a command's process that left its group after its shell
exited lives until the run ends, not only until its trial does (once orphaned,
only its mark names it, and reading every process's mark is a sweep, too slow
for every trial); so does one forked while its trial was being killed. A
process that was orphaned and also dropped the mark from its environment
(``env -i``, a daemon that clears it) is not found at all; a setuid program
(``sudo``) may not be signalled by the firewall. The sweep and the
worker's adoption need Linux (``/proc``, ``prctl``); elsewhere only the group
kills apply. A scratch directory stays behind only if the supervisor is killed
as well (by a signal to its session, or with the whole process tree).

The supervisor's program, the sweep and the walks of ``/proc`` are in
``_supervisor.py``, which imports only what a bare interpreter has at hand.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType

MARKER = "FIREWALL_SCRATCH"
_PROGRAM = str(Path(__file__).resolve().with_name("_supervisor.py"))


def shell_mark(scratch: str) -> str:
    """How the script of a command's shell starts: ``export FIREWALL_SCRATCH=... ``."""
    return f"export {MARKER}={shlex.quote(scratch)} "


class Reaper:
    """A run's scratch directory, and the supervisor that ends the run's processes and removes it.

    ``environment`` is the environment for the run's workers: ``base`` (the caller's by
    default), marked. Closing (or leaving the ``with`` block) sweeps and waits for the sweep.
    """

    def __init__(self, base: Mapping[str, str] | None = None) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="firewall-"))
        scratch = str(self.scratch)
        self.environment = {**(os.environ if base is None else base), MARKER: scratch}
        read, self._pipe = os.pipe()  # both ends close-on-exec: no trial inherits the write end
        try:
            self._supervisor = subprocess.Popen(
                [
                    sys.executable,
                    "-I",  # no PYTHON* variables, no user site, not the script's directory
                    "-S",  # no site-packages: the program needs the standard library only
                    _PROGRAM,
                    scratch,
                    f"{MARKER}={scratch}",
                    shell_mark(scratch),
                ],
                stdin=read,
                stdout=subprocess.DEVNULL,
                # Not in the firewall's group: a signal to that group (a Ctrl-C, a CI job
                # killing the group) leaves the supervisor to do its work.
                start_new_session=True,
            )
        except BaseException:
            os.close(self._pipe)
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        finally:
            os.close(read)

    def __enter__(self) -> Reaper:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Kill what is left of the run's processes and remove the scratch directory."""
        if self._pipe < 0:
            return
        os.close(self._pipe)  # first: a second Ctrl-C during the wait leaves the sweep running
        self._pipe = -1
        self._supervisor.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)  # where the supervisor could not
