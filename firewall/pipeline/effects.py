"""The publish stage: what a decided run tells the world, none of which may change the
decision. GitHub issues, annotations, the job summary and step outputs, review warnings.

Each failure here is reported (an annotation in a GitHub job, a warning elsewhere)
and the run's exit code stands. The GitHub modules (jinja2, and PyGithub behind
them) are imported only when a run talks to GitHub or runs inside Actions.

GitHub shows at most 10 annotations of each kind per step, so a command's
problems are gathered as it goes and printed once, at its end, in the same
budget as the evals' annotations (``annotations.annotations_for``): the
firewall's own warnings first and never cut, the evals' next, and a notice of
how many were left out and where they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from firewall import output
from firewall.constants import BASELINE_WINDOW
from firewall.lifecycle import Entry, overdue, quarantine_entry
from firewall.pipeline.keeper import candidate_of
from firewall.policy import Status

if TYPE_CHECKING:
    from firewall.artefact import Artefact
    from firewall.github.budget import Budget
    from firewall.github.issues import Candidate, IssueTracker, ProbeNumbers, ProposalKind
    from firewall.github.sync import Sync
    from firewall.pipeline.context import Context
    from firewall.pipeline.nightly import NightlyResult
    from firewall.pipeline.run import RunResult


def publish_run(ctx: Context, result: RunResult, *, issues: bool) -> None:
    """After `run` and `gate`: issues of new quarantines, the pull request's comment, then
    warnings and the Actions files."""
    problems = [*result.problems, *_sync_after_gate(ctx, result, issues=issues)]
    problems += _comment_on_pull_request(ctx, result, issues=issues)
    announce(ctx, result.artefact, None if result.dry_run else result.report_path, problems)


def publish_nightly(
    ctx: Context,
    result: NightlyResult,
    before: dict[str, Entry],
    candidates: Mapping[str, Candidate],
    *,
    issues: bool,
) -> None:
    """After `nightly`: status blocks, state-change comments, release closes, catch-up.

    In CI a release closes nothing yet: its issue stays open until the default
    branch's registry no longer holds the eval, that is until the proposal is
    merged; then the next nightly closes it as a stray. Candidates the default
    branch did not reproduce are dismissed, their issues closed with the numbers.
    """
    problems = list(result.problems)  # what the record step could not write, first
    tracker = _tracker(ctx, problems, dry_run=result.dry_run, issues=issues)
    if tracker is not None and result.artefact.run.complete:
        from firewall.github import sync

        after = dict(before) if result.dry_run else ctx.entries()
        events = result.events
        keep_open: set[str] = set(after)
        if ctx.keeper.reviewed:
            events = [e for e in events if e.kind not in ("released", "dismissed")]
            keep_open |= set(before) | set(candidates)
            dismissed = {
                e.eval_id: _reprobe(result.artefact, e.eval_id)
                for e in result.events
                if e.kind == "dismissed"
            }
            keep_open -= set(dismissed)
            reprobed = sync.after_reprobe(tracker, dismissed=dismissed)
            problems += _finish(ctx, reprobed, dry_run=result.dry_run)
            if reprobed.stopped:  # GitHub is out of reach: one warning for the night is enough
                announce(
                    ctx, result.artefact, None if result.dry_run else result.report_path, problems
                )
                return
        problems += _finish(
            ctx,
            sync.after_nightly(
                tracker,
                reports=result.artefact.evals,
                events=events,
                before=before,
                after=after,
                settings=ctx.settings,
                trends=ctx.trends(r.id for r in result.artefact.evals),
                quarantined=keep_open,
            ),
            dry_run=result.dry_run,
        )
    announce(ctx, result.artefact, None if result.dry_run else result.report_path, problems)


def publish_add(ctx: Context, eval_id: str, *, issues: bool) -> None:
    """After `quarantine add`: open (or comment on) the eval's issue."""
    problems: list[str] = []
    tracker = _tracker(ctx, problems, dry_run=False, issues=issues)
    entry = ctx.entries().get(eval_id)
    if tracker is not None and entry is not None:
        from firewall.github import sync

        problems += _finish(
            ctx, sync.after_add(tracker, eval_id, entry, ctx.settings), dry_run=False
        )
    report_problems(ctx, problems)


def publish_release(
    ctx: Context, eval_id: str, entry: Entry, reason: str | None, *, issues: bool
) -> None:
    """After `quarantine release`: comment on the eval's issue and close it."""
    problems: list[str] = []
    tracker = _tracker(ctx, problems, dry_run=False, issues=issues)
    if tracker is not None:
        from firewall.github import sync

        release = sync.after_release(tracker, eval_id, entry, reason)
        problems += _finish(ctx, release, dry_run=False)
    report_problems(ctx, problems)


def announce(
    ctx: Context, artefact: Artefact, report_path: Path | None, problems: Sequence[str] = ()
) -> None:
    """Overdue reviews, the command's problems, and in a GitHub job the annotations
    (problems among them, in one budget), summary and outputs.

    ``report_path`` is None in a dry run, which changes no file, the step's included.
    """
    entries = ctx.entries()
    for eval_id in overdue(entries, ctx.clock()):
        output.warn(f"{eval_id}: quarantine review is overdue; see `firewall status`")
    if not ctx.in_actions:
        for problem in problems:
            output.warn(problem)
        return
    from firewall.github.publish import publish

    publication = publish(
        artefact,
        report_path=report_path,
        entries=entries,
        trends=ctx.trends(r.id for r in artefact.evals),
        env=ctx.env,
        at=ctx.clock(),
        problems=problems,
        said=len(ctx.notices),  # annotated as they came, in the same budget
    )
    output.annotate(publication.annotations)


def report_problems(ctx: Context, problems: Sequence[str]) -> None:
    """Problems that change no decision, for a command that annotates nothing else:
    warning annotations in a GitHub job (at most a step's budget), else warnings."""
    if ctx.in_actions:
        from firewall.github.actions.annotations import PER_STEP, problem_annotations

        room = max(1, PER_STEP - len(ctx.notices))  # the notices were annotated as they came
        output.annotate(problem_annotations(problems, limit=room) if problems else [])
    else:
        for problem in problems:
            output.warn(problem)


def _sync_after_gate(ctx: Context, result: RunResult, *, issues: bool) -> list[str]:
    """Open or comment on the issues of new quarantines; catch up on the ones owed."""
    problems: list[str] = []
    tracker = _tracker(ctx, problems, dry_run=result.dry_run, issues=issues)
    if tracker is None or not result.artefact.run.complete:
        return problems
    from firewall.github import sync

    if result.candidates:  # CI: an instability waits on its issue for the nightly's word
        candidates = {
            report.id: candidate_of(result.artefact, report, pr=ctx.checkout.pull_request)
            for report in result.artefact.evals
            if report.id in result.candidates
        }
        owners = {r.id: r.owner for r in result.artefact.evals if r.id in candidates}
        recorded = sync.after_candidates(tracker, candidates, owners)
        problems += _finish(ctx, recorded, dry_run=result.dry_run)
        if recorded.stopped:  # GitHub is out of reach: one warning for the run is enough
            return problems
    entries = ctx.entries()
    new = [
        r
        for r in result.artefact.evals
        if r.status is Status.QUARANTINE and r.id not in result.candidates
    ]
    for report in new:  # a dry run wrote none of them, but says what it would do
        entries.setdefault(
            report.id, quarantine_entry(report, ctx.settings, at=ctx.clock(), git_sha=None)
        )
    return problems + _finish(
        ctx,
        sync.after_gate(
            tracker,
            reports=result.artefact.evals,
            new=[r.id for r in new],
            entries=entries,
            settings=ctx.settings,
            trends=ctx.trends(r.id for r in result.artefact.evals),
        ),
        dry_run=result.dry_run,
    )


def _comment_on_pull_request(ctx: Context, result: RunResult, *, issues: bool) -> list[str]:
    """In a pull-request job, its one comment (``[github] comment``): the counts and what
    changed against the default branch's latest probes in the history."""
    env = ctx.env
    if not (ctx.settings.github.comment and ctx.in_actions) or ctx.checkout.pull_request is None:
        return []
    talks = result.dry_run or not issues  # says what it would post, calls nothing
    if not talks and not (env.get("GITHUB_TOKEN") and env.get("GITHUB_REPOSITORY")):
        _no_token(ctx)
        return []
    if not ctx.checkout.pull_request:
        return [
            "the pull request's number is in neither GITHUB_REF nor GITHUB_EVENT_PATH: no comment"
        ]
    budget = github_budget(ctx)
    if budget.spent:  # its one warning said so
        return []
    from firewall.github.comment import publish_comment
    from firewall.report.comment import baseline

    default = ctx.checkout.default_branch
    ids = {report.id for report in result.artefact.evals}
    since = ctx.clock() - BASELINE_WINDOW
    # The latest status is all it needs of each eval: a row each, not a month of runs.
    rows = (
        ctx.history.recent(ids, since=since, last=1, ref=f"refs/heads/{default}") if default else []
    )
    return publish_comment(
        result.artefact,
        pull=ctx.checkout.pull_request,
        before=baseline(rows, default) if default else {},
        default_branch=default,
        env=env,
        dry_run=talks,
        echo=output.note,
        budget=budget,
    )


def _tracker(
    ctx: Context, problems: list[str], *, dry_run: bool, issues: bool
) -> IssueTracker | None:
    """The tracker this command uses, or None when it has no issues to keep (loads nothing)."""
    env = ctx.env
    wanted = dry_run or not issues or (env.get("GITHUB_TOKEN") and env.get("GITHUB_REPOSITORY"))
    if not ctx.settings.github.issues:
        return None
    if not wanted:
        _no_token(ctx)
        return None
    budget = github_budget(ctx)
    if budget.spent:  # its one warning said so: the rest of the command's GitHub work waits
        return None
    from firewall.configfile import repository_root
    from firewall.errors import IssueError
    from firewall.github import sync
    from firewall.github.markers import config_scope

    path = ctx.config.path  # two configurations in one repository keep their own issues
    scope = config_scope(path, repository_root(path.parent) if path else None)
    try:
        return sync.tracker_for(
            ctx.settings,
            env,
            dry_run=dry_run,
            no_issues=not issues,
            echo=output.note,
            budget=budget,
            scope=scope,
        )
    except IssueError as exc:
        problems.append(f"{exc}; no issue was opened or updated")
        return None


def _no_token(ctx: Context) -> None:
    """In a GitHub step without a token (a plain `run:` step: GitHub hands it none unless
    told to), the issues and the comment the config asks for cannot be; said once."""
    if ctx.in_actions:
        ctx.notice(
            "this step has no GITHUB_TOKEN (and GITHUB_REPOSITORY): no issue was opened or "
            "updated and no pull-request comment posted; hand it the token (`env: "
            "GITHUB_TOKEN: ${{ github.token }}`, with `permissions: issues: write`), use the "
            "action, or turn them off ([github] issues = false, comment = false)"
        )


def github_budget(ctx: Context) -> Budget:
    """The command's one time budget for GitHub (``[github] budget``), that every GitHub
    call of it shares, whichever tracker or pull-request client makes it."""
    from firewall.github.budget import Budget

    # Kept on the context, where its cached properties live: one budget per command.
    held = vars(ctx).get("_github_budget")
    if not isinstance(held, Budget):
        held = vars(ctx)["_github_budget"] = Budget(ctx.settings.github.budget)
    return held


def _finish(ctx: Context, result: Sync, *, dry_run: bool) -> list[str]:
    """Keep the issue numbers learnt (and forget the gone ones); the warnings to report."""
    warnings = list(result.warnings)
    if not dry_run and (result.numbers or result.dropped):
        from firewall.errors import LockError, RegistryError, WriteError

        try:
            ctx.keeper.remember_issues(result.numbers, result.dropped)
        except (RegistryError, LockError, WriteError) as exc:
            warnings.append(
                f"{exc}; the issue numbers learnt were not kept: the next run finds "
                "the issues again by their marker"
            )
    return warnings


def open_candidates(ctx: Context, *, issues: bool) -> dict[str, Candidate]:
    """The candidates recorded on open issues, less the evals already quarantined."""
    problems: list[str] = []
    tracker = _tracker(ctx, problems, dry_run=False, issues=issues)
    found: dict[str, Candidate] = {}
    if tracker is not None:
        from firewall.errors import IssueError
        from firewall.github.budget import BudgetSpent, spent_warning

        try:
            found = tracker.candidates()
        except BudgetSpent as exc:
            problems.append(spent_warning(exc, "tonight's candidates, and the issues' updates"))
        except IssueError as exc:
            problems.append(f"{exc}; tonight's candidates wait for the next night")
    report_problems(ctx, problems)
    quarantined = ctx.entries()
    return {eval_id: c for eval_id, c in found.items() if eval_id not in quarantined}


def publish_proposal(ctx: Context, proposed: Mapping[str, tuple[int, ProposalKind]]) -> None:
    """After `propose`: each eval's issue says which pull request proposes its change."""
    problems: list[str] = []
    tracker = _tracker(ctx, problems, dry_run=False, issues=True)
    if tracker is not None and proposed:
        from firewall.github import sync

        problems += _finish(ctx, sync.after_reprobe(tracker, proposed=proposed), dry_run=False)
    report_problems(ctx, problems)


def declined_issues(ctx: Context) -> dict[str, int]:
    """Evals whose issue a person closed as not planned, when GitHub can be asked."""
    env = ctx.env
    if not (
        ctx.settings.github.issues and env.get("GITHUB_TOKEN") and env.get("GITHUB_REPOSITORY")
    ):
        return {}
    problems: list[str] = []
    tracker = _tracker(ctx, problems, dry_run=False, issues=True)
    found: dict[str, int] = {}
    if tracker is not None:
        from firewall.errors import IssueError

        try:
            found = {eval_id: d.number for eval_id, d in tracker.not_planned().items()}
        except IssueError as exc:
            problems.append(f"{exc}; the issues' states are not shown")
    report_problems(ctx, problems)
    return found


def _reprobe(artefact: Artefact, eval_id: str) -> ProbeNumbers:
    from firewall.github.issues import ProbeNumbers

    report = next(r for r in artefact.evals if r.id == eval_id)
    return ProbeNumbers(
        sha=artefact.run.git_sha,
        ref=artefact.run.git_ref,
        median=report.stats.median,
        iqr=report.stats.iqr,
        k=report.k,
        reason=report.reason,
        at=artefact.run.started_at,
    )
