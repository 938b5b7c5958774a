"""The side effects after a decision that must never change it: GitHub issues, job outputs,
review warnings. Each failure here is reported (an annotation in a GitHub job, a warning
elsewhere) and the run's exit code stands.

The GitHub modules (jinja2, and PyGithub behind them) are imported only when a run
actually talks to GitHub or runs inside Actions.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from firewall import output
from firewall.artefact import Artefact
from firewall.github import in_actions
from firewall.lifecycle import overdue, quarantine_entry
from firewall.policy import Status
from firewall.report import status as triage
from firewall.store import history
from firewall.store.registry import Entry, Registry
from firewall.timeutil import now

if TYPE_CHECKING:
    from pathlib import Path

    from firewall.cli.common import Project
    from firewall.github.issues import IssueTracker
    from firewall.github.sync import Sync
    from firewall.pipeline.nightly import NightlyOutcome
    from firewall.pipeline.run import Outcome


def announce(project: Project, artefact: Artefact, report_path: Path | None) -> None:
    """Overdue reviews, and in a GitHub job the annotations, summary and outputs."""
    entries = Registry(project.cwd / project.config.settings.registry).read()
    for eval_id in overdue(entries, now()):
        output.warn(f"{eval_id}: quarantine review is overdue; see `firewall status`")
    publish_github(project, artefact, report_path, entries)


def publish_github(
    project: Project, artefact: Artefact, report_path: Path | None, entries: dict[str, Entry]
) -> None:
    """In a GitHub Actions job: annotations on stdout, the job summary and the step outputs."""
    if not in_actions(os.environ):
        return
    from firewall.github.publish import publish

    publication = publish(
        artefact,
        report_path=report_path,
        entries=entries,
        history_path=project.cwd / project.config.settings.history,
        env=os.environ,
    )
    output.annotate(publication.annotations)
    for problem in publication.problems:
        report_problem(problem)


def report_problem(text: str) -> None:
    """A problem that changes no decision: an annotation in a GitHub job, else a warning."""
    if in_actions(os.environ):
        from firewall.github.annotations import annotation

        output.annotate([annotation("warning", text, title="Flakiness Firewall")])
    else:
        output.warn(text)


def issue_tracker(project: Project, *, dry_run: bool, no_issues: bool) -> IssueTracker | None:
    """The tracker this run uses, or None when it has no issues to keep (loads nothing then)."""
    wanted = (
        dry_run
        or no_issues
        or (os.environ.get("GITHUB_TOKEN") and os.environ.get("GITHUB_REPOSITORY"))
    )
    if not project.config.settings.github.issues or not wanted:
        return None
    from firewall.github import sync
    from firewall.github.issues import IssueError

    try:
        return sync.tracker_for(
            project.config.settings,
            os.environ,
            dry_run=dry_run,
            no_issues=no_issues,
            echo=output.note,
        )
    except IssueError as exc:
        report_problem(f"{exc}; no issue was opened or updated")
        return None


def finish_sync(project: Project, result: Sync, *, dry_run: bool) -> None:
    from firewall.github import sync

    if not dry_run:
        sync.record(project.cwd / project.config.settings.registry, result.numbers)
    for warning in result.warnings:
        report_problem(warning)


def sync_after_gate(project: Project, outcome: Outcome, *, dry_run: bool, no_issues: bool) -> None:
    """Open or comment on the issues of new quarantines; catch up on the ones owed."""
    tracker = issue_tracker(project, dry_run=dry_run, no_issues=no_issues)
    if tracker is None or not outcome.artefact.run.complete:
        return
    settings = project.config.settings
    entries = Registry(project.cwd / settings.registry).read()
    new = [r for r in outcome.artefact.evals if r.status is Status.QUARANTINE]
    for report in new:  # a dry run wrote none of them, but says what it would do
        entries.setdefault(report.id, quarantine_entry(report, settings, at=now(), git_sha=None))
    from firewall.github import sync

    result = sync.after_gate(
        tracker,
        reports=outcome.artefact.evals,
        new=[r.id for r in new],
        entries=entries,
        settings=settings,
        trends=_trends(project, entries),
    )
    finish_sync(project, result, dry_run=dry_run)


def _trends(project: Project, entries: dict[str, Entry]) -> dict[str, str]:
    path = project.cwd / project.config.settings.history
    return triage.trends(history.scan(path), entries, at=now())


def sync_after_nightly(
    project: Project,
    outcome: NightlyOutcome,
    before: dict[str, Entry],
    *,
    dry_run: bool,
    no_issues: bool,
) -> None:
    """Status blocks, state-change comments, release closes, then catch-up and stray closes."""
    tracker = issue_tracker(project, dry_run=dry_run, no_issues=no_issues)
    if tracker is None or not outcome.artefact.run.complete:
        return
    settings = project.config.settings
    after = Registry(project.cwd / settings.registry).read() if not dry_run else dict(before)
    from firewall.github import sync

    result = sync.after_nightly(
        tracker,
        reports=outcome.artefact.evals,
        events=outcome.events,
        before=before,
        after=after,
        settings=settings,
        trends=_trends(project, {**before, **after}),
    )
    finish_sync(project, result, dry_run=dry_run)


def sync_after_add(project: Project, eval_id: str, *, no_issues: bool) -> None:
    tracker = issue_tracker(project, dry_run=False, no_issues=no_issues)
    entry = Registry(project.cwd / project.config.settings.registry).read().get(eval_id)
    if tracker is None or entry is None:
        return
    from firewall.github import sync

    finish_sync(
        project, sync.after_add(tracker, eval_id, entry, project.config.settings), dry_run=False
    )


def sync_after_release(
    project: Project, eval_id: str, entry: Entry, reason: str | None, *, no_issues: bool
) -> None:
    tracker = issue_tracker(project, dry_run=False, no_issues=no_issues)
    if tracker is not None:
        from firewall.github import sync

        finish_sync(project, sync.after_release(tracker, eval_id, entry, reason), dry_run=False)


def after_decision(project: Project, outcome: Outcome, *, dry_run: bool, no_issues: bool) -> None:
    """Everything `run` and `gate` do once the decision is printed."""
    sync_after_gate(project, outcome, dry_run=dry_run, no_issues=no_issues)
    announce(project, outcome.artefact, outcome.report_path)
