"""`firewall nightly`: the run's stages with the lifecycle as its record step.

    gather candidates -> probe -> judge -> lifecycle (the keeper's: streaks, releases,
    adoptions, dismissals) -> verdict -> record -> present -> publish

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
    DEFAULT_FENCE,
    Candidate,
    Entry,
    Event,
    advance,
    quarantine_entry,
)
from firewall.pipeline import effects, suites, verdict
from firewall.pipeline.context import Context
from firewall.pipeline.defined import kind_of
from firewall.pipeline.run import Kept, keep, probe_part
from firewall.pipeline.stages import TrialCounter, judge, outliving, run_info
from firewall.policy import Status
from firewall.runner.seeds import RANDOM, BaseSeed
from firewall.spec import EvalSpec
from firewall.store.parts import Probed


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
        """The artefact's, as for a run: the terminal, the report, the step's outputs and the
        process agree (0 whatever was found, 130 when interrupted)."""
        return self.artefact.summary.exit_code


@outliving()
def nightly(
    ctx: Context,
    options: NightlyOptions,
    *,
    progress: TrialCounter | None = None,
    present: Callable[[NightlyResult], None] | None = None,
) -> NightlyResult:
    """gather -> probe -> judge -> lifecycle (the keeper's) -> verdict -> record -> present
    -> publish: each a function below, or one call to the keeper."""
    ctx.dry_run(options.dry_run)
    before = ctx.entries()
    candidates = gather_candidates(ctx, issues=options.issues)
    wanted = set(before) | set(candidates)
    part = probe_part(
        ctx,
        targets := _targets(ctx, wanted, probe_all=options.probe_all),
        targets,
        seed=options.seed,
        k=options.k or ctx.settings.nightly.k,
        progress=progress,
        rejudge_always=wanted,  # quarantined: whether the judge is why is asked every night
    )
    reports = _judge(ctx, part, wanted, probe_all=options.probe_all)
    events = _missing(ctx, before, part, reports)
    failure: FirewallError | None = None  # the registry's, when it could not be changed
    if part.complete:  # an interrupted night counts nothing
        try:
            events += ctx.keeper.record_nightly(
                lambda current: _lifecycle(
                    ctx, current, reports, at=part.started_at, candidates=candidates
                ),
                at=part.started_at,
                candidates=candidates,
            )
        except FirewallError as exc:
            failure = exc
    artefact = _verdict(part, reports, events)
    report_path = options.report or ctx.cwd / ctx.settings.report
    if failure is not None:
        # As for a run: a registry that cannot be changed stops the record before any other
        # file; the probes are shown all the same, then the error (exit 2).
        if present is not None:
            present(NightlyResult(artefact, events, report_path, dry_run=False, written=False))
        raise RegistryError(
            f"{failure}; so that the files agree, tonight wrote nothing else (no report, no "
            "history, no issue updated): run it again once that is fixed"
        )
    kept = keep(ctx, artefact, report_path) if ctx.keeper.keeps else Kept()
    result = NightlyResult(
        artefact,
        events,
        report_path,
        dry_run=not ctx.keeper.keeps,
        problems=kept.problems,
        written=kept.error is None,
    )
    if present is not None:
        present(result)
    effects.publish_nightly(ctx, result, before, candidates, issues=options.issues)
    if kept.error is not None:
        raise kept.error
    return result


def _targets(ctx: Context, wanted: Collection[str], *, probe_all: bool) -> list[EvalSpec]:
    """What tonight probes: every quarantined eval and candidate (a suite for its cases),
    or every eval with ``--all``."""
    return [
        spec
        for spec in ctx.specs
        if probe_all or spec.id in wanted or any(suites.holds(spec, eval_id) for eval_id in wanted)
    ]


def _judge(
    ctx: Context, part: Probed, wanted: Collection[str], *, probe_all: bool
) -> dict[str, EvalReport]:
    """Each probed eval decided, never blocking (a suite's cases: only the wanted ones),
    and scrubbed: the lifecycle quotes them in entries, issues and the state branch."""
    return {
        spec.id: ctx.secrets.scrub_model(judge(spec, part.trials[spec.id], blocking=False))
        for spec in part.specs
        if spec.id in part.trials and (probe_all or spec.suite is None or spec.id in wanted)
    }


def _verdict(part: Probed, reports: Mapping[str, EvalReport], events: list[Event]) -> Artefact:
    said = {event.eval_id: event for event in events}
    final = [verdict.tonight(reports[s.id], said.get(s.id)) for s in part.specs if s.id in reports]
    return Artefact(
        run=run_info([part], mode="nightly", finished_at=part.finished_at),
        summary=verdict.summarise(final, part.complete, blocks=False),  # it never blocks
        evals=final,
    )


def gather_candidates(ctx: Context, *, issues: bool) -> dict[str, Candidate]:
    """The instabilities pull requests found, waiting for tonight's word: those on the
    state branch and those on issues, the newer of the two where both hold one."""
    if not ctx.keeper.reviewed:
        return {}
    found = ctx.keeper.candidates()
    for eval_id, candidate in effects.open_candidates(ctx, issues=issues).items():
        if eval_id not in found or found[eval_id].at < candidate.at:
            found[eval_id] = candidate
    return found


def _missing(
    ctx: Context, before: Mapping[str, Entry], part: Probed, reports: Mapping[str, EvalReport]
) -> list[Event]:
    """The quarantined ids tonight could not re-probe, each with why and what to do: gone
    from the project, a case its suite ran without, or a pytest test (the nightly has no
    pytest session to run it in)."""
    ran = {spec.suite for spec in part.specs if spec.suite is not None}
    events = []
    for eval_id in sorted(before):
        if eval_id in reports:
            continue
        kind = kind_of(ctx.specs, eval_id, ctx.cwd)
        release = f"`firewall quarantine release {eval_id}`"
        if kind == "eval" or (kind == "case" and not part.complete):
            continue  # probed, or a probe cut short: nothing to say of it
        if kind == "pytest":
            message = (
                f"is a pytest test, which the nightly cannot re-probe: probe it with "
                f"`pytest --firewall-k {ctx.settings.nightly.k} {_pytest_args(eval_id)}` and, once "
                f"stable, release it with {release}"
            )
        elif kind == "case" and any(suites.holds(s, eval_id) for s in ctx.specs if s.id in ran):
            message = f"was not among its suite's cases tonight; release it with {release}"
        else:
            message = f"is quarantined but no longer defined; release it with {release}"
        events.append(Event(eval_id, "missing", message))
    return events


def _pytest_args(eval_id: str) -> str:
    """pytest's arguments that select a test by its eval id: its file, and ``-k`` with its
    function's name where the id keeps it whole (every parameter of it, then)."""
    parts = eval_id.split("/")
    at = next(i for i, part in enumerate(parts) if part.endswith(".py")) + 1
    file, names = "/".join(parts[:at]), parts[at:]
    name = names[-1].split(".", 1)[0] if names else ""
    return f"{file} -k {name}" if name.isidentifier() else file


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
    # The collapse fence each eval's release test counts by: none for a pass-rate eval.
    fences = {s.id: 0.0 if s.min_pass_rate else s.outlier_fence for s in ctx.specs}
    for eval_id, report in reports.items():
        entry = current.get(eval_id)
        if entry is not None:
            kept, event = advance(
                entry,
                report,
                release_after=settings.nightly.release_after,
                at=at,
                outlier_fence=fences.get(eval_id, DEFAULT_FENCE),
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
