"""An async eval's judge is called in the async pool, beside its generation: an ``async
def`` judge never boots the slot's own worker, and many judgements are in flight at once
in one interpreter per CPU. A plain ``def`` judge, and an output too long for one pipe
write, are judged in the slot's worker as before.

Real worker processes; each call notes its worker's pid in a directory, so that a test
can tell which interpreters held the generations and which the judgements.
"""

from __future__ import annotations

from pathlib import Path

from builders import python_spec, write_module

from firewall.runner import Runner, Task
from firewall.runner.python import cpus

SEED = 7654321
TRIALS = 16

MODULE = """
import asyncio, os, pathlib, time, uuid

ROOM = pathlib.Path({room!r})

def note(kind):
    (ROOM / kind).mkdir(parents=True, exist_ok=True)
    (ROOM / kind / str(os.getpid())).touch()

async def generate(seed):
    note("generated")
    await asyncio.sleep(0.01)
    return "reply %d" % seed

async def generate_long(seed):
    note("generated")
    return "x" * 20000

async def judge(output, seed):
    note("judged")
    # every judgement waits for all of them: only calls in flight together get through
    waiting = ROOM / "waiting"
    waiting.mkdir(exist_ok=True)
    (waiting / uuid.uuid4().hex).touch()
    while len(list(waiting.iterdir())) < {expected}:
        await asyncio.sleep(0.01)
    return 0.9

def plain_judge(output, seed):
    note("judged")
    time.sleep(0.01)
    return 0.8
"""


def pids(room: Path, kind: str) -> set[str]:
    return {path.name for path in (room / kind).iterdir()}


def probe(project: Path, generate: str, judge: str) -> list[float | None]:
    room = project / "room"
    write_module(project, "judged_ev", MODULE.format(room=str(room), expected=TRIALS))
    spec = python_spec(
        f"judged_ev:{generate}", judge=f"judged_ev:{judge}", asynchronous=True, timeout=30
    )
    tasks = [Task(spec, index, SEED + index, TRIALS) for index in range(TRIALS)]
    records = Runner(concurrency=TRIALS, cwd=project).run(tasks)
    assert all(record.error is None for record in records), [r.error for r in records]
    return [record.score for record in records]


def test_an_async_judge_of_an_async_eval_is_called_in_the_pool(project: Path) -> None:
    assert probe(project, "generate", "judge") == [0.9] * TRIALS
    judged = pids(project / "room", "judged")
    assert judged <= pids(project / "room", "generated"), "the pool's workers, no other"
    assert len(judged) <= cpus(), "sixteen judgements at once in one interpreter per CPU"


def test_a_plain_judge_of_an_async_eval_is_called_in_the_slots_worker(project: Path) -> None:
    assert probe(project, "generate", "plain_judge") == [0.8] * TRIALS
    judged = pids(project / "room", "judged")
    assert not judged & pids(project / "room", "generated")


def test_a_long_output_is_judged_in_the_slots_worker(project: Path) -> None:
    assert probe(project, "generate_long", "judge") == [0.9] * TRIALS
    assert not pids(project / "room", "judged") & pids(project / "room", "generated")
