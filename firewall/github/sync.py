"""Keep GitHub issues in step with the registry after a run, a nightly or a manual edit.

The registry is the truth; issues follow it. A GitHub failure never changes a
decision: it ends the syncing for this run with a warning, and the next run
catches up (entries without an issue get one, stray open issues are closed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from firewall.artefact import EvalReport
from firewall.config import Settings
from firewall.errors import IssueError
from firewall.github.issues import (
    IssueContext,
    IssueTracker,
    RecordingIssues,
    catch_up,
)
from firewall.lifecycle import Entry, Event


@dataclasses.dataclass
class Sync:
    """Issue numbers learnt and what went wrong, for the caller to record and report."""

    numbers: dict[str, int] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)


def tracker_for(
    settings: Settings,
    env: Mapping[str, str],
    *,
    dry_run: bool,
    no_issues: bool,
    echo: Callable[[str], None],
) -> IssueTracker | None:
    """Which tracker this run uses: none, a recording one (dry run), or GitHub's."""
    if not settings.github.issues:
        return None
    if dry_run or no_issues:
        return RecordingIssues(settings.github.labels, echo=echo)
    if not env.get("GITHUB_TOKEN") or not env.get("GITHUB_REPOSITORY"):
        return None
    from firewall.github.client import from_environment  # PyGithub loads only when needed

    return from_environment(settings.github.labels, env)


def context(
    eval_id: str,
    entry: Entry,
    report: EvalReport | None,
    *,
    settings: Settings,
    trends: Mapping[str, str],
) -> IssueContext:
    return IssueContext(
        report=report,
        entry=entry,
        replay=replay_command(eval_id, report),
        trend=trends.get(eval_id, ""),
        release_after=settings.nightly.release_after,
    )


def replay_command(eval_id: str, report: EvalReport | None) -> str:
    """Replay the trial that scored lowest (or errored): the one worth looking at first."""
    trials = report.trials if report else []
    if not trials:
        return f"firewall replay {eval_id} --seed SEED"
    worst = min(trials, key=lambda t: (t.error is None, t.score if t.score is not None else 0.0))
    return f"firewall replay {eval_id} --seed {worst.seed} --trial {worst.index}"


def _contexts(
    reports: Sequence[EvalReport], settings: Settings, trends: Mapping[str, str]
) -> Callable[[str, Entry], IssueContext]:
    """Issue contexts that pair each registry entry with this run's probe of it."""
    by_id = {report.id: report for report in reports}

    def make(eval_id: str, entry: Entry) -> IssueContext:
        return context(eval_id, entry, by_id.get(eval_id), settings=settings, trends=trends)

    return make


def after_gate(
    tracker: IssueTracker,
    *,
    reports: Sequence[EvalReport],
    new: Sequence[str],
    entries: Mapping[str, Entry],
    settings: Settings,
    trends: Mapping[str, str],
) -> Sync:
    """A new quarantine opens (or comments on) its issue; older entries catch up."""
    sync = Sync()
    make = _contexts(reports, settings, trends)
    with _guard(sync, tracker):
        for eval_id in new:
            number = tracker.open_or_comment(eval_id, make(eval_id, entries[eval_id]))
            if number is not None:
                sync.numbers[eval_id] = number
        # A pull request's copy of the registry is not the truth: never close strays here.
        rest = {i: e for i, e in entries.items() if i not in new}
        catch_up(tracker, rest, make, sync.numbers.__setitem__, close_strays=False)
    return sync


def after_nightly(
    tracker: IssueTracker,
    *,
    reports: Sequence[EvalReport],
    events: Sequence[Event],
    before: Mapping[str, Entry],
    after: Mapping[str, Entry],
    settings: Settings,
    trends: Mapping[str, str],
) -> Sync:
    """Status blocks follow the streaks, releases close issues, then everything catches up."""
    sync = Sync()
    make = _contexts(reports, settings, trends)
    with _guard(sync, tracker):
        for event in events:
            entry = after.get(event.eval_id) or before.get(event.eval_id)
            if entry is None or event.kind == "missing":
                continue
            if event.kind == "quarantined":
                number = tracker.open_or_comment(event.eval_id, make(event.eval_id, entry))
                if number is not None:
                    sync.numbers[event.eval_id] = number
            elif entry.issue is not None:
                tracker.update_status(event.eval_id, entry.issue, make(event.eval_id, entry), event)
            elif event.kind == "released":
                tracker.close(event.eval_id, None, event.message)
        pending = {i: e for i, e in after.items() if i not in sync.numbers}
        catch_up(tracker, pending, make, sync.numbers.__setitem__, close_strays=True)
    return sync


def after_release(tracker: IssueTracker, eval_id: str, entry: Entry, reason: str | None) -> Sync:
    sync = Sync()
    message = "released by hand with `firewall quarantine release`" + (
        f": {reason}" if reason else ""
    )
    with _guard(sync, tracker):
        tracker.close(eval_id, entry.issue, message)
    return sync


def after_add(tracker: IssueTracker, eval_id: str, entry: Entry, settings: Settings) -> Sync:
    sync = Sync()
    with _guard(sync, tracker):
        number = tracker.open_or_comment(
            eval_id, context(eval_id, entry, None, settings=settings, trends={})
        )
        if number is not None:
            sync.numbers[eval_id] = number
    return sync


class _guard:
    """Stop syncing at the first GitHub failure and turn it into a warning."""

    def __init__(self, sync: Sync, tracker: IssueTracker) -> None:
        self.sync, self.tracker = sync, tracker

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> bool:
        self.sync.warnings.extend(getattr(self.tracker, "notes", []))
        if isinstance(exc, IssueError):
            self.sync.warnings.append(
                f"{exc}; the decision and exit code stand, and the next "
                "run or nightly catches up on the issues"
            )
            return True
        return False
