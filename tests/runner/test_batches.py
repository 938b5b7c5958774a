"""Quick synchronous trials go to a worker several at a time (``PythonWorker.pipeline``),
and each keeps what it has alone: its own timeout, its own crash, its own output, its seed.

No timed assertions: which trials shared a worker is read from the pid each trial reports.
"""

from __future__ import annotations

from pathlib import Path

from builders import python_spec, write_module

from firewall.runner import Runner, Schedule, Task
from firewall.runner.seeds import trial_seed
from firewall.spec import EvalSpec

SEED = 7654321

QUICK = """
import os
import sys
import time


def quick(seed, trial):
    return {"score": 1.0, "fields": {"pid": os.getpid(), "seed": seed}}


def odd(seed, trial):
    if trial == 3:
        time.sleep(60)
    if trial == 5:
        print("five's own words", file=sys.stderr)
        raise ValueError("five")
    if trial == 7:
        print("seven dies", file=sys.stderr, flush=True)
        os._exit(4)
    print(f"trial {trial} was here", file=sys.stderr)
    return {"score": 1.0, "fields": {"pid": os.getpid()}}
"""


def tasks_of(spec: EvalSpec, n: int) -> list[Task]:
    return [Task(spec, index, SEED + index, n) for index in range(n)]


def test_quick_trials_share_their_worker_and_keep_their_seeds(project: Path) -> None:
    write_module(project, "ev_quick", QUICK)
    spec = python_spec("ev_quick:quick")

    records = Runner(concurrency=1, cwd=project).run(tasks_of(spec, 40))

    assert [(r.index, r.seed, r.error) for r in records] == [(i, SEED + i, None) for i in range(40)]
    assert [r.fields["seed"] for r in records] == [SEED + i for i in range(40)]
    assert len({r.fields["pid"] for r in records}) == 1  # one worker, never lost


def test_a_trial_that_hangs_or_crashes_in_a_batch_costs_itself_alone(project: Path) -> None:
    write_module(project, "ev_odd", QUICK)
    # The first trial goes alone; the runner learns from it that the calls are quick, and
    # sends the ten after it together.
    warm = python_spec("ev_odd:quick", id="warm")
    spec = python_spec("ev_odd:odd", id="odd", timeout=1)
    tasks = [Task(warm, 0, SEED, 1), *tasks_of(spec, 10)]

    [first, *records] = Runner(concurrency=1, cwd=project).run(tasks)

    assert first.error is None
    errors = {r.index: r.error for r in records if r.error is not None}
    assert set(errors) == {3, 5, 7}
    assert "timed out after 1 s" in errors[3]
    assert "ValueError: five" in errors[5]
    assert "status 4" in errors[7] and "seven dies" in errors[7]
    # an error's output is its own trial's, not the one before it in the batch
    assert records[5].output == "five's own words"
    assert all(r.score == 1.0 for r in records if r.index not in errors)
    pids = {r.index: r.fields["pid"] for r in records if r.error is None}
    # the trials after a lost worker ran in a fresh one: none of them was lost with it
    assert pids[2] != pids[4] != pids[8]
    assert pids[4] == pids[6]


def test_a_schedule_batches_no_second_trial_of_an_eval_in_flight() -> None:
    specs = [python_spec(f"m:f{i}", id=f"e{i}", k=3) for i in range(3)]
    schedule = Schedule(specs, SEED, wanted=lambda spec, trials: spec.k)

    first = schedule.next_task()
    more = [schedule.next_task_if(lambda spec: True) for _ in range(3)]

    assert first is not None and first.spec.id == "e0"
    assert [t.spec.id if t else None for t in more] == ["e1", "e2", None]  # e0's is in flight
    assert more[0] is not None and more[0].seed == trial_seed(SEED, "e1", 0)


def test_a_schedule_batches_only_the_evals_that_fit() -> None:
    specs = [python_spec(f"m:f{i}", id=f"e{i}", k=3) for i in range(3)]
    schedule = Schedule(specs, SEED)

    schedule.next_task()

    assert schedule.next_task_if(lambda spec: spec.id != "e1") is None  # e1 is next: stop
    task = schedule.next_task()
    assert task is not None and task.spec.id == "e1"  # still there for the next slot
