"""The stages every deciding command is made of: plan -> probe -> judge -> summarise.

Each stage is a function of typed values that can be tested alone. None of them
touches a file; ``record`` in ``firewall.pipeline.run`` and the lifecycle step
in ``firewall.pipeline.nightly`` do, and ``firewall.pipeline.effects`` publishes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, Protocol

from firewall.artefact import Artefact, EvalReport, RunInfo, Summary
from firewall.diagnostics import diagnose
from firewall.errors import ExitCode
from firewall.lifecycle import Entry
from firewall.policy import Check, Status, decide
from firewall.runner import Interrupted, Runner, Task
from firewall.runner.seeds import trial_seed
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec
from firewall.stats import Stats
from firewall.store.parts import Probed


class Progress(Protocol):
    """What the probe stage reports to: the trials planned, then each one as it finishes."""

    def start(self, total: int) -> None: ...

    def replan(self, total: int) -> None: ...

    def step(self, eval_id: str, errored: bool) -> None: ...

    def finish(self) -> None: ...


def plan(specs: Sequence[EvalSpec], seed: int, k: int | None) -> list[Task]:
    """Every trial of every eval, with its derived seed; ``k`` overrides every eval's own."""
    tasks: list[Task] = []
    for spec in specs:
        if k is not None:
            spec = spec.model_copy(update={"k": k})
        tasks.extend(Task(spec, i, trial_seed(seed, spec.id, i), spec.k) for i in range(spec.k))
    return tasks


def probe(
    tasks: Sequence[Task], *, concurrency: int, cwd: Path, progress: Progress | None = None
) -> tuple[dict[str, list[TrialRecord]], bool]:
    """Run the trials; return them grouped by eval id, and whether the run completed."""
    if progress is not None:
        progress.start(len(tasks))
        counter = progress

        def step(task: Task, record: TrialRecord) -> None:
            counter.step(task.spec.id, record.errored)

    complete = True
    try:
        records = Runner(
            concurrency=concurrency, cwd=cwd, progress=step if progress is not None else None
        ).run(tasks)
        pairs = list(zip(tasks, records, strict=True))
    except Interrupted as stop:
        complete = False
        pairs = [
            (task, record)
            for task, record in zip(tasks, stop.records, strict=True)
            if record is not None
        ]
    finally:
        if progress is not None:
            progress.finish()
    grouped: dict[str, list[TrialRecord]] = {}
    for task, record in pairs:
        grouped.setdefault(task.spec.id, []).append(record)
    return grouped, complete


def judge(spec: EvalSpec, trials: list[TrialRecord], *, blocking: bool | None = None) -> EvalReport:
    """Decide one eval from its trials, with the diagnostics that explain the decision."""
    trials = sorted(trials, key=lambda trial: trial.index)
    if len(trials) < spec.k:
        return report_for(
            spec,
            Status.ERROR,
            f"interrupted after {len(trials)} of {spec.k} trials",
            Stats(errors=spec.k - len(trials)),
            trials,
            blocking=blocking,
        )
    decision = decide(spec, trials)
    report = report_for(
        spec,
        decision.status,
        decision.reason,
        decision.stats,
        trials,
        checks=list(decision.checks),
        blocking=blocking,
    )
    return explain(report, pass_score=spec.pass_score)


def explain(report: EvalReport, *, pass_score: float) -> EvalReport:
    """Attach the diagnostics: field drift, flipping cases, and cause hints where unstable."""
    wants_hints = report.status in (Status.QUARANTINE, Status.QUARANTINED, Status.ERROR)
    diagnosis = diagnose(report.trials, pass_score=pass_score, with_hints=wants_hints)
    return report.model_copy(
        update={
            "drift": diagnosis.drift_rates(),
            "distributions": {d.name: d.distribution for d in diagnosis.drift},
            "flips": diagnosis.flips,
            "hints": diagnosis.hints,
        }
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
) -> EvalReport:
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
    )


def summarise(reports: Sequence[EvalReport], complete: bool) -> Summary:
    """The counts by status and the exit code they make (contract §5)."""
    counts = dict.fromkeys(Status, 0)
    for report in reports:
        counts[report.status] += 1
    blocking = [report for report in reports if report.blocking]
    if not complete:
        code = ExitCode.INTERRUPTED
    elif any(report.status is Status.FAIL for report in blocking):
        code = ExitCode.FAIL
    elif any(report.status is Status.ERROR for report in blocking):
        code = ExitCode.ERROR
    else:
        code = ExitCode.OK
    return Summary(
        **{"pass": counts[Status.PASS]},
        fail=counts[Status.FAIL],
        quarantine=counts[Status.QUARANTINE],
        quarantined=counts[Status.QUARANTINED],
        error=counts[Status.ERROR],
        exit_code=code,
    )


def conclude(
    parts: Sequence[Probed],
    entries: Mapping[str, Entry],
    *,
    mode: Literal["run", "gate"],
    finished_at: dt.datetime,
) -> Artefact:
    """Decide every eval of the probe parts against the registry as it stands."""
    reports = []
    for part in parts:
        for spec in part.specs:
            entry = entries.get(spec.id)
            if spec.id not in part.trials:
                if entry is not None:
                    reports.append(skipped(spec, entry))
                continue
            report = judge(spec, part.trials[spec.id], blocking=False if entry else None)
            if entry is not None and report.status is Status.QUARANTINE:
                report = report.model_copy(update={"status": Status.QUARANTINED})
            reports.append(report)
    complete = all(part.complete for part in parts)
    return Artefact(
        run=run_info(parts, mode=mode, finished_at=finished_at),
        summary=summarise(reports, complete),
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
