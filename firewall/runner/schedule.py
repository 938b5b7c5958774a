"""Which trial runs next: every eval's trials, interleaved, as many as each still wants.

A ``Schedule`` hands the runner one task at a time, trial 0 of every eval
before trial 1 of any (so that, with many evals, an eval's first results are
in before its last trials start: adaptive K can only stop a probe whose
trials have not all been handed out). It asks ``wanted`` how many trials
that eval's probe should have in all when the trials it planned are all in,
and before that only after a trial that ``may_settle`` says could let the
probe stop early (from a few running facts of its trials, kept as they come:
most trials of a stable eval leave nothing to ask): fewer than handed out
stops it (the trials in flight still finish and count), more extends it.
Without ``wanted`` every eval gets its ``k`` trials, the fixed rule; without
``may_settle`` it asks after every trial.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from firewall.runner.seeds import trial_seed
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec

__all__ = ["MaySettle", "Schedule", "Seen", "Task", "Wanted"]

Wanted = Callable[[EvalSpec, Sequence[TrialRecord]], int]
"""How many trials a probe should have in all, given the trials it has so far."""


@dataclasses.dataclass
class Seen:
    """What a probe's finished trials showed so far, kept one trial at a time."""

    errored: int = 0
    violated: bool = False
    low: float = float("inf")  # the lowest score, and the highest
    high: float = float("-inf")

    def add(self, record: TrialRecord) -> None:
        if record.error is not None:
            self.errored += 1
            return
        if record.violations:
            self.violated = True
        score = record.score
        if score is not None:
            self.low = min(self.low, score)
            self.high = max(self.high, score)


MaySettle = Callable[[EvalSpec, Seen], bool]
"""Whether a probe short of its planned trials could stop now (False: no need to ask)."""


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
    seen: Seen = dataclasses.field(default_factory=Seen)

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
        may_settle: MaySettle | None = None,
        start: Mapping[str, Sequence[TrialRecord]] | None = None,
    ) -> None:
        self._seed = base_seed
        self._wanted = wanted
        self._may_settle = may_settle
        self._probes: dict[str, _Probe] = {}
        for spec in specs:
            done = list((start or {}).get(spec.id, ()))
            probe = _Probe(spec, done, spec.k, handed_out=len(done))
            for record in done:
                probe.seen.add(record)
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

    def next_task_if(self, fits: Callable[[EvalSpec], bool]) -> Task | None:
        """The next trial, only if its eval ``fits`` and, under adaptive K, has no trial in
        flight: one more for a batch the runner sends a worker at once. The trial is one
        ``next_task`` would hand out now (within the probe's planned trials), and one no
        result still to come could have cancelled."""
        while self._ready:
            probe = self._ready[0]
            if probe.handed_out >= probe.target:
                self._ready.popleft()  # stopped since it queued
                probe.queued = False
                continue
            if (self._wanted is not None and probe.in_flight) or not fits(probe.spec):
                return None
            return self.next_task()
        return None

    def record(self, task: Task, record: TrialRecord) -> None:
        """Keep a finished trial and let its probe ask for more, or for none."""
        probe = self._probes[task.spec.id]
        probe.trials.append(record)
        if self._wanted is None:
            return  # k trials each, whatever they show
        probe.seen.add(record)
        # The planned trials all in: judged (kept to, extended). Short of them, asked only
        # when curtailment could apply; past k, extension is decided on the trials it
        # asked for, once they are all in.
        n = len(probe.trials)
        if n >= probe.target:
            ask = True
        elif n < probe.spec.k:
            ask = self._may_settle is None or self._may_settle(probe.spec, probe.seen)
        else:
            ask = False
        if ask:
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
