"""Where a command keeps its state, chosen once when its context is built: the mode as one object.

    Laptop    the checkout's ``quarantine.json`` is the truth: new quarantines, streaks
              and issue numbers are written to it, under its lock.
    Reviewed  CI. ``quarantine.json`` changes only through reviewed commits. An
              instability a run finds is a candidate, recorded on the state branch
              (and on its issue, by the publish stage); the nightly keeps streaks and
              issue numbers on the state branch, and writes to the registry file only
              the changes a reviewer must see, for `firewall propose` to commit.
    DryRun    reads as the mode it stands in for, says what it would keep, keeps nothing.

Each stage makes one call to it: ``record_run`` (run, gate), ``candidates`` and
``record_nightly`` (nightly), ``remember_issues`` (once GitHub answered). A keeper
that cannot keep (no state branch, a refused push, a default branch it cannot
tell) says so once, through ``notice``, with the reason and the fix; the decision
and the exit code stand.

The state branch is changed one eval at a time (``SharedHistory.change_*``): each
push applies its own changes to the tip it lands on, so that a push gate and a
nightly running together both keep theirs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TypeVar

from firewall.artefact import Artefact, EvalReport
from firewall.config import Settings
from firewall.lifecycle import (
    PROGRESS_FIELDS,
    RELEASE_CLEAN_TRIALS,
    RELEASE_LLR,
    Candidate,
    Entry,
    Event,
    Progress,
    progress_of,
    quarantine_entry,
    reviewed_change,
    with_progress,
)
from firewall.pipeline.checkout import Checkout
from firewall.policy import Status
from firewall.store.registry import Registry
from firewall.store.shared import SharedHistory

T = TypeVar("T")
Notice = Callable[[str], None]
Lifecycle = Callable[[dict[str, Entry]], list[Event]]


@dataclasses.dataclass(frozen=True)
class Recorded:
    """What ``record_run`` kept: entries added to the registry (a laptop), and candidates
    with where each was recorded, or why it was not (CI)."""

    added: list[str] = dataclasses.field(default_factory=list)
    candidates: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Keeper:
    """The checkout's registry file as the truth: a developer's laptop."""

    registry: Registry
    settings: Settings
    notice: Notice
    shared: SharedHistory | None = None
    _entries: dict[str, Entry] | None = dataclasses.field(default=None, repr=False)

    name = "laptop"
    keeps = True  # False: a dry run
    reviewed = False  # True in CI: the registry changes only through reviewed commits

    def entries(self) -> dict[str, Entry]:
        """The registry as this command found it (or last wrote it), read once."""
        if self._entries is None:
            self._entries = self._read()
        return dict(self._entries)

    def team_entries(self) -> dict[str, Entry]:
        """The entries with the team's progress from the state branch: what `firewall
        status` shows, on a laptop as in CI."""
        entries = self.entries()
        if self.shared is None:
            return entries
        progress = self.shared.progress() or {}
        return {i: with_progress(e, progress.get(i)) for i, e in entries.items()}

    def candidates(self) -> dict[str, Candidate]:
        """The candidates waiting for the nightly: none where the registry is the truth."""
        return {}

    @contextlib.contextmanager
    def edit(self) -> Iterator[dict[str, Entry]]:
        """Change the registry file under its lock (a person's edit, or a laptop's run);
        the snapshot follows what was written."""
        with self.registry.edit() as entries:
            yield entries
            self._entries = dict(entries)

    def record_run(self, artefact: Artefact) -> Recorded:
        """New quarantines go straight to the registry. Raises ``FirewallError`` when it
        cannot be changed (the run then writes nothing else)."""
        fresh = _fresh(artefact)
        added: list[str] = []
        if fresh:
            with self.edit() as entries:
                for report in fresh:
                    if report.id not in entries:
                        entries[report.id] = self._entry(artefact, report)
                        added.append(report.id)
        return Recorded(added=added)

    def record_nightly(
        self,
        lifecycle: Lifecycle,
        *,
        at: dt.datetime,
        candidates: Collection[str],
    ) -> list[Event]:
        """Run the night's lifecycle over the registry under its lock, and keep it."""
        del at, candidates  # a laptop has no progress apart and no candidates
        with self.edit() as current:
            return lifecycle(current)

    def remember_issues(self, numbers: Mapping[str, int], dropped: Mapping[str, int]) -> None:
        """Issue numbers learnt from GitHub, and the ones proved gone, in the registry."""
        with self.edit() as entries:
            _apply_issues(entries, numbers, dropped)

    def _read(self) -> dict[str, Entry]:
        return self.registry.read()

    def _entry(self, artefact: Artefact, report: EvalReport) -> Entry:
        run = artefact.run
        return quarantine_entry(report, self.settings, at=run.started_at, git_sha=run.git_sha)


@dataclasses.dataclass
class Reviewed(Keeper):
    """CI: the registry is the reviewed truth; everything that changes runs on the state
    branch, and the nightly writes the registry file only for a reviewer to see."""

    checkout: Callable[[], Checkout] = dataclasses.field(default=lambda: _no_checkout())
    pull_request: int | None = None
    _adopted: list[str] = dataclasses.field(default_factory=list, repr=False)

    name = "ci"
    reviewed = True

    def team_entries(self) -> dict[str, Entry]:
        return self.entries()  # the progress is laid over already

    def candidates(self) -> dict[str, Candidate]:
        """The candidates pull requests recorded on the state branch, less the evals the
        reviewed registry holds already (an adoption whose proposal was merged)."""
        if self.shared is None:
            return {}
        quarantined = self.entries()
        found = self.shared.candidates()
        self._adopted = [i for i in found if i in quarantined]  # settled: taken out tonight
        return {i: c for i, c in found.items() if i not in quarantined}

    def record_run(self, artefact: Artefact) -> Recorded:
        """New instabilities are candidates, kept on the state branch; the registry file
        is never written. Says once where a candidate could not be kept, and why, and
        when this run cannot tell whether its history belongs on the state branch."""
        checkout = self.checkout()
        if self.shared is not None and not checkout.pull_request and not checkout.default_branch:
            self.notice(_not_on_default(checkout, "this run's history is not kept there"))
        fresh = _fresh(artefact)
        if not fresh:
            return Recorded()
        candidates = {r.id: candidate_of(artefact, r, pr=self.pull_request) for r in fresh}
        where = self._keep_candidates(candidates)
        return Recorded(candidates=dict.fromkeys(candidates, where))

    def record_nightly(
        self,
        lifecycle: Lifecycle,
        *,
        at: dt.datetime,
        candidates: Collection[str],
    ) -> list[Event]:
        """The night's lifecycle on a copy; its progress to the state branch, and to the
        registry file only what a reviewer must see. Raises ``FirewallError`` when the
        registry file cannot be changed."""
        before = self.entries()
        current = dict(before)
        happened = lifecycle(current)
        release_after = self.settings.nightly.release_after
        # A release waits for its pull request: until the default branch drops the entry,
        # it is released again each stable night, and withdrawn by an unstable one.
        waiting = {
            event.eval_id: progress_of(before[event.eval_id]).model_copy(
                update={
                    "stable_streak": release_after,
                    "clean_trials": RELEASE_CLEAN_TRIALS,
                    "collapse_llr": RELEASE_LLR,
                    "last_probe": at,
                }
            )
            for event in happened
            if event.kind == "released"
        }
        progress: dict[str, Progress | None] = {
            **{i: progress_of(e) for i, e in current.items()},
            **waiting,
        }
        progress.update({i: None for i in before if i not in progress})
        dismissed = [e.eval_id for e in happened if e.kind == "dismissed"]
        settled = [*self._adopted, *(i for i in dismissed if i in candidates)]
        self._keep_night(progress, settled)
        self._write_reviewed(before, current)
        self._entries = current
        return happened

    def remember_issues(self, numbers: Mapping[str, int], dropped: Mapping[str, int]) -> None:
        """Issue numbers go with the progress, on the state branch, one eval at a time."""
        current = self.entries()
        _apply_issues(current, numbers, dropped)
        self._entries = current
        if self.shared is None:
            self.notice(
                f"the issue numbers learnt ({', '.join(sorted({*numbers, *dropped}))}) are not "
                f"kept: [state] remote {self.settings.state.remote or '(none)'!r} is not a git "
                "remote of this checkout; the next run finds the issues again by their marker"
            )
            return
        changes: dict[str, Callable[[Progress | None], Progress | None]] = {}
        for eval_id in {*numbers, *dropped}:
            if eval_id in current:
                changes[eval_id] = _with_issue(
                    progress_of(current[eval_id]), numbers.get(eval_id), dropped.get(eval_id)
                )
        self.shared.change_progress(
            changes, "the issue numbers learnt were not kept: the next run finds them again"
        )

    def _read(self) -> dict[str, Entry]:
        entries = self.registry.read()
        progress = self.shared.progress() if self.shared is not None else None
        if not progress:
            return entries
        return {i: with_progress(e, progress.get(i)) for i, e in entries.items()}

    def _keep_candidates(self, candidates: Mapping[str, Candidate]) -> str:
        if self.shared is None:
            self.notice(
                f"this CI run cannot keep its candidates ({', '.join(sorted(candidates))}): "
                f"[state] remote {self.settings.state.remote or '(none)'!r} is not a git "
                "remote of this checkout; set [state] remote to the repository's remote "
                "so that the nightly can confirm them"
            )
            return "nowhere (no state branch: see the warning)"
        kept = self.shared.change_candidates(
            {eval_id: _replace(candidate) for eval_id, candidate in candidates.items()},
            "the candidates were not kept there: the nightly will not see them unless "
            "their issue records them",
        )
        where = f"on the state branch {self.shared.state.describe()}"
        return where if kept else f"not on the state branch {self.shared.state.describe()}"

    def _keep_night(self, progress: Mapping[str, Progress | None], settled: list[str]) -> None:
        checkout = self.checkout()
        if self.shared is None:
            self.notice(
                f"this nightly cannot keep its streaks: [state] remote "
                f"{self.settings.state.remote or '(none)'!r} is not a git remote of this "
                "checkout, so every night starts counting anew and no quarantine is ever "
                "released; set [state] remote to the repository's remote"
            )
            return
        if not checkout.on_default_branch:
            self.notice(_not_on_default(checkout, "its streaks are not kept"))
            return
        self.shared.change_progress(
            {eval_id: _replace(value) for eval_id, value in progress.items()},
            "tonight's streaks were not saved",
        )
        self.shared.change_candidates(
            {eval_id: _replace(None) for eval_id in settled},
            "the dismissed candidates stay on the branch until the next night",
        )

    def _write_reviewed(self, before: Mapping[str, Entry], after: Mapping[str, Entry]) -> None:
        changed = sorted(
            eval_id
            for eval_id in set(before) | set(after)
            if reviewed_change(before.get(eval_id), after.get(eval_id))
        )
        if not changed:
            return
        reviewed = set(Entry.model_fields) - set(PROGRESS_FIELDS)
        with self.registry.edit() as entries:
            for eval_id in changed:
                if eval_id not in after:
                    entries.pop(eval_id, None)
                elif eval_id in entries:  # keep the file's own progress: no noise in the diff
                    update = after[eval_id].model_dump(include=reviewed)
                    entries[eval_id] = Entry.model_validate(
                        {**entries[eval_id].model_dump(), **update}
                    )
                else:
                    entries[eval_id] = after[eval_id]


@dataclasses.dataclass
class DryRun(Keeper):
    """Reads as ``mode`` does; decides, says what it would keep, keeps nothing."""

    mode: Keeper | None = None

    name = "dry-run"
    keeps = False

    @property
    def reviewed(self) -> bool:  # type: ignore[override]
        return self._mode.reviewed

    def _read(self) -> dict[str, Entry]:
        return self._mode.entries()

    def team_entries(self) -> dict[str, Entry]:
        return self._mode.team_entries()

    def candidates(self) -> dict[str, Candidate]:
        return self._mode.candidates()

    def record_run(self, artefact: Artefact) -> Recorded:
        fresh = [r.id for r in _fresh(artefact)]
        if isinstance(self._mode, Reviewed):
            return Recorded(candidates=dict.fromkeys(fresh, "nowhere (a dry run keeps nothing)"))
        entries = self.entries()
        return Recorded(added=[eval_id for eval_id in fresh if eval_id not in entries])

    def record_nightly(
        self,
        lifecycle: Lifecycle,
        *,
        at: dt.datetime,
        candidates: Collection[str],
    ) -> list[Event]:
        return lifecycle(self.entries())

    def remember_issues(self, numbers: Mapping[str, int], dropped: Mapping[str, int]) -> None:
        return None

    @property
    def _mode(self) -> Keeper:
        assert self.mode is not None
        return self.mode


def choose(
    *,
    registry: Registry,
    settings: Settings,
    notice: Notice,
    shared: SharedHistory | None,
    ci: bool,
    checkout: Callable[[], Checkout],
    dry_run: bool = False,
) -> Keeper:
    """The keeper of one command, chosen once: CI or a laptop, and a dry run of either."""
    mode: Keeper
    if ci:
        mode = Reviewed(
            registry,
            settings,
            notice,
            shared,
            checkout=checkout,
            pull_request=checkout().pull_request,
        )
    else:
        mode = Keeper(registry, settings, notice, shared)
    if dry_run:
        return DryRun(registry, settings, notice, shared, mode=mode)
    return mode


def candidate_of(artefact: Artefact, report: EvalReport, *, pr: int | None) -> Candidate:
    """This run's probe of an eval as a candidate, with the pull request it ran on."""
    run = artefact.run
    return Candidate(
        sha=run.git_sha,
        ref=run.git_ref,
        median=report.stats.median,
        iqr=report.stats.iqr,
        k=report.k,
        reason=report.reason,
        at=run.started_at,
        pr=pr or None,
    )


def _fresh(artefact: Artefact) -> list[EvalReport]:
    """The evals a complete run found newly unstable; an interrupted run keeps nothing."""
    if not artefact.run.complete:
        return []
    return [r for r in artefact.evals if r.status is Status.QUARANTINE]


def _apply_issues(
    entries: dict[str, Entry], numbers: Mapping[str, int], dropped: Mapping[str, int]
) -> None:
    for eval_id, number in dropped.items():
        if eval_id in entries and entries[eval_id].issue == number:
            entries[eval_id] = entries[eval_id].model_copy(update={"issue": None})
    for eval_id, number in numbers.items():
        if eval_id in entries:
            entries[eval_id] = entries[eval_id].model_copy(update={"issue": number})


def _replace(value: T | None) -> Callable[[T | None], T | None]:
    """This writer's whole entry for an eval, whatever the tip holds."""
    return lambda _tip: value


def _with_issue(
    known: Progress, number: int | None, dropped: int | None
) -> Callable[[Progress | None], Progress | None]:
    """Set the issue number on the tip's progress (or, for one proved gone, clear it),
    leaving the streak the tip holds: a nightly may have counted it since this run read."""

    def change(tip: Progress | None) -> Progress | None:
        base = tip if tip is not None else known
        if number is not None:
            return base.model_copy(update={"issue": number})
        if base.issue == dropped:
            return base.model_copy(update={"issue": None})
        return base

    return change


def _not_on_default(checkout: Checkout, what: str) -> str:
    if checkout.default_branch is None:
        return (
            f"this CI job cannot tell the repository's default branch "
            f"({checkout.default_source}), so {what}; run it on the default branch with the "
            "event's payload, or give the checkout its remote (actions/checkout with "
            "persist-credentials on)"
        )
    on = f"#{checkout.pull_request}" if checkout.pull_request else (checkout.branch or "?")
    return (
        f"this CI job runs on {on}, not on the default branch {checkout.default_branch!r}, "
        f"so {what}; the nightly keeps the lifecycle from the default branch only"
    )


def _no_checkout() -> Checkout:
    return Checkout(ci=True, branch=None, pull_request=None)
