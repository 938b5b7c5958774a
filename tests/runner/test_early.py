"""A run's async pool boots before its probe is planned (``Early``): the runner takes the
workers already booting; workers no runner took end with the block, as a run's do."""

from __future__ import annotations

import os
from pathlib import Path

from builders import python_spec, write_module

from firewall.runner import Early, Runner, Task
from firewall.runner._supervisor import descendants

SEED = 1234567


def test_the_runner_takes_the_workers_booted_early(project: Path) -> None:
    write_module(
        project,
        "ev_early",
        """
        import os

        async def pid(seed):
            return {"score": 1.0, "fields": {"pid": os.getpid()}}
        """,
    )
    spec = python_spec("ev_early:pid", asynchronous=True)

    with Early([spec], concurrency=4, cwd=project) as early:
        booted = set(descendants(os.getpid()))
        records = Runner(concurrency=4, cwd=project, early=early).run(
            [Task(spec, i, SEED + i, 8) for i in range(8)]
        )
        assert early.take() is None  # taken once, by that run

    assert [r.error for r in records] == [None] * 8
    assert {r.fields["pid"] for r in records} <= booted  # no worker booted for the run itself


def test_workers_no_run_took_end_with_the_block(project: Path) -> None:
    spec = python_spec("ev_none:f", asynchronous=True)
    before = set(descendants(os.getpid()))

    with Early([spec], concurrency=4, cwd=project):
        started = set(descendants(os.getpid())) - before
        assert started  # the pool's workers and the run's supervisor

    assert not started & set(descendants(os.getpid()))


def test_no_async_eval_no_early_pool(project: Path) -> None:
    with Early([python_spec("m:f")], concurrency=4, cwd=project) as early:
        assert early.take() is None
