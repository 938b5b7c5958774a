"""No process of an eval outlives it: real processes, found (or not) in /proc.

Each test starts processes that carry a marker of its own on their command line
(a `sleep` for a unique, absurd number of seconds) and then looks for live ones:
right after a trial ends (from the runner's progress callback), after a run
returns, and, with a generous deadline, after the firewall itself is SIGKILLed.
A zombie is not alive: it has stopped running and only waits for its parent.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from builders import command_spec, python_spec, write_module
from processes import alive

from firewall.runner import Interrupted, Runner, Task, replay
from firewall.runner.python import worker_command
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
SEED = 1234567
PATIENCE_S = 30.0


def marked(variable: str, value: str) -> list[int]:
    """The pids of the live processes whose environment has ``variable=value``."""
    entry = f"{variable}={value}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{name}/stat").read_bytes().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if entry in environ and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def eventually(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` holds within the patience."""
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def gone(marker: str) -> bool:
    """Whether every process with ``marker`` is dead within the patience."""
    return eventually(lambda: not alive(marker))


@pytest.fixture
def scratch_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system temp directory of this process, where a run makes its scratch directory."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


@pytest.fixture
def leftovers() -> Iterator[list[str]]:
    """Markers whose processes the test kills at the end if the runner did not (by pid)."""
    markers: list[str] = []
    yield markers
    for marker in markers:
        for pid in alive(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def tasks(spec: EvalSpec, trials: int) -> list[Task]:
    return [Task(spec, index, SEED + index, trials) for index in range(trials)]


class AfterEachTrial:
    """A progress callback that lists, as each trial ends, the processes it left running.

    The next trial is running meanwhile: each trial marks its processes with its
    index after the marker.
    """

    def __init__(self, marker: str, *, patience: bool) -> None:
        self.marker = marker
        self.patience = patience
        self.survivors: list[list[int]] = []

    def __call__(self, task: Task, record: TrialRecord) -> None:
        assert record.error is None, record.error
        mine = f"{self.marker}{task.index}"
        if self.patience:  # a SIGKILL is sent as the trial ends; its delivery takes a moment
            gone(mine)
        self.survivors.append(alive(mine))


# --- command evals ----------------------------------------------------------------


def test_a_background_child_of_a_command_dies_with_its_trial(
    project: Path, scratch_root: Path, leftovers: list[str]
) -> None:
    """The issue's case: the command exits at once, its pipes closed, its child asleep."""
    marker = "3011.01"
    leftovers.append(marker)
    spec = command_spec(f"sleep {marker}{{trial}} >/dev/null 2>&1 & echo 1")
    after = AfterEachTrial(marker, patience=True)

    Runner(concurrency=1, cwd=project, progress=after).run(tasks(spec, 3))

    assert after.survivors == [[], [], []]


def test_a_command_child_in_a_new_session_dies_with_the_run(
    project: Path, scratch_root: Path, leftovers: list[str]
) -> None:
    marker = "3011.02"
    leftovers.append(marker)
    spec = command_spec(f"setsid sleep {marker} >/dev/null 2>&1 & echo 1")

    records = Runner(concurrency=2, cwd=project).run(tasks(spec, 3))

    assert [record.score for record in records] == [1.0, 1.0, 1.0]
    assert alive(marker) == []


def test_a_command_killed_for_its_timeout_takes_every_process_it_started(
    project: Path, scratch_root: Path, leftovers: list[str]
) -> None:
    """The shell is still there at the timeout: what it started, in any session, dies too."""
    marker = "3011.03"
    leftovers.append(marker)
    spec = command_spec(
        f"sleep {marker} & setsid sleep {marker} & sh -c 'sleep {marker}'", timeout=1
    )
    ended: list[bool] = []

    [record] = Runner(
        concurrency=1, cwd=project, progress=lambda task, record: ended.append(gone(marker))
    ).run(tasks(spec, 1))

    assert record.error is not None and "timed out" in record.error
    assert ended == [True]


# --- Python evals -----------------------------------------------------------------


def test_every_process_a_python_trial_starts_dies_with_the_trial(
    project: Path, scratch_root: Path, leftovers: list[str]
) -> None:
    """In the worker's group, in a session of its own, and orphaned by a double fork."""
    marker = "3011.04"
    leftovers.append(marker)
    write_module(
        project,
        "ev_spawner",
        f"""
        import subprocess

        def trial(seed, trial):
            mine = f"{marker}{{trial}}"
            subprocess.Popen(["sleep", mine])
            subprocess.Popen(["sleep", mine], start_new_session=True)
            subprocess.run(["sh", "-c", f"setsid sleep {{mine}} >/dev/null 2>&1 &"], check=True)
            return 1.0
        """,
    )
    after = AfterEachTrial(marker, patience=False)  # the worker reaps them before it replies

    Runner(concurrency=1, cwd=project, progress=after).run(
        tasks(python_spec("ev_spawner:trial"), 3)
    )

    assert after.survivors == [[], [], []]


def test_a_process_started_on_import_lives_with_the_worker_not_the_run(
    project: Path, scratch_root: Path, leftovers: list[str]
) -> None:
    """A server an eval module starts once is there for every trial, and gone after the run."""
    marker = "3011.05"
    leftovers.append(marker)
    write_module(
        project,
        "ev_server",
        f"""
        import subprocess

        SERVER = subprocess.Popen(["sleep", "{marker}"], start_new_session=True)

        def trial(seed):
            return 1.0 if SERVER.poll() is None else 0.0
        """,
    )

    records = Runner(concurrency=1, cwd=project).run(tasks(python_spec("ev_server:trial"), 3))

    assert [record.score for record in records] == [1.0, 1.0, 1.0]
    assert alive(marker) == []


def test_a_python_trial_killed_for_its_timeout_takes_every_process_it_started(
    project: Path, scratch_root: Path, leftovers: list[str]
) -> None:
    marker = "3011.06"
    leftovers.append(marker)
    write_module(
        project,
        "ev_stuck",
        f"""
        import subprocess
        import time

        def trial(seed):
            subprocess.Popen(["setsid", "sleep", "{marker}"])
            time.sleep(60)
        """,
    )

    ended: list[bool] = []

    [record] = Runner(
        concurrency=1, cwd=project, progress=lambda task, record: ended.append(gone(marker))
    ).run(tasks(python_spec("ev_stuck:trial", timeout=1), 1))

    assert record.error is not None and "timed out" in record.error
    assert ended == [True]


# --- the scratch directory, and an interrupted run -----------------------------------


def test_a_run_removes_its_scratch_directory(project: Path, scratch_root: Path) -> None:
    spec = command_spec("""echo '{"score": 1}' > "$FIREWALL_RESULT"; echo "$FIREWALL_SCRATCH" """)

    [record] = Runner(concurrency=1, cwd=project).run(tasks(spec, 1))

    assert record.score == 1.0
    assert list(scratch_root.iterdir()) == []


def test_replay_removes_its_scratch_directory(project: Path, scratch_root: Path) -> None:
    _, record = replay(Task(command_spec("echo 0.5"), 0, SEED, 1), cwd=project)

    assert record.score == 0.5
    assert list(scratch_root.iterdir()) == []


def test_an_interrupted_run_leaves_no_process_and_no_scratch_directory(
    project: Path, scratch_root: Path, leftovers: list[str]
) -> None:
    marker = "3011.07"
    leftovers.append(marker)
    write_module(
        project,
        "ev_slow",
        f"""
        import subprocess
        import time

        def trial(seed):
            subprocess.Popen(["setsid", "sleep", "{marker}"])
            time.sleep(60)
        """,
    )
    fast = command_spec("echo 1", id="fast")
    slow = [
        command_spec(f"setsid sleep {marker} & sleep {marker}", id="slow-command"),
        python_spec("ev_slow:trial", id="slow-python"),
    ]

    def interrupt(task: Task, record: TrialRecord) -> None:
        deadline = time.monotonic() + PATIENCE_S
        while len(alive(marker)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # until both slow trials have started their processes
        raise KeyboardInterrupt

    runner = Runner(concurrency=3, cwd=project, progress=interrupt)
    with pytest.raises(Interrupted):
        runner.run([Task(slow[0], 0, SEED, 1), Task(slow[1], 0, SEED, 1), Task(fast, 0, SEED, 1)])

    assert alive(marker) == []
    assert list(scratch_root.iterdir()) == []


def test_the_end_of_a_run_spares_the_processes_of_another(
    project: Path, scratch_root: Path, leftovers: list[str]
) -> None:
    marker = "3011.10"
    leftovers.append(marker)
    waiting = command_spec(
        f"sleep {marker} & touch started; while [ ! -e go ]; do sleep 0.05; done; kill $!; echo 1",
        id="waiting",
        timeout=120,
    )
    records: list[TrialRecord] = []
    other = threading.Thread(
        target=lambda: records.extend(Runner(concurrency=1, cwd=project).run(tasks(waiting, 1)))
    )
    other.start()
    try:
        deadline = time.monotonic() + PATIENCE_S
        while not (project / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

        [record] = Runner(concurrency=1, cwd=project).run(tasks(command_spec("echo 0.5"), 1))

        assert record.score == 0.5
        assert alive(marker), "the other run's process was killed"
    finally:
        (project / "go").touch()
        other.join()
    assert [record.score for record in records] == [1.0]


def test_what_importing_a_module_starts_ends_with_discovery(
    project: Path, leftovers: list[str]
) -> None:
    marker = "3011.11"
    leftovers.append(marker)
    (project / "evals").mkdir()
    write_module(
        project / "evals",
        "serving",
        f"""
        import subprocess

        import firewall

        SERVER = subprocess.Popen(
            ["sleep", "{marker}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

        @firewall.eval()
        def served(seed):
            return 1.0
        """,
    )

    proc = subprocess.run(
        worker_command("--discover", "evals"),
        cwd=project,
        capture_output=True,
        timeout=120,
        check=False,
    )

    assert proc.returncode == 0, proc.stderr
    assert b"evals.serving:served" in proc.stdout
    assert alive(marker) == []


# --- the installed command ------------------------------------------------------------


def _escaping_project(root: Path, marker: str, *, hang: bool) -> None:
    """Every way out the issue found: a background child, `setsid` from a command and from
    a Python eval. Each trial says when its processes are running; with ``hang`` it then
    sleeps on."""
    then = f"sleep {marker}" if hang else "echo 1"
    (root / "firewall.toml").write_text(
        "k = 3\nconcurrency = 4\ntimeout = 600\n"
        '[[evals]]\nid = "background"\n'
        f'command = "sleep {marker} >/dev/null 2>&1 & touch started-background; {then}"\n'
        '[[evals]]\nid = "new-session"\n'
        f'command = "setsid sleep {marker} >/dev/null 2>&1 & touch started-session; {then}"\n'
        '[[evals]]\nid = "python"\npython = "escaping:trial"\n'
    )
    (root / "escaping.py").write_text(
        "import pathlib, subprocess, time\n\n"
        "def trial(seed):\n"
        f"    subprocess.run(['sh', '-c', 'setsid sleep {marker} >/dev/null 2>&1 &'], check=True)\n"
        "    pathlib.Path('started-python').touch()\n"
        + (f"    time.sleep({marker})\n" if hang else "")
        + "    return 1.0\n"
    )


@pytest.mark.e2e
def test_no_process_of_an_eval_is_alive_after_firewall_run_returns(
    tmp_path: Path, leftovers: list[str]
) -> None:
    marker = "3011.08"
    leftovers.append(marker)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    _escaping_project(tmp_path, marker, hang=False)

    proc = subprocess.run(
        [FIREWALL, "run"],
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert alive(marker) == []
    assert marked("TMPDIR", str(scratch)) == [], "a worker or the supervisor is still running"
    assert list(scratch.iterdir()) == []


@pytest.mark.e2e
def test_no_process_of_an_eval_outlives_a_sigkilled_firewall(
    tmp_path: Path, leftovers: list[str]
) -> None:
    marker = "3011.09"
    leftovers.append(marker)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    _escaping_project(tmp_path, marker, hang=True)
    proc = subprocess.Popen(
        [FIREWALL, "run"],
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(scratch)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        started = [tmp_path / f"started-{kind}" for kind in ("background", "session", "python")]
        deadline = time.monotonic() + PATIENCE_S
        while not all(path.exists() for path in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive(marker), "the trials never started"
        # The trials' scratch, and git's supervisor's when the run asked git something.
        assert {path.name[:9] for path in scratch.iterdir()} == {"firewall-"}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    assert gone(marker)
    assert eventually(lambda: not marked("TMPDIR", str(scratch))), "a worker is still running"
    assert eventually(lambda: not any(scratch.iterdir())), "the scratch directory is still there"
