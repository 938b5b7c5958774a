"""`firewall run`, `probe` and `gate` as lists of stages over one context.

    run:    plan -> probe -> judge -> record -> present -> publish -> exit code
    probe:  plan -> probe -> write the part
    gate:   read the parts -> judge -> record -> present -> publish -> exit code

``present`` is the caller's (the terminal table, or the artefact as JSON), so
that what the command prints comes before what GitHub is told.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from firewall import regression
from firewall.artefact import Artefact, EvalReport
from firewall.constants import BASELINE_RUNS, BASELINE_WINDOW
from firewall.discovery import Shard
from firewall.errors import (
    ExitCode,
    FirewallError,
    HistoryWriteError,
    LockError,
    RegistryError,
    WriteError,
)
from firewall.pipeline import affected, effects, shards, suites, trust, verdict
from firewall.pipeline.context import Context
from firewall.pipeline.stages import TrialCounter, conclude, outliving, plan, probe
from firewall.policy import Status
from firewall.regression import Judgement, RunMean, compare
from firewall.runner import Early, Schedule
from firewall.runner.python import sync_fanout
from firewall.runner.reads import Reads
from firewall.runner.seeds import BaseSeed
from firewall.spec import EvalSpec, warnings_for
from firewall.store.history import rows_for, sample_sd
from firewall.store.parts import Probed, gaps, load_parts
from firewall.store.reports import write_report


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """What the command line asked of a run, parsed into types at the edge."""

    k: int | None = None
    seed: BaseSeed | None = None  # None: the config's `seed`
    include_quarantined: bool = False
    shard: Shard | None = None
    dry_run: bool = False
    report: Path | None = None  # None: the config's `report`
    issues: bool = True  # False: --no-issues
    allow_partial: bool = False  # gate: decide parts with a shard missing or mixed seeds
    allow_stale: bool = False  # gate: decide parts probed on another commit than the checkout's
    affected: bool | None = None  # --affected / --all; None: a pull request's run is (§4)


@dataclasses.dataclass(frozen=True)
class RunResult:
    """A decided run and what it changed on disk (or, in a dry run, would have)."""

    artefact: Artefact
    added: list[str]  # evals newly written to the registry
    report_path: Path
    dry_run: bool
    # CI: the candidates, with where each was recorded (or why it was not); their issues next.
    candidates: dict[str, str] = dataclasses.field(default_factory=dict)
    # A file that could not be written: the command's error, raised once the result is
    # shown. ``halted``: it was the registry, and nothing else was written or published.
    error: FirewallError | None = None
    halted: bool = False
    problems: list[str] = dataclasses.field(default_factory=list)  # warnings, e.g. the history

    @property
    def exit_code(self) -> ExitCode:
        return self.artefact.summary.exit_code

    @property
    def written(self) -> bool:
        """Whether the report was written: not when a file's failure is the command's error."""
        return self.error is None


Present = Callable[[RunResult], None]


@outliving()
def run(
    ctx: Context,
    options: RunOptions,
    *,
    progress: TrialCounter | None = None,
    present: Present | None = None,
) -> RunResult:
    """`firewall run`: probe and gate the selected evals, record, present, publish."""
    ctx.dry_run(options.dry_run)
    noted: Reads = {}  # what each eval target read, for its fingerprint
    with early_pool(ctx, _chosen(ctx, options), reads=True) as early:
        candidates = plan(would_probe(ctx, options), 0, options.k).specs  # as they would be
        choice = affected.plan(ctx, candidates, asked=options.affected)
        leave = choice.carried if choice is not None else {}
        part = collect(ctx, options, progress=progress, leave=leave, reads=noted, early=early)
    unvouched(ctx, part.specs)
    artefact = conclude([part], ctx.entries(), mode="run", finished_at=part.finished_at)
    artefact, first = against_default_branch(ctx, artefact, part.specs, looks=regression.LOOKS)
    unclear = [eval_id for eval_id, judgement in first.items() if judgement.more_trials]
    if unclear and part.complete:
        # Too few trials to tell the drop from max_drop, and more would tell: up to max_k,
        # then a second look at those alone, with the other half of the level.
        part = more_trials(ctx, part, unclear, progress=progress, reads=noted)
        artefact = conclude([part], ctx.entries(), mode="run", finished_at=part.finished_at)
        artefact, _ = against_default_branch(
            ctx, artefact, part.specs, looks=regression.LOOKS, earlier=first
        )
    evals = affected.stamp(artefact.evals, part.specs, noted, ctx.cwd, ctx.env)
    artefact = artefact.model_copy(update={"evals": evals})
    if choice is not None:
        carried = affected.carried_reports(ctx, choice, candidates)
        artefact = affected.merge(artefact, choice, carried)
    return _finish(ctx, artefact, options, present)


@outliving()
def gate(
    ctx: Context, paths: Sequence[Path], options: RunOptions, *, present: Present | None = None
) -> RunResult:
    """`firewall gate`: merge probe parts, decide them on the configuration, record, present,
    publish. A part is evidence of trials, not of settings (``firewall.pipeline.trust``)."""
    ctx.dry_run(options.dry_run)
    vouched = trust.vouch(
        paths,
        load_parts(paths, allow_partial=options.allow_partial),
        ctx.specs,
        ctx.settings,
        head=ctx.git.sha,
        allow_partial=options.allow_partial,
        allow_stale=options.allow_stale,
    )
    for overridden in vouched.overridden:
        ctx.notice(f"{overridden}: decided on the configuration's")
    parts = vouched.parts
    specs = [spec for part in parts for spec in part.specs]
    unvouched(ctx, specs)
    artefact = conclude(
        parts,
        ctx.entries(),
        mode="gate",
        finished_at=ctx.clock(),
        # A plugin's part: a test quarantined as one of these suites' cases is honoured.
        suites=[e.id for e in ctx.settings.evals if e.result == "junit"],
    )
    lacks = [*gaps(paths, parts), *vouched.unknown]
    if lacks or vouched.stale:
        run = artefact.run.model_copy(update={"partial": lacks, "stale": vouched.stale})
        artefact = artefact.model_copy(update={"run": run})
    artefact, _ = against_default_branch(ctx, artefact, specs)
    artefact = shards.gated(
        ctx, artefact, parts, vouched.carried, allow_partial=options.allow_partial
    )
    return _finish(ctx, artefact, options, present)


def unvouched(ctx: Context, specs: Sequence[EvalSpec]) -> None:
    """Say once, apart from the table (which may cut a reason short), that a quarantine is
    not carried over to a case known by its place alone (``suites.registry_entry``)."""
    entries = ctx.entries()
    for spec in specs:
        if spec.identity == "position" and spec.id in entries:
            ctx.notice(
                f"{spec.id}: its quarantine is not honoured: the case is known by its place "
                "in its suite's report alone, and a test inserted before it would take it "
                "over; give the test a name of its own (promptfoo: a description)"
            )


@outliving()
def probe_to(
    ctx: Context, options: RunOptions, out: Path, *, progress: TrialCounter | None = None
) -> Probed:
    """`firewall probe`: the trials only, written to ``out``; no decision, no other file.
    The part keeps what the workers read and what an affected-only probe carried, for
    its gate to fingerprint and to check (``shards.gated``)."""
    noted: Reads = {}
    with early_pool(ctx, _chosen(ctx, options), reads=True) as early:
        candidates = plan(would_probe(ctx, options), 0, options.k).specs  # as they would be
        choice = affected.plan(ctx, candidates, asked=options.affected)
        leave = choice.carried if choice is not None else {}
        part = collect(ctx, options, progress=progress, leave=leave, reads=noted, early=early)
    part = shards.evidence(part, candidates, choice, noted, ctx.env, k=options.k)
    part.write(out)
    return part


def would_probe(ctx: Context, options: RunOptions) -> list[EvalSpec]:
    """The evals `run` and `probe` would probe: the selected shard, less what is quarantined."""
    quarantined = ctx.entries()
    return [
        s for s in _chosen(ctx, options) if options.include_quarantined or s.id not in quarantined
    ]


def _chosen(ctx: Context, options: RunOptions) -> list[EvalSpec]:
    return options.shard.pick(ctx.specs) if options.shard else list(ctx.specs)


def early_pool(ctx: Context, specs: Sequence[EvalSpec], *, reads: bool = False) -> Early:
    """The pool workers of the async evals among ``specs``, booting from now on, while the
    registry, the state branch and the history are read and the probe is planned."""
    return Early(
        specs,
        concurrency=ctx.settings.concurrency,
        cwd=ctx.cwd,
        share_token=ctx.settings.github.share_token,
        reads=reads,
    )


def collect(
    ctx: Context,
    options: RunOptions,
    *,
    progress: TrialCounter | None = None,
    leave: Collection[str] = (),
    reads: Reads | None = None,
    early: Early | None = None,
) -> Probed:
    """The probe stage of `run` and `probe`: the selected shard, less what is quarantined,
    less the evals an affected-only run carries (``leave``). ``early``: pool workers the
    caller started booting (made with ``reads`` alike); else they start here."""
    chosen = [s for s in _chosen(ctx, options) if s.id not in leave]
    if early is not None:
        return _collect(ctx, options, chosen, early, progress, reads)
    with early_pool(ctx, chosen, reads=reads is not None) as booting:
        return _collect(ctx, options, chosen, booting, progress, reads)


def _collect(
    ctx: Context,
    options: RunOptions,
    chosen: list[EvalSpec],
    early: Early,
    progress: TrialCounter | None,
    reads: Reads | None,
) -> Probed:
    quarantined = ctx.entries()
    probed = [s for s in chosen if options.include_quarantined or s.id not in quarantined]
    for spec in probed:  # what `firewall list` warns of, said where it costs trials
        for warning in warnings_for(spec):
            ctx.notice(f"{spec.id}: {warning}")
    fanout = sync_fanout(probed, ctx.settings.concurrency)
    if fanout is not None:
        ctx.notice(fanout)
    return probe_part(
        ctx,
        chosen,
        probed,
        seed=options.seed or BaseSeed.parse(ctx.settings.seed),
        k=options.k,
        shard=options.shard,
        progress=progress,
        reads=reads,
        early=early,
    )


def probe_part(
    ctx: Context,
    chosen: Sequence[EvalSpec],
    probed: Sequence[EvalSpec],
    *,
    seed: BaseSeed,
    k: int | None,
    shard: Shard | None = None,
    progress: TrialCounter | None = None,
    reads: Reads | None = None,
    early: Early | None = None,
    rejudge_always: Collection[str] = (),
) -> Probed:
    """Run the trials of ``probed`` (some of ``chosen``) and keep them as a part;
    ``rejudge_always``: evals with a judge whose outputs are judged again whatever
    they showed (the nightly's quarantined ones)."""
    started = ctx.clock()
    # The commit the trials run on, read before them: its git calls then overlap the pool
    # workers' boot instead of standing between the last trial and the decision.
    git = ctx.git
    base_seed = seed.draw()
    schedule = plan(probed, base_seed, k)
    grouped, complete = probe(
        schedule,
        concurrency=ctx.settings.concurrency,
        cwd=ctx.cwd,
        progress=progress,
        share_token=ctx.settings.github.share_token,
        reads=reads,
        early=early,
        rejudge_always=rejudge_always,
    )
    effective = {spec.id: spec for spec in schedule.specs}
    # Suites become their cases here, before anything is decided or written.
    specs, grouped = suites.expand([effective.get(s.id, s) for s in chosen], grouped)
    return Probed(
        base_seed=base_seed,
        started_at=started,
        finished_at=ctx.clock(),
        complete=complete,
        shard=str(shard) if shard else None,
        git_sha=git.sha,
        git_ref=git.ref,
        specs=specs,
        trials={
            spec.id: grouped.get(spec.id, [])
            for spec in specs
            if spec.id in grouped or spec.id in effective
        },
        skipped=[spec.id for spec in chosen if spec.id not in effective],
    )


def more_trials(
    ctx: Context,
    part: Probed,
    ids: Collection[str],
    *,
    progress: TrialCounter | None = None,
    reads: Reads | None = None,
) -> Probed:
    """The part with the evals ``ids`` probed on to their ``max_k`` trials."""
    specs = [spec for spec in part.specs if spec.id in ids]
    schedule = Schedule(
        specs, part.base_seed, wanted=lambda spec, trials: spec.max_k, start=part.trials
    )
    grouped, complete = probe(
        schedule,
        concurrency=ctx.settings.concurrency,
        cwd=ctx.cwd,
        progress=progress,
        share_token=ctx.settings.github.share_token,
        reads=reads,
    )
    return part.model_copy(
        update={
            "trials": {**part.trials, **grouped},
            "complete": complete,
            "finished_at": ctx.clock(),
        }
    )


def against_default_branch(
    ctx: Context,
    artefact: Artefact,
    specs: Sequence[EvalSpec],
    *,
    looks: int = 1,
    earlier: Mapping[str, Judgement] | None = None,
) -> tuple[Artefact, dict[str, Judgement]]:
    """The regression stage: evals that opted in (``regression = { max_drop = D }``) are
    compared with the default branch's recent runs, when this run is not on it.

    ``looks``: how many times this run may look (``run`` looks again after adding trials
    to the unclear evals, ``gate`` once); each look tests at LEVEL / looks. ``earlier``:
    the first look's judgements; this second look re-judges only the evals they marked
    for more trials, and keeps the others' word. Returns the judgements with the artefact.
    """
    opted = {spec.id: spec.regression.max_drop for spec in specs if spec.regression is not None}
    if not opted:
        return artefact, {}
    base = ctx.checkout.default_branch
    if base is None or ctx.checkout.on_default_branch:
        return artefact, {}
    again = None if earlier is None else {i for i, j in earlier.items() if j.more_trials}
    probed = _comparable(artefact, opted, again)
    baselines, statuses = _baselines(ctx, base, set(probed))
    comparisons = {
        eval_id: compare(_run_mean(report), baselines[eval_id][-BASELINE_RUNS:], opted[eval_id])
        for eval_id, report in probed.items()
    }
    max_k = {spec.id: spec.max_k for spec in specs if spec.id in probed}
    judgements = {
        **(earlier or {}),
        **regression.judge(
            comparisons, base, level=regression.LEVEL / looks, max_k=max_k if looks > 1 else None
        ),
    }
    if again is not None:  # a second look is the last: nothing more is marked for trials
        judgements = {i: dataclasses.replace(j, more_trials=False) for i, j in judgements.items()}
    return _with_verdicts(artefact, judgements, opted, statuses, base), judgements


def _comparable(
    artefact: Artefact, opted: Mapping[str, float], again: set[str] | None
) -> dict[str, EvalReport]:
    """The opted-in evals this look compares, by id: decided, with trials, and on a
    second look only those the first marked for more trials."""
    compared = (Status.PASS, Status.FAIL, Status.QUARANTINE)
    return {
        r.id: r
        for r in artefact.evals
        if r.id in opted and r.status in compared and r.trials and (again is None or r.id in again)
    }


def _with_verdicts(
    artefact: Artefact,
    judgements: Mapping[str, Judgement],
    opted: Mapping[str, float],
    statuses: Mapping[str, list[str]],
    base: str,
) -> Artefact:
    """The artefact with each judged eval's report given its verdict against the default
    branch, and the summary made again."""
    reports = [
        verdict.against_default_branch(
            report,
            judgements[report.id],
            opted[report.id],
            stable_runs=_stable_runs(statuses.get(report.id, [])),
            base=base,
        )
        if report.id in judgements and report.id in opted
        else report
        for report in artefact.evals
    ]
    return artefact.model_copy(
        update={"evals": reports, "summary": verdict.summarise(reports, artefact.run.complete)}
    )


STABLE_RUNS = 5  # the default branch's last runs that must all be stable for "stable there"


def _stable_runs(statuses: Sequence[str]) -> int:
    """How many of the default branch's last runs of an eval were stable, when the last
    STABLE_RUNS all were (then an unstable pull request is a regression); else 0."""
    recent = statuses[-BASELINE_RUNS:]
    unstable = (Status.QUARANTINE.value, Status.QUARANTINED.value, Status.ERROR.value)
    if len(recent) < STABLE_RUNS or any(s in unstable for s in recent[-STABLE_RUNS:]):
        return 0
    return sum(s not in unstable for s in recent)


def _baselines(
    ctx: Context, base: str, ids: set[str]
) -> tuple[dict[str, list[RunMean]], dict[str, list[str]]]:
    """The default branch's recent runs of each eval, oldest first: those a comparison can
    use, and every run's status (was the eval stable there?)."""
    baselines: dict[str, list[RunMean]] = {eval_id: [] for eval_id in ids}
    statuses: dict[str, list[str]] = {eval_id: [] for eval_id in ids}
    for row in ctx.history.recent(ids, since=ctx.clock() - BASELINE_WINDOW):
        if row.git_ref != f"refs/heads/{base}" or row.mode not in ("run", "gate", "nightly"):
            continue
        statuses[row.eval_id].append(row.status)
        if row.mean is not None and row.sd is not None and row.n >= 2:
            baselines[row.eval_id].append(RunMean(row.mean, row.sd, row.n))
    return baselines, statuses


def _run_mean(report: EvalReport) -> RunMean:
    scores = [t.score for t in report.trials if t.error is None and t.score is not None]
    return RunMean(
        statistics.fmean(scores), sample_sd(scores) if len(scores) > 1 else 0.0, len(scores)
    )


def record(ctx: Context, artefact: Artefact, options: RunOptions) -> RunResult:
    """The files a decided run changes: what its keeper keeps, the artefact, the history.

    The keeper comes first: a laptop writes new quarantines to the registry, CI
    records them as candidates on the state branch, a dry run keeps nothing (and
    writes no file at all). An interrupted run keeps no quarantine and writes its
    artefact, marked incomplete. A registry that cannot be changed stops the record
    there: no report, no history row, nothing published, so that the files never
    disagree about what was quarantined (``halted``, and the error). What could not
    be written after it is the result's ``error`` or ``problems`` (``keep``).
    """
    report_path = options.report or ctx.cwd / ctx.settings.report
    keeper = ctx.keeper
    try:
        recorded = keeper.record_run(artefact)
    except FirewallError as exc:  # unreadable, read-only, locked, or the write failed
        error = RegistryError(
            f"{exc}; so that the files agree, this run wrote nothing else (no report, "
            "no history, nothing for GitHub): run it again once that is fixed"
        )
        return RunResult(artefact, [], report_path, dry_run=False, error=error, halted=True)
    kept = keep(ctx, artefact, report_path) if keeper.keeps else Kept()
    return RunResult(
        artefact,
        recorded.added,
        report_path,
        dry_run=not keeper.keeps,
        candidates=recorded.candidates,
        error=kept.error,
        problems=kept.problems,
    )


@dataclasses.dataclass(frozen=True)
class Kept:
    """What ``keep`` could not write: the report's error, and warnings that change nothing."""

    error: FirewallError | None = None
    problems: list[str] = dataclasses.field(default_factory=list)


def keep(ctx: Context, artefact: Artefact, report_path: Path) -> Kept:
    """Write the artefact, and the history rows of a run that completed.

    Neither stops the other. A report that cannot be written is the command's
    error (exit 2, once the result is shown and published): it is the run's
    record, which CI uploads. A history that cannot be appended to is a warning:
    the decision does not depend on it, and its append leaves no partial row.
    """
    error: FirewallError | None = None
    problems: list[str] = []
    try:
        write_report(report_path, artefact)
    except WriteError as exc:
        error = exc
    if artefact.run.complete:
        try:
            ctx.history.append(rows_for(artefact))
        except (HistoryWriteError, LockError, WriteError) as exc:
            problems.append(f"{exc}; this run's decision and exit code stand")
    return Kept(error, problems)


def _finish(
    ctx: Context, artefact: Artefact, options: RunOptions, present: Present | None
) -> RunResult:
    # Decided: from here on every text is one the firewall may write or post (contract §7).
    result = record(ctx, ctx.secrets.scrub_model(artefact), options)
    if present is not None:
        present(result)  # the table first, also when a file could not be written
    if not result.halted:
        effects.publish_run(ctx, result, issues=options.issues)
    if result.error is not None:
        raise result.error
    return result
