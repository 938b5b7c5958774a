"""Keep GitHub issues in step with the registry after a run, a nightly or a manual edit.

The registry is the truth; issues follow it. A GitHub failure never changes a
decision. One that concerns a single issue (``IssueGone``: deleted,
transferred, not found, its marker edited away; ``IssueRefused``: locked, a
422) costs only that eval: one warning, and the sync goes on with the next
eval. A gone issue's number is reported in ``Sync.dropped`` for the caller to
clear, and the eval's issue is found again by its marker or opened anew in
the same sync. Any other failure (GitHub down, a bad or read-only token, a
rate limit, issues disabled, an answer that is not GitHub's JSON) ends the sync
with one warning, and the next run catches up (entries without an issue get
one, stray open issues are closed). So does the end of the run's time for
GitHub (``budget``): its warning names the evals whose issues were skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from firewall.artefact import EvalReport
from firewall.config import Settings
from firewall.errors import IssueError, IssueGone, IssueRefused
from firewall.github.budget import Budget, BudgetSpent, spent_warning
from firewall.github.issues import (
    Candidate,
    IssueContext,
    IssueTracker,
    ProbeNumbers,
    ProposalKind,
    RecordingIssues,
    ScrubbedIssues,
)
from firewall.lifecycle import Entry, Event
from firewall.secrets import Secrets

T = TypeVar("T")
P = ParamSpec("P")


@dataclasses.dataclass
class Sync:
    """What the caller records and reports.

    ``dropped``: eval id -> the number of an issue that is gone; clear the
    entry's ``issue`` if it still holds that number. ``numbers``: eval id -> the
    issue number learnt; applied after ``dropped``, so a re-found or new issue wins.
    """

    numbers: dict[str, int] = dataclasses.field(default_factory=dict)
    dropped: dict[str, int] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)
    stopped: bool = False  # a failure that concerns every issue ended it: try no more this run
    skipped: list[str] = dataclasses.field(default_factory=list)  # cut off by the budget
    handled: set[str] = dataclasses.field(default_factory=set)  # evals whose turn came


def tracker_for(
    settings: Settings,
    env: Mapping[str, str],
    *,
    dry_run: bool,
    no_issues: bool,
    echo: Callable[[str], None],
    budget: Budget | None = None,
    scope: str | None = None,
) -> IssueTracker | None:
    """Which tracker this run uses: none, a recording one (dry run), or GitHub's.

    ``budget``: the run's time for GitHub, shared by every tracker of one command
    (default: a fresh one of ``[github] budget`` seconds). Either tracker is handed
    only values without the secrets of ``env`` (``issues.ScrubbedIssues``).
    ``scope``: which configuration's issues these are (``markers.config_scope``: None for
    the repository root's), so that two configurations keep apart.
    """
    if not settings.github.issues:
        return None
    tracker: IssueTracker | None
    if dry_run or no_issues:
        tracker = RecordingIssues(settings.github.labels, echo=echo)
    elif not env.get("GITHUB_TOKEN") or not env.get("GITHUB_REPOSITORY"):
        return None
    else:
        from firewall.github.client import from_environment  # PyGithub loads only when needed

        budget = budget or Budget(settings.github.budget)
        tracker = from_environment(settings.github.labels, env, budget=budget, scope=scope)
    secrets = Secrets.from_env(env)
    return ScrubbedIssues(tracker, secrets) if tracker is not None and secrets else tracker


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
    with _guard(sync, tracker, [*new, *sorted(entries)]):
        for eval_id in new:
            ctx = make(eval_id, entries[eval_id])
            _learn(sync, eval_id, _guarded(sync, tracker.open_or_comment, eval_id, ctx))
        # A pull request's copy of the registry is not the truth: never close strays here.
        rest = {i: e for i, e in entries.items() if i not in new or i in sync.dropped}
        catch_up(tracker, rest, make, sync, close_strays=False)
    # A gate says why a quarantined eval has no open issue; the nightly and `firewall
    # status` (which reports it) leave the team's decision unremarked.
    for eval_id, number in sorted(getattr(tracker, "left_closed", {}).items()):
        sync.warnings.append(
            f"issue #{number} for {eval_id} was closed as not planned: {eval_id} stays "
            "quarantined without an open issue, and the firewall neither reopens it nor opens "
            "another while this quarantine lasts"
        )
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
    quarantined: Collection[str] | None = None,
) -> Sync:
    """Status blocks follow the streaks, releases close issues, then everything catches up.

    An open issue of an eval not in ``quarantined`` (by default ``after``) is a stray,
    and is closed.
    """
    sync = Sync()
    make = _contexts(reports, settings, trends)
    scope = [e.eval_id for e in events if e.kind != "missing"] + sorted(after)
    with _guard(sync, tracker, scope):
        for event in events:
            entry = after.get(event.eval_id) or before.get(event.eval_id)
            if entry is None or event.kind == "missing":
                continue
            eval_id, issue, ctx = event.eval_id, entry.issue, make(event.eval_id, entry)
            if event.kind == "quarantined":
                _learn(sync, eval_id, _guarded(sync, tracker.open_or_comment, eval_id, ctx))
            elif issue is not None:
                _guarded(sync, tracker.update_status, eval_id, issue, ctx, event)
            elif event.kind == "released":
                _guarded(sync, tracker.close, eval_id, None, event.message)
        pending = {i: e for i, e in after.items() if i not in sync.numbers}
        keep = after if quarantined is None else quarantined
        catch_up(tracker, pending, make, sync, close_strays=True, registry=keep)
    return sync


def after_release(tracker: IssueTracker, eval_id: str, entry: Entry, reason: str | None) -> Sync:
    sync = Sync()
    message = "released by hand with `firewall quarantine release`" + (
        f": {reason}" if reason else ""
    )
    with _guard(sync, tracker, [eval_id]):
        _guarded(sync, tracker.close, eval_id, entry.issue, message)
    return sync


def after_add(tracker: IssueTracker, eval_id: str, entry: Entry, settings: Settings) -> Sync:
    sync = Sync()
    ctx = context(eval_id, entry, None, settings=settings, trends={})
    with _guard(sync, tracker, [eval_id]):
        _learn(sync, eval_id, _guarded(sync, tracker.open_or_comment, eval_id, ctx))
    return sync


def after_candidates(
    tracker: IssueTracker,
    candidates: Mapping[str, Candidate],
    owners: Mapping[str, str | None] | None = None,
) -> Sync:
    """A pull request's instabilities recorded on their evals' issues (opened if need be,
    assigned to the eval's owner in ``owners``: eval id -> its config's ``owner``)."""
    sync = Sync()
    owners = owners or {}
    with _guard(sync, tracker, sorted(candidates)):
        for eval_id, candidate in sorted(candidates.items()):
            owner = owners.get(eval_id)
            number = _guarded(sync, tracker.record_candidate, eval_id, candidate, owner)
            _learn(sync, eval_id, number)
    return sync


def after_reprobe(
    tracker: IssueTracker,
    *,
    dismissed: Mapping[str, ProbeNumbers] = {},
    proposed: Mapping[str, tuple[int, ProposalKind]] = {},
) -> Sync:
    """After the nightly re-probed the candidates on the default branch: the ones not
    reproduced dismissed (their issues closed), and the proposals said on their issues.

    ``proposed``: eval id -> (the rolling pull request's number, what it proposes).
    """
    sync = Sync()
    with _guard(sync, tracker, [*sorted(dismissed), *sorted(proposed)]):
        for eval_id, reprobe in sorted(dismissed.items()):
            _guarded(sync, tracker.dismiss_candidate, eval_id, reprobe)
        for eval_id, (pull, change) in sorted(proposed.items()):
            _guarded(sync, tracker.note_proposal, eval_id, pull, change)
    return sync


def catch_up(
    tracker: IssueTracker,
    entries: Mapping[str, Entry],
    context: Callable[[str, Entry], IssueContext],
    sync: Sync,
    *,
    close_strays: bool,
    registry: Collection[str] | None = None,
) -> None:
    """Make GitHub agree with the registry, which is the truth.

    An entry without its open issue adopts the one found by marker, or gets a
    new one (unless a person closed its issue as not planned); ``sync`` hears
    each number as soon as it is known, so a failure half-way keeps what was
    done. An entry whose issue is gone is caught up once more without it. With
    ``close_strays``, an open labelled issue whose eval is no longer
    quarantined (not in ``registry``, by default ``entries``) is closed.
    """
    quarantined = entries.keys() if registry is None else registry
    found = tracker.open_issues()
    for eval_id, entry in sorted(entries.items()):
        for _ in range(2):  # the second time only after the entry's issue proved gone
            if eval_id in sync.dropped and entry.issue == sync.dropped[eval_id]:
                entry = entry.model_copy(update={"issue": None})
            number = found.get(eval_id)
            if number is None:
                ctx = context(eval_id, entry)
                number = _guarded(sync, tracker.adopt_or_open, eval_id, ctx)
            if eval_id not in sync.dropped or entry.issue is None:
                break
        if number is not None and number != entry.issue:
            sync.numbers[eval_id] = number
        sync.handled.add(eval_id)
    if close_strays:
        for eval_id, number in sorted(found.items()):
            if eval_id not in quarantined:
                message = "no longer in the quarantine registry"
                _guarded(sync, tracker.close, eval_id, number, message)


def _learn(sync: Sync, eval_id: str, number: int | None) -> None:
    if number is not None:
        sync.numbers[eval_id] = number


def _guarded(
    sync: Sync,
    call: Callable[Concatenate[str, P], T],
    eval_id: str,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T | None:
    """``call(eval_id, ...)``; a failure that concerns one issue is that eval's warning, and None.

    A gone issue's number is dropped; a refused change leaves the issue the
    eval's (its number is learnt, as the issue still stands).
    """
    result: T | None = None
    try:
        result = call(eval_id, *args, **kwargs)
    except IssueGone as exc:
        if exc.number is not None:
            sync.dropped[eval_id] = exc.number
        sync.warnings.append(f"{exc} (only this eval's issue is affected)")
    except IssueRefused as exc:
        if exc.number is not None:
            sync.numbers[eval_id] = exc.number
        sync.warnings.append(f"{exc} (only this eval's issue is affected)")
    sync.handled.add(eval_id)  # not when a failure of everything ends the sync here
    return result


class _guard:
    """Stop syncing at the first failure that concerns every issue; one warning says so.

    ``scope``: the evals whose issues this sync keeps; when the budget runs out, the
    warning names those whose turn had not come (``Sync.skipped``).
    """

    def __init__(self, sync: Sync, tracker: IssueTracker, scope: Sequence[str]) -> None:
        self.sync, self.tracker, self.scope = sync, tracker, scope

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> bool:
        notes: list[str] = getattr(self.tracker, "notes", [])
        self.sync.warnings.extend(notes)
        notes.clear()  # said once a command, though one tracker serves several syncs
        if isinstance(exc, BudgetSpent):
            self.sync.stopped = True
            skipped = [e for e in dict.fromkeys(self.scope) if e not in self.sync.handled]
            self.sync.skipped = skipped
            self.sync.warnings.append(spent_warning(exc, _issues_of(skipped)))
            return True
        if isinstance(exc, IssueError):
            self.sync.stopped = True
            self.sync.warnings.append(
                f"{exc}; the decision and exit code stand, and the next "
                "run or nightly catches up on the issues"
            )
            return True
        return False


def _issues_of(eval_ids: Sequence[str], shown: int = 10) -> str | None:
    if not eval_ids:
        return None
    named = ", ".join(eval_ids[:shown])
    more = f" and {len(eval_ids) - shown} more" if len(eval_ids) > shown else ""
    return f"the issues of {named}{more}"
