"""Run and gate as a few typed stages: select -> plan -> probe -> judge -> record -> exit code.

Each stage is a function that can be tested alone; only ``record`` touches
files, and nothing here prints (progress goes through a callback). A sharded
probe hands its trials to the gate as parts, which ``firewall.store.parts`` owns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from firewall.artefact import Artefact, EvalReport, RunInfo, Summary
from firewall.config import LoadedConfig
from firewall.diagnostics import diagnose
from firewall.lifecycle import quarantine_entry
from firewall.pipeline.gitinfo import git_info
from firewall.policy import Check, Status, decide
from firewall.runner import Interrupted, Runner, Task
from firewall.runner.seeds import fresh_base_seed, trial_seed
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec
from firewall.stats import Stats
from firewall.store import history
from firewall.store.parts import Probed, load_parts, shard
from firewall.store.registry import Entry, Registry
from firewall.timeutil import now

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


@dataclasses.dataclass(frozen=True)
class RunOptions:
    k: int | None = None
    seed: int | str | None = None
    include_quarantined: bool = False
    shard: str | None = None
    dry_run: bool = False
    report: Path | None = None


@dataclasses.dataclass
class Outcome:
    artefact: Artefact
    new_quarantines: list[str]
    report_path: Path | None

    @property
    def exit_code(self) -> int:
        return self.artefact.summary.exit_code


def base_seed(configured: int | str, override: int | str | None) -> int:
    chosen = configured if override is None else override
    return fresh_base_seed() if chosen == "random" else int(chosen)


def plan(specs: Sequence[EvalSpec], seed: int, k: int | None) -> list[Task]:
    """Every trial of every eval, with its derived seed."""
    tasks: list[Task] = []
    for spec in specs:
        count = k if k is not None else spec.k
        if k is not None:
            spec = spec.model_copy(update={"k": count})
        tasks.extend(Task(spec, i, trial_seed(seed, spec.id, i), count) for i in range(count))
    return tasks


def probe(
    tasks: Sequence[Task],
    *,
    concurrency: int,
    cwd: Path,
    progress: Callable[[Task, TrialRecord], None] | None = None,
) -> tuple[dict[str, list[TrialRecord]], bool]:
    """Run the trials; return them grouped by eval id, and whether the run completed."""
    complete = True
    try:
        records = Runner(concurrency=concurrency, cwd=cwd, progress=progress).run(tasks)
        pairs = list(zip(tasks, records, strict=True))
    except Interrupted as stop:
        complete = False
        pairs = [
            (task, record)
            for task, record in zip(tasks, stop.records, strict=True)
            if record is not None
        ]
    grouped: dict[str, list[TrialRecord]] = {}
    for task, record in pairs:
        grouped.setdefault(task.spec.id, []).append(record)
    return grouped, complete


def judge(spec: EvalSpec, trials: list[TrialRecord], *, blocking: bool | None = None) -> EvalReport:
    """Decide one eval from its trials."""
    trials = sorted(trials, key=lambda trial: trial.index)
    if len(trials) < spec.k:
        return _report(
            spec,
            Status.ERROR,
            f"interrupted after {len(trials)} of {spec.k} trials",
            Stats(errors=spec.k - len(trials)),
            trials,
            blocking=blocking,
        )
    decision = decide(spec, trials)
    report = _report(
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
    return _report(
        spec,
        Status.QUARANTINED,
        f"in quarantine since {entry.since:%Y-%m-%d}: {entry.reason}",
        Stats(),
        [],
        blocking=False,
    )


def _report(
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
    counts = {status: 0 for status in Status}
    for report in reports:
        counts[report.status] += 1
    blocking = [report for report in reports if report.blocking]
    if not complete:
        code = EXIT_INTERRUPTED
    elif any(report.status is Status.FAIL for report in blocking):
        code = EXIT_FAIL
    elif any(report.status is Status.ERROR for report in blocking):
        code = EXIT_ERROR
    else:
        code = EXIT_OK
    return Summary(
        **{"pass": counts[Status.PASS]},
        fail=counts[Status.FAIL],
        quarantine=counts[Status.QUARANTINE],
        quarantined=counts[Status.QUARANTINED],
        error=counts[Status.ERROR],
        exit_code=code,
    )


def collect(
    config: LoadedConfig,
    specs: Sequence[EvalSpec],
    options: RunOptions,
    *,
    cwd: Path,
    progress: Callable[[Task, TrialRecord], None] | None = None,
) -> Probed:
    """The probe stage: run the trials of every selected, non-quarantined eval."""
    settings = config.settings
    started = now()
    seed = base_seed(settings.seed, options.seed)
    quarantined = Registry(cwd / settings.registry).read()
    chosen = shard(specs, options.shard)
    probed = [s for s in chosen if options.include_quarantined or s.id not in quarantined]
    tasks = plan(probed, seed, options.k)
    grouped, complete = probe(tasks, concurrency=settings.concurrency, cwd=cwd, progress=progress)
    effective = {task.spec.id: task.spec for task in tasks}
    git = git_info(cwd)
    return Probed(
        base_seed=seed,
        started_at=started,
        finished_at=now(),
        complete=complete,
        shard=options.shard,
        git_sha=git["git_sha"],
        git_ref=git["git_ref"],
        specs=[effective.get(spec.id, spec) for spec in chosen],
        trials={spec.id: grouped.get(spec.id, []) for spec in probed},
        skipped=[spec.id for spec in chosen if spec.id not in effective],
    )


def conclude(
    config: LoadedConfig, parts: Sequence[Probed], *, mode: Literal["run", "gate"], cwd: Path
) -> Artefact:
    """The gate stage: decide every eval of the probe parts."""
    quarantined = Registry(cwd / config.settings.registry).read()
    reports = []
    for part in parts:
        for spec in part.specs:
            if spec.id not in part.trials:
                entry = quarantined.get(spec.id)
                if entry is not None:
                    reports.append(skipped(spec, entry))
                continue
            in_registry = spec.id in quarantined
            report = judge(spec, part.trials[spec.id], blocking=False if in_registry else None)
            if in_registry and report.status is Status.QUARANTINE:
                report = report.model_copy(update={"status": Status.QUARANTINED})
            reports.append(report)
    complete = all(part.complete for part in parts)
    first = parts[0]
    return Artefact(
        run=RunInfo(
            mode=mode,
            base_seed=first.base_seed,
            started_at=min(p.started_at for p in parts),
            finished_at=now() if mode == "gate" else first.finished_at,
            complete=complete,
            shard=first.shard if len(parts) == 1 else None,
            git_sha=first.git_sha,
            git_ref=first.git_ref,
        ),
        summary=summarise(reports, complete),
        evals=reports,
    )


def run(
    config: LoadedConfig,
    specs: Sequence[EvalSpec],
    options: RunOptions,
    *,
    cwd: Path,
    progress: Callable[[Task, TrialRecord], None] | None = None,
) -> Outcome:
    """`firewall run`: probe and gate the selected evals, then record what was decided."""
    part = collect(config, specs, options, cwd=cwd, progress=progress)
    artefact = conclude(config, [part], mode="run", cwd=cwd)
    return record(config, artefact, options, cwd=cwd)


def gate(config: LoadedConfig, paths: Sequence[Path], options: RunOptions, *, cwd: Path) -> Outcome:
    """`firewall gate`: merge probe parts, decide, and record."""
    parts = load_parts(paths)
    artefact = conclude(config, parts, mode="gate", cwd=cwd)
    return record(config, artefact, options, cwd=cwd)


def record(config: LoadedConfig, artefact: Artefact, options: RunOptions, *, cwd: Path) -> Outcome:
    """The side effects of a decided run: artefact, new quarantines, history."""
    settings = config.settings
    report_path = options.report or cwd / settings.report
    fresh = [r for r in artefact.evals if r.status is Status.QUARANTINE]
    if options.dry_run:
        return Outcome(artefact, [r.id for r in fresh], None)
    artefact.write(report_path)
    if not artefact.run.complete:
        return Outcome(artefact, [], report_path)
    added: list[str] = []
    if fresh:
        with Registry(cwd / settings.registry).edit() as entries:
            for report in fresh:
                if report.id not in entries:
                    entries[report.id] = quarantine_entry(
                        report, settings, at=artefact.run.started_at, git_sha=artefact.run.git_sha
                    )
                    added.append(report.id)
    history.append(cwd / settings.history, history.rows_for(artefact))
    return Outcome(artefact, added, report_path)
