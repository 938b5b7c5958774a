"""GitHub issues for quarantined evals and candidates: the tracker interface and its values.

The rest of the firewall talks to an ``IssueTracker``: ``client.GitHubIssues``
does it for real (the logic is ``tracker.IssueBook``; PyGithub is imported in
``client`` only, and only when issues are on), ``RecordingIssues`` only says
what it would do (``--dry-run``, ``--no-issues``). What the issues say is in
``issue_text``; the markers they are found by, in ``markers``.

**No secrets.** ``sync.tracker_for`` hands either one its values through
``ScrubbedIssues``, which takes the environment's secrets (``firewall.secrets``)
out of every report, entry, event and candidate before an issue (or a dry run's
line) quotes it: an issue cuts and escapes what it quotes, which could keep part
of a value that only the whole of is looked for. ``client.Session`` scrubs the
text it sends once more.

**Found again.** An eval's issue is the open issue whose body carries the
marker ``<!-- firewall:eval=ID -->``: looked for first among the issues with
the label, then (once a run, and only when an issue would otherwise be
opened) among every open issue, since GitHub silently drops the labels of a
token without triage access. Of two or more open issues with one marker (two
concurrent runs each opened one) the oldest is kept and the others are closed
as duplicates of it. Only an issue the firewall wrote counts (its label, or the
token's own author), and only its own configuration's (the marker's
``config=SCOPE``, none for the repository root's): see ``tracker``.

**Closed as not planned.** A person who closes an eval's issue as "not
planned" has decided that the quarantine is not worth tracking. The firewall
never reopens that issue, never comments on it, and opens no new one for the
eval while the quarantine it was closed under lasts (the entry holds its
number, or was quarantined before it was closed): the quarantine stays,
without an open issue, and ``not_planned()`` reports it, so that ``firewall
status`` can say "issue #N closed as not planned". A quarantine that starts
after the closing (the eval was released and became unstable again) gets an
issue again; a candidate never does. The firewall itself never closes as not
planned: released quarantines and dismissed candidates are closed as
completed, twins as duplicates, each with a marker in the closing comment
(``<!-- firewall:closed=released|dismissed|duplicate -->``), so a human
decision and the firewall's own are always told apart.

**Candidates** (contract §6). An instability found on a pull request is
recorded on the eval's issue (opened if none is open) as a marker with its
numbers, ``<!-- firewall:candidate {...} -->``, in a comment and in the body
(the body keeps the latest). The nightly lists the open candidates, then
either dismisses one (not reproduced on the default branch: a comment with
the numbers, and the issue closed as completed) or proposes the adoption in
its rolling pull request and says so on the issue, which stays open until the
change reaches the default branch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from firewall.artefact import EvalReport
from firewall.lifecycle import Candidate as Candidate  # its home is the core: re-exported
from firewall.lifecycle import Entry, Event
from firewall.lifecycle import ProbeNumbers as ProbeNumbers
from firewall.secrets import Secrets
from firewall.timeutil import Timestamp, to_text

DEFAULT_LABEL = "flaky-eval"

ProposalKind = Literal["release", "adoption"]
"""What the rolling pull request proposes for an eval: leave quarantine, or enter it."""


@dataclasses.dataclass(frozen=True)
class IssueContext:
    """What an issue body needs: the probe, the registry entry, how to reproduce, the trend."""

    report: EvalReport | None  # the probe that quarantined it, or the nightly probe
    entry: Entry
    replay: str  # e.g. "firewall replay triage-tone --seed 1234"
    trend: str = ""  # sparkline of recent medians
    release_after: int | None = None  # stable nightly probes needed, for the status block


class NotPlanned(BaseModel):
    """An eval's issue that a person closed as not planned."""

    model_config = ConfigDict(frozen=True)

    number: int
    closed_at: Timestamp | None = None


class IssueTracker(Protocol):
    """Every method raises ``IssueError``: ``IssueGone``/``IssueRefused`` cost one eval only."""

    notes: list[str]  # what was done only in part, for the run's warnings

    def open_or_comment(self, eval_id: str, ctx: IssueContext) -> int | None:
        """A new quarantine: comment on the eval's open issue, or open one; its number."""

    def adopt_or_open(self, eval_id: str, ctx: IssueContext) -> int | None:
        """Catch-up: the eval's open issue, or a new one; None if it was closed as not planned."""

    def update_status(self, eval_id: str, issue: int, ctx: IssueContext, event: Event) -> None:
        """Refresh the status block; comment on a change of state; close on release."""

    def close(self, eval_id: str, issue: int | None, message: str) -> None:
        """Comment and close the eval's issue (the open one found by marker when None)."""

    def open_issues(self) -> dict[str, int]:
        """Open issues that carry the label and a marker: eval id -> issue number."""

    def not_planned(self) -> dict[str, NotPlanned]:
        """Evals whose latest issue a person closed as not planned."""

    def record_candidate(
        self, eval_id: str, candidate: Candidate, owner: str | None = None
    ) -> int | None:
        """Record a candidate on the eval's open issue, or open one (assigned to ``owner``);
        its number."""

    def candidates(self) -> dict[str, Candidate]:
        """The latest candidate on each open issue that records one: eval id -> candidate."""

    def dismiss_candidate(self, eval_id: str, reprobe: ProbeNumbers) -> None:
        """Not reproduced on the default branch: say so with the numbers, close as completed."""

    def note_proposal(self, eval_id: str, pull: int, change: ProposalKind) -> None:
        """Say on the eval's open issue that pull request #pull proposes ``change``."""


class RecordingIssues:
    """A tracker that changes nothing on GitHub and records what it would have done."""

    def __init__(
        self, labels: Sequence[str] = (DEFAULT_LABEL,), echo: Callable[[str], None] | None = None
    ) -> None:
        self.labels = list(labels) or [DEFAULT_LABEL]
        self.actions: list[str] = []
        self.notes: list[str] = []
        self._echo = echo

    def open_or_comment(self, eval_id: str, ctx: IssueContext) -> int | None:
        if ctx.entry.issue is not None:
            self._say(
                f"would comment on issue #{ctx.entry.issue} for {eval_id} (quarantined again)"
            )
            return ctx.entry.issue
        self._say(
            f"would open issue for {eval_id} ({self._details(ctx)}), or comment on its open one"
        )
        return None

    def adopt_or_open(self, eval_id: str, ctx: IssueContext) -> int | None:
        if ctx.entry.issue is not None:
            return ctx.entry.issue  # nothing to do unless it is gone, which only GitHub knows
        self._say(f"would open issue for {eval_id} ({self._details(ctx)}), unless one is open")
        return None

    def update_status(self, eval_id: str, issue: int, ctx: IssueContext, event: Event) -> None:
        closing = " and close it (completed)" if event.kind == "released" else ""
        self._say(f"would update issue #{issue} for {eval_id}{closing}: {event.message}")

    def close(self, eval_id: str, issue: int | None, message: str) -> None:
        which = f"issue #{issue}" if issue is not None else "the open issue"
        self._say(f"would close {which} for {eval_id} (completed): {message}")

    def open_issues(self) -> dict[str, int]:
        return {}

    def not_planned(self) -> dict[str, NotPlanned]:
        return {}

    def record_candidate(
        self, eval_id: str, candidate: Candidate, owner: str | None = None
    ) -> int | None:
        where = f" on pull request #{candidate.pr}" if candidate.pr is not None else ""
        self._say(
            f"would record a candidate for {eval_id}{where} (median {candidate.median}, "
            f"IQR {candidate.iqr}, k {candidate.k}) on its open issue, or open one"
        )
        return None

    def candidates(self) -> dict[str, Candidate]:
        return {}

    def dismiss_candidate(self, eval_id: str, reprobe: ProbeNumbers) -> None:
        self._say(
            f"would dismiss the candidate {eval_id} (median {reprobe.median}, IQR "
            f"{reprobe.iqr}, k {reprobe.k} on the default branch at {to_text(reprobe.at)}) "
            "and close its issue (completed)"
        )

    def note_proposal(self, eval_id: str, pull: int, change: ProposalKind) -> None:
        self._say(f"would say on the issue for {eval_id} that #{pull} proposes its {change}")

    def _details(self, ctx: IssueContext) -> str:
        owner = ctx.entry.owner or (ctx.report.owner if ctx.report else None)
        assignee = f", assignee {owner.removeprefix('@')}" if owner else ""
        return f"labels {', '.join(self.labels)}{assignee}"

    def _say(self, action: str) -> None:
        line = " ".join(action.split())  # eval text may not start a line of its own
        self.actions.append(line)
        if self._echo is not None:
            self._echo(line)


class ScrubbedIssues:
    """A tracker that hands ``tracker`` only values without ``secrets`` in them."""

    def __init__(self, tracker: IssueTracker, secrets: Secrets) -> None:
        self.tracker = tracker
        self.secrets = secrets
        self.notes = tracker.notes

    @property
    def left_closed(self) -> dict[str, int]:
        """The wrapped tracker's: issues closed as not planned that a gate left closed."""
        held: dict[str, int] = getattr(self.tracker, "left_closed", {})
        return held

    def open_or_comment(self, eval_id: str, ctx: IssueContext) -> int | None:
        return self.tracker.open_or_comment(eval_id, self._context(ctx))

    def adopt_or_open(self, eval_id: str, ctx: IssueContext) -> int | None:
        return self.tracker.adopt_or_open(eval_id, self._context(ctx))

    def update_status(self, eval_id: str, issue: int, ctx: IssueContext, event: Event) -> None:
        message = self.secrets.scrub(event.message)
        scrubbed = dataclasses.replace(event, message=message)
        self.tracker.update_status(eval_id, issue, self._context(ctx), scrubbed)

    def close(self, eval_id: str, issue: int | None, message: str) -> None:
        self.tracker.close(eval_id, issue, self.secrets.scrub(message))

    def open_issues(self) -> dict[str, int]:
        return self.tracker.open_issues()

    def not_planned(self) -> dict[str, NotPlanned]:
        return self.tracker.not_planned()

    def record_candidate(
        self, eval_id: str, candidate: Candidate, owner: str | None = None
    ) -> int | None:
        return self.tracker.record_candidate(eval_id, self.secrets.scrub_model(candidate), owner)

    def candidates(self) -> dict[str, Candidate]:
        return self.tracker.candidates()

    def dismiss_candidate(self, eval_id: str, reprobe: ProbeNumbers) -> None:
        self.tracker.dismiss_candidate(eval_id, self.secrets.scrub_model(reprobe))

    def note_proposal(self, eval_id: str, pull: int, change: ProposalKind) -> None:
        self.tracker.note_proposal(eval_id, pull, change)

    def _context(self, ctx: IssueContext) -> IssueContext:
        scrub = self.secrets
        return dataclasses.replace(
            ctx,
            report=None if ctx.report is None else scrub.scrub_model(ctx.report),
            entry=scrub.scrub_model(ctx.entry),
            replay=scrub.scrub(ctx.replay),
            trend=scrub.scrub(ctx.trend),
        )
