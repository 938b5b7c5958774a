"""Adaptive K looks per block of extension trials (issue 23, item 8), through the real
runner: trials in flight at concurrency 4, results arriving in any order.

The rules' error rates are split over the looks a probe may take (``policy.looks``: at k,
k + step, ..., max_k), so the runner must judge an extended probe only when a block is all
in, never after each of its trials.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from builders import python_spec, write_module

from firewall import adaptive
from firewall.policy import extension_step, looks
from firewall.runner import Runner, Schedule
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec

NEAR = """
import random


def near(seed):
    # An eval at about 0.9 F: many of its probes are near the line and get extended.
    return min(1.0, max(0.0, random.Random(seed).gauss(0.85, 0.025)))
"""


def test_extended_probes_are_judged_once_per_block_and_end_on_a_block(project: Path) -> None:
    write_module(project, "ev_near", NEAR)
    specs = [python_spec("ev_near:near", id=f"near-{i}", k=7, max_k=15) for i in range(16)]
    asked: dict[str, list[int]] = {spec.id: [] for spec in specs}
    lock = threading.Lock()

    def counted(spec: EvalSpec, trials: Sequence[TrialRecord]) -> int:
        with lock:
            asked[spec.id].append(len(trials))
        return adaptive.wanted(spec, trials)

    schedule = Schedule(specs, 20261202, wanted=counted, may_settle=adaptive.may_settle)
    Runner(concurrency=4, cwd=project).run_schedule(schedule)
    results = schedule.results()

    step = extension_step(specs[0])
    blocks = {7 + step * i for i in range(3)} | {15}  # 7, 10, 13 and max_k
    assert looks(specs[0]) == len(blocks) == 4
    extended = 0
    for spec in specs:
        counts = [n for n in asked[spec.id] if n >= spec.k]
        assert set(counts) <= blocks, (spec.id, asked[spec.id])
        assert len(counts) == len(set(counts))  # each block judged once
        trials = len(results[spec.id])
        assert trials in blocks or trials < spec.k, (spec.id, trials)
        extended += trials > spec.k
    assert extended >= 2  # the population really was extended
