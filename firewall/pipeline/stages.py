"""The stages every deciding command is made of: plan -> probe -> judge -> conclude.

Each stage is a function of typed values that can be tested alone. None of them
touches a file; ``record`` in ``firewall.pipeline.run`` and the lifecycle step
in ``firewall.pipeline.nightly`` do, and ``firewall.pipeline.effects`` publishes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal, Protocol, TypedDict

from firewall import adaptive, judging
from firewall._stats import Stats
from firewall.adaptive import Stop
from firewall.artefact import Artefact, EvalReport, RunInfo
from firewall.diagnostics import CaseFlip, Hint, ValueCount, case_flips, field_drift, hints
from firewall.lifecycle import Entry
from firewall.pipeline import rejudge, verdict
from firewall.pipeline.suites import noted, registry_entry
from firewall.policy import Check, Status, decide
from firewall.runner import Early, Interrupted, Runner, Schedule, Task
from firewall.runner.reads import Reads
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec
from firewall.store.parts import Probed


class TrialCounter(Protocol):
    """What the probe stage reports to: the trials planned, then each one as it finishes."""

    def start(self, total: int) -> None: ...

    def replan(self, total: int) -> None: ...

    def step(self, eval_id: str, errored: bool) -> None: ...

    def finish(self) -> None: ...


@contextlib.contextmanager
def outliving() -> Iterator[None]:
    """A command's run with what exists when it starts (modules, the configuration, the
    specs) out of the garbage collector's sight (``gc.freeze``): all of it outlives the
    run, yet the records its trials leave set off full passes over every object there is
    (one took 40-65 ms in the middle of a 1,000-eval run's trials). Unfrozen when the run
    ends, so that the process's collector is left as it was (the tests run many in one),
    unless something was frozen before it: the ``firewall`` command froze its imports
    (``firewall.cli``) and ends with the run, and a host that froze its own objects
    decides when to unfreeze them."""
    frozen_before = gc.get_freeze_count()
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()


def plan(specs: Sequence[EvalSpec], seed: int, k: int | None) -> Schedule:
    """Every eval's probe, with its derived seeds, to run as adaptive K wants (contract §4).

    ``k`` (the command line's ``--k``) overrides every eval's own, and its
    ``max_k`` where that is lower: adaptive K may stop short of it, never cap it.
    """
    if k is not None:
        specs = [spec.model_copy(update={"k": k, "max_k": max(k, spec.max_k)}) for spec in specs]
    return Schedule(specs, seed, wanted=adaptive.wanted, may_settle=adaptive.may_settle)


def probe(
    schedule: Schedule,
    *,
    concurrency: int,
    cwd: Path,
    progress: TrialCounter | None = None,
    share_token: bool = False,
    reads: Reads | None = None,
    early: Early | None = None,
    rejudge_always: Collection[str] = (),
) -> tuple[dict[str, list[TrialRecord]], bool]:
    """Run the trials; return them grouped by eval id, and whether the run completed.
    Evals with a judge whose probe ended unclear have their outputs judged again
    (``firewall.pipeline.rejudge``; those of ``rejudge_always`` whatever they showed).

    ``share_token`` (``[github] share_token``) lets the evals see the firewall's own
    GitHub token; by default their environment goes without it. ``reads`` is filled with
    what each Python eval target read (``firewall.runner.reads``)."""
    step = None
    if progress is not None:
        progress.start(schedule.planned)
        counter, planned = progress, schedule.planned

        def step(task: Task, record: TrialRecord) -> None:
            nonlocal planned
            if schedule.planned != planned:
                planned = schedule.planned
                counter.replan(planned)
            counter.step(task.spec.id, record.errored)

    complete = True
    try:
        Runner(
            concurrency=concurrency,
            cwd=cwd,
            progress=step,
            share_token=share_token,
            reads=reads,
            early=early,
        ).run_schedule(schedule)
    except Interrupted:
        complete = False
    finally:
        if progress is not None:
            progress.finish()
    results = schedule.results()
    if complete:
        try:
            results = rejudge.rejudge(
                schedule.specs,
                results,
                cwd=cwd,
                concurrency=concurrency,
                share_token=share_token,
                always=rejudge_always,
            )
        except KeyboardInterrupt:
            complete = False  # the judgements so far are lost; the trials stand
    return results, complete


def judge(spec: EvalSpec, trials: list[TrialRecord], *, blocking: bool | None = None) -> EvalReport:
    """Decide one eval from its trials, with the diagnostics that explain the decision."""
    trials = sorted(trials, key=lambda trial: trial.index)
    concluded = adaptive.conclude(spec, trials)
    if concluded is None and judging.rejudged(trials):
        # Settled short of k on its first judgements, then judged again: decided on the
        # trials it has, as it stands (re-judging generates nothing, so none are missing).
        concluded = decide(spec, trials), Stop(trials=len(trials), planned=spec.k, why="settled")
    if concluded is None:
        return report_for(
            spec,
            Status.ERROR,
            f"interrupted after {len(trials)} of {spec.k} trials",
            Stats(errors=spec.k - len(trials)),
            trials,
            blocking=blocking,
            stop=Stop(trials=len(trials), planned=spec.k, why="interrupted"),
        )
    decision, stop = concluded
    if decision.status is Status.QUARANTINE and spec.judge is not None:  # settled ones too
        reason = judging.attributed(decision.reason, spec, trials)
        decision = decision.model_copy(update={"reason": reason})
    return report_for(
        spec,
        decision.status,
        decision.reason,
        decision.stats,
        trials,
        checks=list(decision.checks),
        blocking=blocking,
        stop=stop,
        # A test case: its failure messages are not output to drift.
        diagnosed=None if spec.suite is not None else diagnostics(trials, decision.status, spec),
    )


class Diagnostics(TypedDict):
    """What a report says beyond its decision (``firewall.diagnostics``), by field."""

    drift: dict[str, float]
    distributions: dict[str, list[ValueCount]]
    flips: list[CaseFlip]
    hints: list[Hint]


def diagnostics(trials: Sequence[TrialRecord], status: Status, spec: EvalSpec) -> Diagnostics:
    """Field drift, flipping cases, and cause hints where unstable: the parts of
    ``firewall.diagnostics.diagnose`` a report keeps, without the rest (it runs per eval)."""
    drift = field_drift(trials)
    flips = case_flips(trials, pass_score=spec.pass_score)
    unstable = status in (Status.QUARANTINE, Status.QUARANTINED, Status.ERROR)
    return Diagnostics(
        drift={entry.name: entry.drift for entry in sorted(drift, key=lambda d: d.name)},
        distributions={entry.name: entry.distribution for entry in drift},
        flips=flips,
        hints=hints(trials, flips=flips, drift=drift) if unstable else [],
    )


def skipped(spec: EvalSpec, entry: Entry) -> EvalReport:
    """An eval a normal run leaves alone because it is in the registry."""
    return report_for(
        spec,
        Status.QUARANTINED,
        f"in quarantine since {entry.since:%Y-%m-%d}: {entry.reason}",
        Stats(),
        [],
        blocking=False,
    )


def report_for(
    spec: EvalSpec,
    status: Status,
    reason: str,
    stats: Stats,
    trials: list[TrialRecord],
    *,
    checks: list[Check] | None = None,
    blocking: bool | None = None,
    stop: Stop | None = None,
    diagnosed: Diagnostics | None = None,
) -> EvalReport:
    found = diagnosed or Diagnostics(drift={}, distributions={}, flips=[], hints=[])
    return EvalReport(
        id=spec.id,
        status=status,
        blocking=spec.blocking if blocking is None else blocking,
        reason=reason,
        source=spec.source,
        k=spec.k,
        threshold=spec.threshold,
        flakiness=spec.flakiness,
        stats=stats,
        trials=trials,
        checks=checks or [],
        tags=list(spec.tags),
        owner=spec.owner,
        stop=stop,
        drift=found["drift"],
        distributions=found["distributions"],
        flips=found["flips"],
        hints=found["hints"],
    )


def conclude(
    parts: Sequence[Probed],
    entries: Mapping[str, Entry],
    *,
    mode: Literal["run", "gate"],
    finished_at: dt.datetime,
    suites: Collection[str] = (),
) -> Artefact:
    """Decide every eval of the probe parts against the registry as it stands, each
    found there by the test it names (``firewall.pipeline.suites.registry_entry``;
    ``suites``: the configuration's JUnit suites, whose cases a pytest test may be)."""
    reports = []
    suites = {*suites, *(spec.suite for part in parts for spec in part.specs if spec.suite)}
    for part in parts:
        for spec in part.specs:
            found = registry_entry(spec, entries, suites)
            entry = found.entry
            if spec.id not in part.trials:
                if entry is not None:
                    reports.append(skipped(spec, entry))
                continue
            # probed with --include-quarantined: it stays quarantined
            report = verdict.in_quarantine(judge(spec, part.trials[spec.id]), entry)
            reports.append(noted(report, found))
    complete = all(part.complete for part in parts)
    return Artefact(
        run=run_info(parts, mode=mode, finished_at=finished_at),
        summary=verdict.summarise(reports, complete),
        evals=reports,
    )


def run_info(
    parts: Sequence[Probed], *, mode: Literal["run", "gate", "nightly"], finished_at: dt.datetime
) -> RunInfo:
    """What the artefact says of the run: mode, seed, times, commit, completeness, shard."""
    first = parts[0]
    return RunInfo(
        mode=mode,
        base_seed=first.base_seed,
        started_at=min(p.started_at for p in parts),
        finished_at=finished_at,
        complete=all(part.complete for part in parts),
        shard=first.shard if len(parts) == 1 else None,
        git_sha=first.git_sha,
        git_ref=first.git_ref,
    )
