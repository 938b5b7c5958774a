"""`firewall nightly`: re-probe the quarantined evals, count stable streaks, release.

Nightly never blocks: whatever it finds, the artefact's exit code is 0. Its
probes use `[nightly] k` trials and a fresh base seed unless told otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from firewall.artefact import Artefact, EvalReport, RunInfo
from firewall.config import LoadedConfig
from firewall.lifecycle import Event, advance, quarantine_entry
from firewall.pipeline.gitinfo import git_info
from firewall.pipeline.run import EXIT_OK, judge, plan, probe, summarise
from firewall.policy import Status
from firewall.runner import Task
from firewall.runner.seeds import fresh_base_seed
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec
from firewall.store import history
from firewall.store.registry import Entry, Registry
from firewall.timeutil import now


@dataclasses.dataclass(frozen=True)
class NightlyOptions:
    k: int | None = None
    seed: int | None = None
    probe_all: bool = False
    dry_run: bool = False
    report: Path | None = None


@dataclasses.dataclass
class NightlyOutcome:
    artefact: Artefact
    events: list[Event]
    report_path: Path | None


def nightly(
    config: LoadedConfig,
    specs: Sequence[EvalSpec],
    options: NightlyOptions,
    *,
    cwd: Path,
    progress: Callable[[Task, TrialRecord], None] | None = None,
) -> NightlyOutcome:
    settings = config.settings
    started = now()
    seed = fresh_base_seed() if options.seed is None else options.seed
    registry = Registry(cwd / settings.registry)
    entries = registry.read()
    known = {spec.id: spec for spec in specs}
    events = [
        Event(
            eval_id,
            "missing",
            f"is quarantined but no longer defined; release it with "
            f"`firewall quarantine release {eval_id}`",
        )
        for eval_id in sorted(entries)
        if eval_id not in known
    ]
    targets = [spec for spec in specs if options.probe_all or spec.id in entries]
    tasks = plan(targets, seed, options.k or settings.nightly.k)
    grouped, complete = probe(tasks, concurrency=settings.concurrency, cwd=cwd, progress=progress)
    effective = {task.spec.id: task.spec for task in tasks}
    reports = {
        spec.id: judge(effective[spec.id], grouped.get(spec.id, []), blocking=False)
        for spec in targets
    }

    def apply(current: dict[str, Entry]) -> list[Event]:
        happened = []
        for eval_id, report in reports.items():
            entry = current.get(eval_id)
            if entry is not None:
                kept, event = advance(
                    entry, report, release_after=settings.nightly.release_after, at=started
                )
                if kept is None:
                    del current[eval_id]
                else:
                    current[eval_id] = kept
                happened.append(event)
            elif report.status is Status.QUARANTINE:
                current[eval_id] = quarantine_entry(
                    report, settings, at=started, git_sha=git_info(cwd)["git_sha"]
                )
                happened.append(Event(eval_id, "quarantined", f"newly unstable: {report.reason}"))
        return happened

    if complete and not options.dry_run:
        with registry.edit() as current:
            events += apply(current)
    elif complete:
        events += apply(dict(entries))
    final = [_with_nightly_status(reports[spec.id], events) for spec in targets]
    summary = summarise(final, complete).model_copy(update={"exit_code": EXIT_OK})
    artefact = Artefact(
        run=RunInfo(
            mode="nightly",
            base_seed=seed,
            started_at=started,
            finished_at=now(),
            complete=complete,
            **git_info(cwd),
        ),
        summary=summary,
        evals=final,
    )
    report_path = None
    if not options.dry_run:
        report_path = options.report or cwd / settings.report
        artefact.write(report_path)
        if complete:
            history.append(cwd / settings.history, history.rows_for(artefact))
    return NightlyOutcome(artefact, events, report_path)


def _with_nightly_status(report: EvalReport, events: list[Event]) -> EvalReport:
    """A still-quarantined eval reads QUARANTINED with its streak; a released one its verdict."""
    event = next((e for e in events if e.eval_id == report.id), None)
    if event is None or event.kind in ("released", "quarantined"):
        return report
    return report.model_copy(update={"status": Status.QUARANTINED, "reason": event.message})
