"""Async Python evals share a few pool workers' event loops; what one trial breaks, it pays for.

Real worker processes, no mocks. A file barrier proves trials are in flight at
once (each waits until all have arrived, so a runner that ran them one at a time
would time them out), and each trial reports its worker's pid, so that a test
can count the interpreters that held them.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from builders import python_spec, write_module

from firewall.config import parse_settings
from firewall.configfile import LoadedConfig
from firewall.discovery import discover, is_coroutine
from firewall.runner import Runner, Task
from firewall.runner._supervisor import descendants
from firewall.runner.python import cpus, worker_command
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec

SEED = 1234567

BARRIER = """
import asyncio, os, pathlib, time, uuid

async def wait_for_all(seed, trial, expected, room):
    room = pathlib.Path(room)
    room.mkdir(exist_ok=True)
    (room / uuid.uuid4().hex).touch()
    while len(list(room.iterdir())) < expected:
        await asyncio.sleep(0.01)
    return {"score": 1.0, "fields": {"pid": os.getpid()}}
"""


def async_spec(target: str, **overrides: object) -> EvalSpec:
    return python_spec(target, asynchronous=True, **overrides)


def run(
    cwd: Path, specs: list[EvalSpec], *, trials: int, concurrency: int
) -> dict[str, list[TrialRecord]]:
    tasks = [Task(spec, index, SEED + index, trials) for spec in specs for index in range(trials)]
    records = Runner(concurrency=concurrency, cwd=cwd).run(tasks)
    by_eval: dict[str, list[TrialRecord]] = {spec.id: [] for spec in specs}
    for task, record in zip(tasks, records, strict=True):
        by_eval[task.spec.id].append(record)
    return by_eval


def barrier_module(project: Path, expected: int) -> None:
    write_module(
        project,
        "ev_barrier",
        BARRIER
        + f"""
async def meet(seed, trial):
    return await wait_for_all(seed, trial, {expected}, {str(project / "room")!r})
""",
    )


def pids(records: list[TrialRecord]) -> set[object]:
    return {record.fields["pid"] for record in records}


def test_sixteen_async_trials_are_in_flight_at_once_in_one_interpreter_per_cpu(
    project: Path,
) -> None:
    barrier_module(project, expected=16)

    [records] = run(
        project, [async_spec("ev_barrier:meet", timeout=20)], trials=16, concurrency=16
    ).values()

    assert [record.error for record in records] == [None] * 16  # all met: all were in flight
    assert len(pids(records)) <= cpus()  # in at most one worker per CPU, not sixteen
    assert max(record.in_flight for record in records) == 16  # concurrency counts trials


def test_an_isolated_async_eval_gets_a_worker_per_trial_in_flight(project: Path) -> None:
    barrier_module(project, expected=4)

    [records] = run(
        project,
        [async_spec("ev_barrier:meet", timeout=20, isolate=True)],
        trials=4,
        concurrency=4,
    ).values()

    assert [record.error for record in records] == [None] * 4
    assert len(pids(records)) == 4  # one process per slot, as a synchronous eval has


def test_a_trial_that_blocks_the_loop_fails_alone_and_says_why(project: Path) -> None:
    write_module(
        project,
        "ev_blocking",
        """
        import asyncio, os, time

        async def blocks(seed):
            time.sleep(30)  # blocking code in an async def
            return 1.0

        async def waits(seed):
            await asyncio.sleep(0.3)
            return {"score": 1.0, "fields": {"pid": os.getpid()}}
        """,
    )
    blocker = async_spec("ev_blocking:blocks", id="blocker", timeout=1)
    neighbour = async_spec("ev_blocking:waits", id="neighbour", timeout=10)

    records = run(project, [blocker, neighbour], trials=4, concurrency=8)

    for record in records["blocker"]:
        assert record.error is not None
        assert record.error.startswith("timed out after 1 s: it held its worker's event loop")
        assert "time.sleep" in record.error
    assert [record.error for record in records["neighbour"]] == [None] * 4


def test_trials_paused_by_a_blocking_neighbour_do_not_time_out(project: Path) -> None:
    write_module(
        project,
        "ev_pause",
        """
        import asyncio, os, time

        async def hogs(seed):
            await asyncio.sleep(0.05)
            time.sleep(2.5)  # holds the loop for longer than a neighbour's whole timeout
            return {"score": 1.0, "fields": {"pid": os.getpid()}}

        async def waits(seed):
            await asyncio.sleep(0.3)
            return {"score": 1.0, "fields": {"pid": os.getpid()}}
        """,
    )
    hog = async_spec("ev_pause:hogs", id="hog", timeout=20)
    neighbour = async_spec("ev_pause:waits", id="neighbour", timeout=1)

    records = run(project, [hog, neighbour], trials=4, concurrency=8)

    assert [record.error for record in records["hog"]] == [None] * 4
    assert [record.error for record in records["neighbour"]] == [None] * 4
    # time.sleep(2.5) holds the loop at least that long: a bound that load cannot break.
    assert all((record.blocked_s or 0.0) >= 2.0 for record in records["hog"])  # said on its record
    assert [record.blocked_s for record in records["neighbour"]] == [None] * 4
    shared = [r for r in records["neighbour"] if r.fields["pid"] in pids(records["hog"])]
    assert shared  # some did wait for a hog in their worker, 1.5 s past their timeout


def test_a_stall_is_charged_to_its_culprit_and_taken_off_the_trials_that_waited() -> None:
    # The heartbeat's accounting alone, on a worker's pool state in this process, its loop
    # not running: a heartbeat 2.5 s late, with the culprit the watchdog found.
    import asyncio

    from firewall.runner import _worker

    loop = asyncio.new_event_loop()
    pool = _worker._Pool(loop, replies=-1, current=None)
    culprit, waiting, unstarted = (_worker._Trial({"id": n, "timeout": 1.0}) for n in range(3))
    now = time.monotonic()
    for trial in (culprit, waiting):
        trial.began, trial.deadline = now - 3.0, now + 1.0
    pool.flight = {trial.id: trial for trial in (culprit, waiting, unstarted)}
    pool.blamed = culprit
    pool.beat_at = now - _worker.BEAT_S - 2.5

    pool.beat()

    assert waiting.held == pytest.approx(2.5, abs=0.05)  # taken off its duration
    assert waiting.deadline == pytest.approx(now + 3.5, abs=0.05)  # and added to its deadline
    assert culprit.held == 0.0 and culprit.deadline == now + 1.0  # its own time, not a pause
    assert culprit.blocked == pytest.approx(2.5, abs=0.05)
    assert unstarted.held == 0.0  # not started: nothing to pause
    loop.close()


def test_a_trial_that_holds_the_interpreter_itself_costs_only_its_own_trial(
    project: Path,
) -> None:
    # ctypes.PyDLL keeps the GIL through the C call: not even the worker's watchdog runs.
    write_module(
        project,
        "ev_gil",
        """
        import asyncio, ctypes

        async def judge(seed, trial):
            if trial == 1:
                ctypes.PyDLL(None).sleep(30)
            await asyncio.sleep(0.2)
            return 1.0
        """,
    )

    [records] = run(
        project, [async_spec("ev_gil:judge", timeout=1)], trials=6, concurrency=6
    ).values()

    assert [record.error is None for record in records] == [True, False, True, True, True, True]
    assert records[1].error == "timed out after 1 s; the worker was killed"


def test_a_blocking_trial_deaf_to_the_watchdog_still_costs_only_its_own_trial(
    project: Path,
) -> None:
    # The eval takes the watchdog's signal for itself: the worker falls silent once the
    # stall outlasts the trial's deadline, and the runner runs its trials alone.
    write_module(
        project,
        "ev_deaf",
        """
        import asyncio, signal, time

        async def judge(seed, trial):
            if trial == 0:
                for number in range(1, signal.NSIG):
                    try:
                        signal.signal(number, signal.SIG_IGN)
                    except (OSError, ValueError):
                        pass
                time.sleep(30)
            await asyncio.sleep(0.2)
            return 1.0
        """,
    )

    [records] = run(
        project, [async_spec("ev_deaf:judge", timeout=1)], trials=4, concurrency=4
    ).values()

    assert [record.error is None for record in records] == [False, True, True, True]
    assert records[0].error == "timed out after 1 s; the worker was killed"


def test_a_trial_that_kills_its_worker_is_charged_and_its_neighbours_are_not(
    project: Path,
) -> None:
    write_module(
        project,
        "ev_crash",
        """
        import asyncio, os

        async def judge(seed, trial):
            await asyncio.sleep(0.2)
            if trial == 2:
                os._exit(3)
            return 1.0
        """,
    )

    [records] = run(
        project, [async_spec("ev_crash:judge", timeout=10)], trials=6, concurrency=6
    ).values()

    assert [record.error is None for record in records] == [True, True, False, True, True, True]
    assert records[2].error is not None
    assert "exited with status 3" in records[2].error
    assert [record.score for record in records if record.error is None] == [1.0] * 5


def test_an_errored_trial_keeps_what_it_printed_and_not_its_neighbours_lines(
    project: Path,
) -> None:
    write_module(
        project,
        "ev_print",
        """
        import asyncio, sys

        async def judge(seed, trial):
            print(f"trial {trial} starts")
            await asyncio.sleep(0.1)
            print(f"trial {trial} ends", file=sys.stderr)
            if trial == 3:
                raise ValueError("the judge said no")
            return 1.0
        """,
    )

    [records] = run(
        project, [async_spec("ev_print:judge", timeout=10)], trials=6, concurrency=6
    ).values()

    failed = records[3]
    assert failed.error == "ValueError: the judge said no (at ev_print.py:9)"
    assert failed.output == "trial 3 starts\ntrial 3 ends"
    assert failed.traceback is not None and "the judge said no" in failed.traceback
    assert [record.output for record in records if record.error is None] == [None] * 5


def test_sys_exit_and_cancellation_in_an_async_trial_cost_that_trial(project: Path) -> None:
    write_module(
        project,
        "ev_exits",
        """
        import asyncio, sys

        async def judge(seed, trial):
            await asyncio.sleep(0.05)
            if trial == 0:
                sys.exit(2)
            if trial == 1:
                raise asyncio.CancelledError
            return 1.0
        """,
    )

    [records] = run(
        project, [async_spec("ev_exits:judge", timeout=10)], trials=4, concurrency=4
    ).values()

    assert [record.error for record in records] == [
        "eval called sys.exit(2)",
        "the trial was cancelled (asyncio.CancelledError)",
        None,
        None,
    ]


def test_a_slow_import_has_its_own_limit_in_the_pool(project: Path) -> None:
    write_module(
        project,
        "ev_slow_import",
        """
        import time
        time.sleep(30)

        async def judge(seed):
            return 1.0
        """,
    )

    [records] = run(
        project,
        [async_spec("ev_slow_import:judge", timeout=10, import_timeout=1)],
        trials=2,
        concurrency=2,
    ).values()

    for record in records:
        assert record.error is not None
        assert record.error.startswith(
            "importing ev_slow_import took longer than import_timeout 1 s"
        )


def test_a_function_that_is_not_a_coroutine_function_runs_alone(project: Path) -> None:
    write_module(
        project,
        "ev_disguised",
        """
        import asyncio, functools

        def synchronous(fn):
            def wrapper(seed):
                return asyncio.run(fn(seed))
            return wrapper

        @synchronous
        async def judge(seed):
            return 0.9
        """,
    )
    assert is_coroutine("ev_disguised:judge", project)  # so its source reads

    [records] = run(project, [async_spec("ev_disguised:judge")], trials=3, concurrency=3).values()

    assert [(record.error, record.score) for record in records] == [(None, 0.9)] * 3


def test_an_async_trial_reports_its_call_alone_and_its_import_apart(project: Path) -> None:
    write_module(
        project,
        "ev_timed",
        """
        import asyncio

        async def judge(seed):
            await asyncio.sleep(0.05)
            return 1.0
        """,
    )

    [records] = run(
        project, [async_spec("ev_timed:judge", timeout=10)], trials=4, concurrency=4
    ).values()

    assert all(record.error is None for record in records)
    assert sum(record.import_s is not None for record in records) >= 1
    assert sum(record.boot_s is not None for record in records) >= 1
    assert all(record.duration_s >= 0.04 for record in records)  # its own 50 ms sleep, at least


# --- which evals go to the pool ------------------------------------------------------


def test_discovery_marks_async_def_targets_and_decorated_coroutines(project: Path) -> None:
    write_module(
        project,
        "ev_kinds",
        """
        import firewall

        async def coroutine(seed):
            return 1.0

        def plain(seed):
            return 1.0

        async def rebound(seed):
            return 1.0

        rebound = plain

        @firewall.eval(id="decorated-async")
        async def decorated(seed):
            return 1.0

        @firewall.eval(id="decorated-sync")
        def decorated_sync(seed):
            return 1.0
        """,
    )
    settings = parse_settings(
        {
            "paths": ["ev_kinds.py"],
            "evals": [
                {"id": "coroutine", "python": "ev_kinds:coroutine"},
                {"id": "plain", "python": "ev_kinds:plain"},
                {"id": "rebound", "python": "ev_kinds:rebound"},
            ],
        },
        source="firewall.toml",
        prefix="",
    )

    specs = discover(
        LoadedConfig(settings=settings, path=project / "firewall.toml", prefix=""), project
    )

    assert {spec.id: spec.asynchronous for spec in specs} == {
        "coroutine": True,
        "plain": False,
        "rebound": False,
        "decorated-async": True,
        "decorated-sync": False,
    }


def test_isolate_is_a_per_eval_setting() -> None:
    settings = parse_settings(
        {"evals": [{"id": "a", "python": "m:f", "isolate": True}, {"id": "b", "python": "m:g"}]},
        source="firewall.toml",
        prefix="",
    )

    assert [entry.isolate for entry in settings.evals] == [True, False]


def test_no_process_an_async_trial_starts_outlives_the_run(project: Path) -> None:
    marker = "7777.4242"
    write_module(
        project,
        "ev_spawns",
        f"""
        import asyncio

        async def judge(seed):
            await asyncio.create_subprocess_exec("sleep", "{marker}")  # never waited for
            await asyncio.sleep(0.1)
            return 1.0
        """,
    )

    [records] = run(
        project, [async_spec("ev_spawns:judge", timeout=10)], trials=4, concurrency=4
    ).values()

    assert [record.error for record in records] == [None] * 4
    assert running(marker) == []


def running(argument: str, among: list[int] | None = None) -> list[int]:
    """The pids of live processes (not zombies) with ``argument`` on their command line,
    of all of them or of ``among``."""
    if among is None:
        among = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    found = []
    for pid in among:
        try:
            arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if argument.encode() in arguments and state not in (b"Z", b"X"):
            found.append(pid)
    return found


def test_a_target_too_long_for_one_pipe_write_runs_alone(project: Path) -> None:
    name = "judge_" + "x" * 5000  # a request the pipe would not write whole
    write_module(
        project,
        "ev_long",
        f"""
        import asyncio, os

        async def {name}(seed):
            await asyncio.sleep(0.01)
            pooled = b"--pool" in open("/proc/self/cmdline", "rb").read().split(b"\\0")
            return {{"score": 1.0, "fields": {{"pooled": pooled}}}}
        """,
    )

    [records] = run(
        project, [async_spec(f"ev_long:{name}", timeout=10)], trials=2, concurrency=2
    ).values()

    assert [record.error for record in records] == [None, None]
    assert [record.fields["pooled"] for record in records] == [False, False]


def test_a_pooled_trial_keeps_as_much_of_its_output_as_a_trial_alone() -> None:
    from firewall.runner import _worker
    from firewall.runner.outcome import OUTPUT_TAIL_CHARS

    captured = _worker._Captured()
    captured.add("x" * (3 * OUTPUT_TAIL_CHARS))

    assert captured.text() == "…" + "x" * OUTPUT_TAIL_CHARS


def test_a_worker_booted_to_rerun_a_lost_trial_does_not_stay_for_the_rest_of_the_run(
    project: Path,
) -> None:
    write_module(
        project,
        "ev_crash_once",
        """
        import asyncio, os

        async def judge(seed, trial):
            await asyncio.sleep(0.2)
            if trial == 0:
                os._exit(3)
            return 1.0

        async def later(seed):
            await asyncio.sleep(0.4)
            return 1.0
        """,
    )
    crashing = async_spec("ev_crash_once:judge", id="crashing", timeout=10)
    later = async_spec("ev_crash_once:later", id="later", timeout=10)
    tasks = [Task(crashing, index, SEED + index, 4) for index in range(4)]
    tasks += [Task(later, index, SEED + index, 12) for index in range(12)]
    seen: list[tuple[str, int]] = []  # each record as it came, with the workers alive then

    def count_alone(task: Task, record: TrialRecord) -> None:
        seen.append((task.spec.id, len(one_trial_workers())))

    records = Runner(concurrency=4, cwd=project, progress=count_alone).run(tasks)

    assert [record.error is None for record in records[:4]] == [False, True, True, True]
    last_rerun = max(i for i, (eval_id, _) in enumerate(seen) if eval_id == "crashing")
    while_the_run_went_on = [alive for _, alive in seen[last_rerun + 1 : -1]]
    assert while_the_run_went_on  # later trials finished after the reruns, before the end
    assert while_the_run_went_on == [0] * len(while_the_run_went_on)


def one_trial_workers() -> list[int]:
    """This test's one-trial-at-a-time worker processes (`--own-log`), alive now."""
    return running("--own-log", among=descendants(os.getpid()))


def test_a_pool_worker_given_a_request_it_cannot_read_ends_rather_than_hang(
    project: Path,
) -> None:
    proc = subprocess.run(
        worker_command("--pool"),
        cwd=project,
        input=b'{"not a request"\n',
        capture_output=True,
        timeout=30,
        check=False,
    )

    assert proc.returncode == 70  # the runner sees the end of its stream, and runs alone
    assert proc.stdout.startswith(b'{"ready": true}')
