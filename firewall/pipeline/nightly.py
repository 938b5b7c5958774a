"""`firewall nightly`: the run's stages with the lifecycle as its record step.

    plan -> probe -> judge -> lifecycle (streaks, releases) -> record -> present -> publish

Nightly never blocks: whatever it finds, its exit code is 0 (130 when
interrupted, and then nothing is counted). Its probes use `[nightly] k` trials
and a fresh base seed unless told otherwise.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from firewall.artefact import Artefact, EvalReport
from firewall.errors import ExitCode, FirewallError, RegistryError
from firewall.lifecycle import (
    RELEASE_CLEAN_TRIALS,
    Entry,
    Event,
    advance,
    progress_of,
    quarantine_entry,
)
from firewall.pipeline import effects, suites
from firewall.pipeline.context import Context
from firewall.pipeline.run import Kept, keep, probe_part
from firewall.pipeline.stages import Progress, judge, run_info, summarise
from firewall.policy import Status
from firewall.runner.seeds import RANDOM, BaseSeed


@dataclasses.dataclass(frozen=True)
class NightlyOptions:
    k: int | None = None  # None: `[nightly] k`
    seed: BaseSeed = RANDOM
    probe_all: bool = False
    dry_run: bool = False
    report: Path | None = None
    issues: bool = True


@dataclasses.dataclass(frozen=True)
class NightlyResult:
    artefact: Artefact
    events: list[Event]
    report_path: Path
    dry_run: bool
    problems: list[str] = dataclasses.field(default_factory=list)  # warnings, e.g. the history
    written: bool = True  # False: the report could not be written (the error follows)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.artefact.run.complete else ExitCode.INTERRUPTED


def nightly(
    ctx: Context,
    options: NightlyOptions,
    *,
    progress: Progress | None = None,
    present: Callable[[NightlyResult], None] | None = None,
) -> NightlyResult:
    settings = ctx.settings
    before = ctx.entries()
    # In CI, the instabilities pull requests found wait on their issues for tonight's word.
    candidates = effects.open_candidates(ctx, issues=options.issues) if ctx.reviewed else {}
    known = {spec.id for spec in ctx.specs}
    events = [
        Event(
            eval_id,
            "missing",
            f"is quarantined but no longer defined; release it with "
            f"`firewall quarantine release {eval_id}`",
        )
        for eval_id in sorted(before)
        if eval_id not in known
    ]
    wanted = set(before) | set(candidates)
    targets = [
        spec
        for spec in ctx.specs
        if options.probe_all
        or spec.id in wanted
        or any(suites.holds(spec, eval_id) for eval_id in wanted)  # a suite: its cases
    ]
    part = probe_part(
        ctx,
        targets,
        targets,
        seed=options.seed,
        k=options.k or settings.nightly.k,
        progress=progress,
    )
    reports = {
        spec.id: judge(spec, part.trials[spec.id], blocking=False)
        for spec in part.specs
        if spec.id in part.trials
        and (options.probe_all or spec.suite is None or spec.id in wanted)  # a suite's others
    }
    at = part.started_at
    failure: FirewallError | None = None  # the registry's, when it could not be changed
    if part.complete and not options.dry_run and ctx.reviewed:
        current = ctx.entries()
        happened = _lifecycle(ctx, current, reports, at=at, candidates=candidates)
        # A release waits for its pull request: until the default branch drops the entry,
        # it is released again each stable night, and withdrawn by an unstable one.
        waiting = {
            event.eval_id: progress_of(before[event.eval_id]).model_copy(
                update={
                    "stable_streak": settings.nightly.release_after,
                    "clean_trials": RELEASE_CLEAN_TRIALS,
                    "last_probe": at,
                }
            )
            for event in happened
            if event.kind == "released"
        }
        try:
            ctx.save_reviewed(before, current, waiting=waiting)
        except FirewallError as exc:
            failure = exc
        else:
            events += happened
    elif part.complete and not options.dry_run:
        try:
            with ctx.edit_registry() as current:
                happened = _lifecycle(ctx, current, reports, at=at)
        except FirewallError as exc:
            failure = exc
        else:
            events += happened
    elif part.complete:
        events += _lifecycle(ctx, dict(before), reports, at=at, candidates=candidates)
    final = [
        _with_nightly_status(reports[spec.id], events) for spec in part.specs if spec.id in reports
    ]
    artefact = Artefact(
        run=run_info([part], mode="nightly", finished_at=part.finished_at),
        # Nightly never blocks: whatever it found, it exits 0.
        summary=summarise(final, part.complete).model_copy(update={"exit_code": ExitCode.OK}),
        evals=final,
    )
    report_path = options.report or ctx.cwd / settings.report
    if failure is not None:
        # As for a run: a registry that cannot be changed stops the record before any other
        # file; the probes are shown all the same, then the error (exit 2).
        if present is not None:
            present(NightlyResult(artefact, events, report_path, dry_run=False, written=False))
        raise RegistryError(
            f"{failure}; so that the files agree, tonight wrote nothing else (no report, no "
            "history, no issue updated): run it again once that is fixed"
        )
    kept = Kept() if options.dry_run else keep(ctx, artefact, report_path)
    result = NightlyResult(
        artefact,
        events,
        report_path,
        dry_run=options.dry_run,
        problems=kept.problems,
        written=kept.error is None,
    )
    if present is not None:
        present(result)
    effects.publish_nightly(ctx, result, before, candidates, issues=options.issues)
    if kept.error is not None:
        raise kept.error
    return result


def _lifecycle(
    ctx: Context,
    current: dict[str, Entry],
    reports: Mapping[str, EvalReport],
    *,
    at: dt.datetime,
    candidates: Collection[str] = (),
) -> list[Event]:
    """Count each probe toward its entry's release; adopt what `--all` found unstable and
    the candidates the default branch confirms; dismiss the ones it does not."""
    settings = ctx.settings
    happened = []
    for eval_id, report in reports.items():
        entry = current.get(eval_id)
        if entry is not None:
            kept, event = advance(
                entry, report, release_after=settings.nightly.release_after, at=at
            )
            if kept is None:
                del current[eval_id]
            else:
                current[eval_id] = kept
            happened.append(event)
        elif report.status is Status.QUARANTINE:
            where = "confirmed on the default branch" if eval_id in candidates else "newly unstable"
            entry = quarantine_entry(report, settings, at=at, git_sha=ctx.git.sha)
            current[eval_id] = entry.model_copy(update={"reason": f"{where}: {report.reason}"})
            happened.append(Event(eval_id, "quarantined", f"{where}: {report.reason}"))
        elif eval_id in candidates and report.status is not Status.ERROR:
            happened.append(
                Event(
                    eval_id, "dismissed", f"not reproduced on the default branch: {report.reason}"
                )
            )
    return happened


def _with_nightly_status(report: EvalReport, events: list[Event]) -> EvalReport:
    """A still-quarantined eval reads QUARANTINED with its streak; a released one its verdict."""
    event = next((e for e in events if e.eval_id == report.id), None)
    if event is None or event.kind in ("released", "quarantined"):
        return report
    return report.model_copy(update={"status": Status.QUARANTINED, "reason": event.message})
