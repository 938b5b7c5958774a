"""Which trial runs next: every eval's trials, interleaved, as many as each still wants.

A ``Schedule`` hands the runner one task at a time, trial 0 of every eval
before trial 1 of any (so that, with many evals, an eval's first results are
in before its last trials start: adaptive K can only stop a probe whose
trials have not all been handed out). After each finished trial it asks
``wanted`` how many trials that eval's probe should have in all: fewer than
handed out stops it (the trials in flight still finish and count), more
extends it. Without ``wanted`` every eval gets its ``k`` trials, the fixed rule.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from firewall.runner.seeds import trial_seed
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec

__all__ = ["Schedule", "Task", "Wanted"]

Wanted = Callable[[EvalSpec, Sequence[TrialRecord]], int]
"""How many trials a probe should have in all, given the trials it has so far."""


@dataclasses.dataclass(frozen=True)
class Task:
    """One trial to run: an eval, its 0-based index in the probe, and its seed."""

    spec: EvalSpec
    index: int
    seed: int
    k: int


@dataclasses.dataclass
class _Probe:
    spec: EvalSpec
    trials: list[TrialRecord]
    target: int
    handed_out: int = 0
    queued: bool = False  # in the schedule's ready queue

    @property
    def in_flight(self) -> int:
        return self.handed_out - len(self.trials)


class Schedule:
    """The trials of a probe stage, handed out as they are wanted.

    Not thread-safe by itself: the runner calls it under its own lock.
    """

    def __init__(
        self,
        specs: Iterable[EvalSpec],
        base_seed: int,
        *,
        wanted: Wanted | None = None,
        start: Mapping[str, Sequence[TrialRecord]] | None = None,
    ) -> None:
        self._seed = base_seed
        self._wanted = wanted
        self._probes: dict[str, _Probe] = {}
        for spec in specs:
            done = list((start or {}).get(spec.id, ()))
            probe = _Probe(spec, done, spec.k, handed_out=len(done))
            probe.target = self._target(probe) if done else spec.k
            self._probes[spec.id] = probe
        self.planned = sum(
            max(p.target, p.handed_out) - len(p.trials) for p in self._probes.values()
        )
        """The trials it means to run, as it stands: adaptive K moves it, up or down."""
        self._ready: collections.deque[_Probe] = collections.deque()
        for probe in self._probes.values():
            self._queue(probe)

    @property
    def specs(self) -> list[EvalSpec]:
        return [probe.spec for probe in self._probes.values()]

    @property
    def most(self) -> int:
        """The most trials it could still hand out (what a runner sizes its slots by)."""
        return sum(
            max(probe.target, probe.spec.max_k if self._wanted else 0) - probe.handed_out
            for probe in self._probes.values()
        )

    def next_task(self) -> Task | None:
        """The next trial to start, or None when no eval wants one now."""
        while self._ready:
            probe = self._ready.popleft()
            probe.queued = False
            if probe.handed_out >= probe.target:
                continue  # stopped since it queued
            index = probe.handed_out
            probe.handed_out += 1
            self._queue(probe)
            spec = probe.spec
            return Task(spec, index, trial_seed(self._seed, spec.id, index), spec.k)
        return None

    def record(self, task: Task, record: TrialRecord) -> None:
        """Keep a finished trial and let its probe ask for more, or for none."""
        probe = self._probes[task.spec.id]
        probe.trials.append(record)
        # Short of k, every result may settle the probe; past it, extension is decided on
        # the trials it asked for, once they are all in.
        if len(probe.trials) < probe.spec.k or probe.in_flight == 0:
            before = max(probe.target, probe.handed_out)
            probe.target = self._target(probe)
            self.planned += max(probe.target, probe.handed_out) - before
            self._queue(probe)

    def results(self) -> dict[str, list[TrialRecord]]:
        """Every eval's finished trials, in trial order."""
        return {
            eval_id: sorted(probe.trials, key=lambda trial: trial.index)
            for eval_id, probe in self._probes.items()
            if probe.trials
        }

    def _queue(self, probe: _Probe) -> None:
        if not probe.queued and probe.handed_out < probe.target:
            probe.queued = True
            self._ready.append(probe)

    def _target(self, probe: _Probe) -> int:
        if self._wanted is None:
            return probe.spec.k
        return self._wanted(probe.spec, probe.trials)
