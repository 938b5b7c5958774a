"""The issue tracker's logic on a real GitHub: which issue is an eval's, and what to do with it.

``IssueBook`` implements ``issues.IssueTracker`` over an ``issue_api.IssueAPI``,
the few REST calls it needs, which ``client.RestIssues`` makes through PyGithub
(the only module that imports it). The rules it follows (found by marker, twins,
closed as not planned, candidates) are in the docstring of ``issues``.

Failures: the API raises ``IssueError`` for what stops every eval's issue
(GitHub down, a bad token, a rate limit, issues disabled), and within a
``calling(..., eval_id=...)`` block ``IssueGone`` or ``IssueRefused`` for what
concerns one issue only; ``sync`` turns each into its warning.

**Only what the firewall wrote.** Anyone may open an issue in a public
repository, put an eval's marker in it and close it as not planned, and anyone
may comment. An issue is the firewall's only when its author is the token's own
identity or it carries the firewall's label (the first of ``labels``), which
only someone with triage access can set: GitHub drops it, silently, from an
issue anyone else opens. A comment is the firewall's only when its author is
the token's identity, or the app (a ``[bot]`` login, which no person can have)
that opened the trusted issue it is on. The token's identity is learnt once a
run: ``GET /user`` answers a person's token with its login. An installation
token (Actions' ``GITHUB_TOKEN``, an app's) is refused it, and has no other way
to ask (``GET /app`` needs the app's own key): its identity is then taken to be
``github-actions[bot]``, the author of what Actions' token writes. An app's is
known from what it wrote: the issue this run opens, and every labelled issue of
this scope opened by a ``[bot]`` (an app that may write issues may label them,
so an app's issues carry the label; an app is installed by an admin, and no
outsider can write as one). Any other issue with a marker is ignored, and named
once in the run's notes; no marker is read from it or from an untrusted comment.

**Scoped.** Each configuration keeps the issues of its own scope
(``markers.config_scope``): the marker of an issue of another scope is not
this tracker's, even under the same label, so two configurations in one
repository neither adopt, update nor close each other's issues.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Iterable, Iterator, Sequence

from firewall.errors import IssueError, IssueGone, IssueRefused
from firewall.github import issue_text as text
from firewall.github.budget import BudgetSpent
from firewall.github.issue_api import CommentView, IssueAPI, IssueView
from firewall.github.issues import (
    DEFAULT_LABEL,
    Candidate,
    IssueContext,
    NotPlanned,
    ProbeNumbers,
    ProposalKind,
)
from firewall.github.markers import (
    eval_marker,
    has_status,
    json_marker,
    marked_eval,
    read_markers,
    recorded_state,
    replace_marker,
    replace_status,
    scope_name,
    with_scope,
)
from firewall.lifecycle import Entry, Event

ACTIONS_BOT = "github-actions[bot]"  # who writes with the GITHUB_TOKEN of GitHub Actions
MAX_OPEN_SCANNED = 1000  # open issues read to find one whose label GitHub dropped
MAX_CLOSED_SCANNED = 300  # recently closed issues read for "not planned", labelled and not


class IssueBook:
    """The eval issues of one repository, read once a run and kept in step as it goes."""

    def __init__(
        self, api: IssueAPI, labels: Sequence[str] = (DEFAULT_LABEL,), scope: str | None = None
    ) -> None:
        """``scope``: the configuration's (``markers.config_scope``); None the default one."""
        self.api = api
        self.labels = list(labels) or [DEFAULT_LABEL]
        self.scope = scope_name(scope) if scope else None
        self.notes: list[str] = []  # what was done only in part, e.g. an owner not assigned
        self.left_closed: dict[str, int] = {}  # eval -> its issue a person closed as not planned
        self._open: dict[str, IssueView] | None = None
        self._scanned_all = False
        self._declined: dict[str, NotPlanned] | None = None
        self._label_problem: str | None = None
        self._labels_ready = False
        self._labels_stick: bool | None = None
        self._warned_labels = False
        self._own: set[str] | None = None  # the token's identity, lower-case, once learnt
        self._apps: set[str] = set()  # [bot]s that opened labelled issues of this scope
        self._ignored: set[int] = set()  # issues with a marker the firewall did not write

    # --- the tracker interface

    def open_or_comment(self, eval_id: str, ctx: IssueContext) -> int:
        existing = self._find(eval_id, f"open an issue for {eval_id}")
        if existing is None:
            return self._create(
                eval_id, text.issue_title(eval_id), text.render_body(eval_id, ctx), _owner(ctx)
            )
        # A comment only on a change of state: a candidate becomes a quarantine, or the issue
        # last said stable or errored. An issue that says unstable already (the nightly
        # confirms a candidate each night until its adoption is merged) has its block
        # refreshed in place, and nothing more.
        changed = not has_status(existing.body) or recorded_state(existing.body) != "unstable"
        adopted = existing.title == text.candidate_title(eval_id)
        status = text.status_view(ctx, None, "unstable")
        body = replace_status(
            existing.body, text.render_template("issue_status.md.j2", status=status)
        )
        verb = "comment on" if changed else "update"
        with self._on(f"{verb} issue #{existing.number} for {eval_id}", eval_id, existing.number):
            if changed:
                self.api.comment(
                    existing.number,
                    text.render_template(
                        "issue_comment_quarantined.md.j2", **text.quarantine_view(eval_id, ctx)
                    ),
                )
            if adopted:
                self.api.edit_issue(existing.number, title=text.issue_title(eval_id))
            if body != existing.body:
                self.api.edit_issue(existing.number, body=body)
        title, said = text.issue_title(eval_id), existing.comments + int(changed)
        self._remember(
            eval_id, existing.model_copy(update={"body": body, "title": title, "comments": said})
        )
        if adopted:
            self._adopt_owner(eval_id, existing, _owner(ctx))
        return existing.number

    def adopt_or_open(self, eval_id: str, ctx: IssueContext) -> int | None:
        action = f"open an issue for {eval_id}"
        existing = self._find(eval_id, action) or self._known(eval_id, ctx.entry)
        if existing is not None and existing.state != "closed":
            self._remember(eval_id, existing)
            self._adopt_owner(eval_id, existing, _owner(ctx))
            return existing.number
        if existing is not None and _not_planned(existing):
            self.left_closed[eval_id] = existing.number  # the team's decision: it stays closed
            return None
        declined = None if existing is not None else self._declined_since(eval_id, ctx.entry)
        if declined is not None:
            self.left_closed[eval_id] = declined
            return None
        number = self._create(
            eval_id, text.issue_title(eval_id), text.render_body(eval_id, ctx), _owner(ctx)
        )
        if existing is not None:  # closed otherwise (by hand as completed, as a twin)
            how = (existing.state_reason or "completed").replace("_", " ")
            self.notes.append(
                f"issue #{existing.number} for {eval_id} was closed ({how}) while {eval_id} is "
                f"still quarantined: opened issue #{number} for it; a quarantine ends with a "
                f"release (`firewall quarantine release {eval_id}`), not with its issue"
            )
        return number

    def update_status(self, eval_id: str, issue: int, ctx: IssueContext, event: Event) -> None:
        action = f"update issue #{issue} for {eval_id}"
        found = self._open_or_marked(eval_id, issue, action)
        if _not_planned(found):
            return  # the team's decision: the firewall neither comments nor reopens
        state = "unstable" if event.kind == "quarantined" else event.kind
        block = text.render_template(
            "issue_status.md.j2", status=text.status_view(ctx, event, state)
        )
        updated = replace_status(found.body, block)
        action = f"update issue #{found.number} for {eval_id}"
        if updated != found.body:
            with self._on(action, eval_id, found.number):
                self.api.edit_issue(found.number, body=updated)
        comment = text.render_template("issue_comment_event.md.j2", **dataclasses.asdict(event))
        if event.kind == "released":
            if found.state != "closed":
                self._close(eval_id, found.number, text.with_closing(comment, "released"))
        elif recorded_state(found.body) != state:  # every stable night changes only the block
            with self._on(action, eval_id, found.number):
                self.api.comment(found.number, comment)

    def close(self, eval_id: str, issue: int | None, message: str) -> None:
        action = f"close the issue for {eval_id}"
        if issue is None:
            found = self._find(eval_id, action)
        else:
            found = self._open_or_marked(eval_id, issue, action)
        if found is None or found.state == "closed":  # closed by hand already: nothing to say
            return
        comment = text.render_template(
            "issue_comment_closed.md.j2", eval_id=eval_id, message=message
        )
        self._close(eval_id, found.number, text.with_closing(comment, "released"))

    def open_issues(self) -> dict[str, int]:
        action = f"list the open issues labelled {self.labels[0]}"
        return {eval_id: issue.number for eval_id, issue in self._open_issues(action).items()}

    def not_planned(self) -> dict[str, NotPlanned]:
        action = f"list the closed issues labelled {self.labels[0]}"
        if self._declined is None:
            # Without the label too: a token without triage access opened them unlabelled.
            closed: list[IssueView] = []
            with self.api.calling(action):
                for label in (self.labels[0], None) if self._labels_dropped() else self.labels[:1]:
                    closed += self.api.list_issues(
                        state="closed", label=label, limit=MAX_CLOSED_SCANNED
                    )
            latest: dict[str, IssueView] = {}
            for eval_id, view in self._ours(closed):
                if eval_id not in latest or _closed_key(view) > _closed_key(latest[eval_id]):
                    latest[eval_id] = view
            self._declined = {
                eval_id: NotPlanned(number=view.number, closed_at=view.closed_at)
                for eval_id, view in latest.items()
                if _not_planned(view)
            }
        still_open = self._open_issues(action)
        return {e: d for e, d in self._declined.items() if e not in still_open}

    def record_candidate(
        self, eval_id: str, candidate: Candidate, owner: str | None = None
    ) -> int | None:
        action = f"record a candidate for {eval_id}"
        existing = self._find(eval_id, action)
        if existing is None:
            if eval_id in self.not_planned():
                return None  # the team closed the eval's issue as not planned; reopening undoes it
            return self._create(
                eval_id,
                text.candidate_title(eval_id),
                text.render_candidate_body(eval_id, candidate),
                owner,
            )
        again = any(read_markers("candidate", existing.body, Candidate))
        latest = json_marker("candidate", candidate)
        marker_body = replace_marker(existing.body, "candidate", latest)
        action = f"record a candidate on issue #{existing.number} for {eval_id}"
        with self._on(action, eval_id, existing.number):
            self.api.comment(existing.number, text.render_candidate_comment(candidate, again=again))
            self.api.edit_issue(existing.number, body=marker_body)
        now = existing.model_copy(update={"body": marker_body, "comments": existing.comments + 1})
        self._remember(eval_id, now)
        return existing.number

    def candidates(self) -> dict[str, Candidate]:
        action = "list the open candidates"
        self._scan_all(action)
        found: dict[str, Candidate] = {}
        for eval_id, view in sorted(self._open_issues(action).items()):
            records = list(read_markers("candidate", view.body, Candidate))
            if not records:
                continue
            comments: list[CommentView] = []
            if view.comments:
                where = f"read the comments of issue #{view.number} for {eval_id}"
                with (
                    contextlib.suppress(IssueGone, IssueRefused),
                    self._on(where, eval_id, view.number),
                ):
                    comments = self.api.comments(view.number)
                for comment in self._trusted_comments(view, comments):
                    records += read_markers("candidate", comment.body, Candidate)
            found[eval_id] = max(records, key=lambda c: c.at)
        return found

    def dismiss_candidate(self, eval_id: str, reprobe: ProbeNumbers) -> None:
        found = self._find(eval_id, f"dismiss the candidate {eval_id}")
        if found is None:
            return
        recorded = read_markers("candidate", found.body, Candidate)
        latest = max(recorded, key=lambda c: c.at, default=None)
        self._close(eval_id, found.number, text.render_dismissal(eval_id, reprobe, latest))

    def note_proposal(self, eval_id: str, pull: int, change: ProposalKind) -> None:
        found = self._find(eval_id, f"note the proposal #{pull} for {eval_id}")
        marker = text.proposal_marker(pull, change)
        if found is None or marker in found.body:  # said already on an earlier night
            return
        body = replace_marker(found.body, "proposed", marker)
        action = f"note the proposal #{pull} on issue #{found.number} for {eval_id}"
        with self._on(action, eval_id, found.number):
            self.api.comment(found.number, text.render_proposal(eval_id, pull, change))
            self.api.edit_issue(found.number, body=body)
        self._remember(eval_id, found.model_copy(update={"body": body}))

    # --- finding an eval's issue

    def _open_issues(self, action: str) -> dict[str, IssueView]:
        if self._open is None:
            with self.api.calling(action):
                listed = self.api.list_issues(
                    state="open", label=self.labels[0], limit=MAX_OPEN_SCANNED
                )
            self._open = self._without_twins(listed)
        return self._open

    def _scan_all(self, action: str) -> None:
        """Every open issue, labelled or not: once a run, for issues whose labels GitHub dropped."""
        self._open_issues(action)
        if self._scanned_all or not self._labels_dropped(action):
            return
        with self.api.calling(action):
            listed = self.api.list_issues(state="open", label=None, limit=MAX_OPEN_SCANNED)
        self._open = self._without_twins(listed)
        self._scanned_all = True

    def _labels_dropped(self, action: str = "read the repository's permissions") -> bool:
        """Whether GitHub may have opened the firewall's issues without their label.

        It drops the labels of a token without triage access, silently: only then is an
        eval's issue looked for among every open issue, page by page (a repository may
        hold thousands), and not in the listing filtered by the label alone.
        """
        if self._labels_stick is None:
            with self.api.calling(action):
                self._labels_stick = self.api.labels_stick()
        return not self._labels_stick

    def _find(self, eval_id: str, action: str) -> IssueView | None:
        if eval_id not in self._open_issues(action):
            self._scan_all(action)
        return self._open_issues(action).get(eval_id)

    def _open_or_marked(self, eval_id: str, number: int, action: str) -> IssueView:
        """The eval's open issue if it has one, else issue ``number``, if it is still the eval's."""
        found = self._open_issues(action).get(eval_id)
        if found is not None:
            return found
        with self._on(action, eval_id, number):
            found = self.api.get_issue(number)
        if found.repository.lower() != self.api.repository.lower():
            raise IssueGone(
                f"issue #{number} for {eval_id} was transferred to {found.repository}; "
                "the firewall forgets its number and finds the eval's issue here again "
                "by its marker, or opens a new one",
                eval_id=eval_id,
                number=number,
            )
        if marked_eval(found.body, self.scope) != eval_id:
            raise IssueGone(
                f"issue #{number} is not the firewall's issue for {eval_id} (no marker "
                f"{eval_marker(eval_id, self.scope)} in its body); left it alone; the firewall "
                "forgets its number and finds the eval's issue again by its marker, or opens "
                "a new one",
                eval_id=eval_id,
                number=number,
            )
        if not self._trusted(found):
            raise IssueGone(
                f"issue #{number} carries the marker for {eval_id} but the firewall did not "
                f"write it ({self._whose(found)}); left it alone; the firewall forgets its "
                "number and finds the eval's issue again by its marker, or opens a new one",
                eval_id=eval_id,
                number=number,
            )
        return found

    def _known(self, eval_id: str, entry: Entry) -> IssueView | None:
        """The issue the entry knows by number, open or closed, if it is still the eval's.

        Open, it is one the listing missed (its label dropped); closed, a person or the
        firewall closed it while the eval stayed quarantined.
        """
        if entry.issue is None:
            return None
        return self._open_or_marked(
            eval_id, entry.issue, f"read issue #{entry.issue} for {eval_id}"
        )

    def _declined_since(self, eval_id: str, entry: Entry) -> int | None:
        """The issue a person closed as not planned while this quarantine lasted, if any."""
        declined = self.not_planned().get(eval_id)
        if declined is None or (
            declined.closed_at is not None and declined.closed_at < entry.since
        ):
            return None
        return declined.number

    def _without_twins(self, listed: list[IssueView]) -> dict[str, IssueView]:
        """Open issues by eval; of two or more with one marker the oldest, the others closed."""
        groups: dict[str, list[IssueView]] = {}
        for eval_id, view in self._ours(listed):
            groups.setdefault(eval_id, []).append(view)
        kept: dict[str, IssueView] = {}
        for eval_id, group in groups.items():
            oldest, *twins = sorted(group, key=lambda v: v.number)
            kept[eval_id] = oldest
            for twin in twins:
                self._close_twin(eval_id, twin.number, oldest.number)
        return kept

    # --- whose an issue is

    def _ours(self, listed: Iterable[IssueView]) -> list[tuple[str, IssueView]]:
        """(eval, issue) for each listed issue of this scope that the firewall wrote; those
        with its marker that it did not write are named once in the notes."""
        marked = [
            (eval_id, view)
            for view in listed
            if (eval_id := marked_eval(view.body, self.scope)) is not None and not view.pull
        ]
        for _, view in marked:  # an app's labelled issues say which app the firewall is
            if self._labelled(view) and view.author.lower().endswith("[bot]"):
                self._apps.add(view.author.lower())
        kept: list[tuple[str, IssueView]] = []
        ignored: list[str] = []
        for eval_id, view in marked:
            if self._trusted(view):
                kept.append((eval_id, view))
            elif view.number not in self._ignored:
                self._ignored.add(view.number)
                ignored.append(f"#{view.number} ({eval_id}, {self._whose(view)})")
        if ignored:
            self.notes.append(
                f"ignored issue {', '.join(ignored)}: it carries the firewall's marker, but "
                f"neither the label {self.labels[0]} (which needs triage access) nor the token's "
                "own author; anyone may open an issue, so the firewall reads markers only "
                "from issues and comments it wrote"
            )
        return kept

    def _trusted(self, view: IssueView) -> bool:
        """Whether the firewall wrote the issue: it has the label, or the token's author."""
        if self._labelled(view):
            return True
        return bool(view.author) and view.author.lower() in self._identity()

    def _labelled(self, view: IssueView) -> bool:
        return any(label.lower() == self.labels[0].lower() for label in view.labels)

    def _trusted_comments(self, issue: IssueView, comments: list[CommentView]) -> list[CommentView]:
        """The comments on a trusted issue that the firewall wrote; the others named once."""
        app = issue.author.lower() if issue.author.lower().endswith("[bot]") else None
        kept, others = [], set()
        for comment in comments:
            author = comment.author.lower()
            if author and (author == app or author in self._identity()):
                kept.append(comment)
            elif "<!-- firewall:" in comment.body:
                others.add(comment.author or "an unknown author")
        if others:
            self.notes.append(
                f"ignored the firewall's markers in comments on issue #{issue.number} by "
                f"{', '.join(sorted(others))}: the firewall reads markers only from comments "
                "it wrote"
            )
        return kept

    def _identity(self) -> set[str]:
        """The token's own logins, lower-case, learnt once a run (see the module docstring)."""
        if self._own is None:
            with self.api.calling("ask GitHub whose token this is (GET /user)"):
                login = self.api.whoami()
            self._own = {(login or ACTIONS_BOT).lower()}
        return self._own | self._apps

    def _whose(self, view: IssueView) -> str:
        return f"opened by {view.author}" if view.author else "its author unknown"

    def _close_twin(self, eval_id: str, twin: int, original: int) -> None:
        action = f"close issue #{twin} for {eval_id} as a duplicate of #{original}"
        try:
            with self._on(action, eval_id, twin):
                self.api.comment(twin, text.render_duplicate(eval_id, original))
                self.api.close_issue(twin, "duplicate")
        except (IssueGone, IssueRefused) as exc:
            self.notes.append(str(exc))

    # --- changing issues

    def _create(self, eval_id: str, title: str, body: str, owner: str | None) -> int:
        action = f"open an issue for {eval_id}"
        with self.api.calling(action, eval_id=eval_id):
            if not self._labels_ready:
                self._label_problem = self.api.ensure_labels(self.labels)
                self._labels_ready = True
            created = self.api.create_issue(title, with_scope(body, self.scope), self.labels)
        if created.author and self._own is None:  # what the token writes is the token's
            self._own = {created.author.lower()}
        elif created.author:
            self._apps.add(created.author.lower())
        self._remember(eval_id, created)
        self._check_labels(eval_id, created)
        if owner:
            self._assign(eval_id, created.number, owner)
        return created.number

    def _adopt_owner(self, eval_id: str, view: IssueView, owner: str | None) -> None:
        """An issue the eval adopts gets its owner, unless a person assigned it already.

        It says so in the run's warnings if GitHub will not, but comments nothing: an issue
        found again on every run would otherwise get the same comment every run.
        """
        if owner and not view.assignees:
            self._assign(eval_id, view.number, owner, comment=False)

    @contextlib.contextmanager
    def _on(self, action: str, eval_id: str, number: int) -> Iterator[None]:
        """A call about one eval's issue; a gone issue is forgotten before the error goes on."""
        try:
            with self.api.calling(action, eval_id=eval_id, number=number):
                yield
        except IssueGone:
            self._forget(eval_id, number)
            raise

    def _remember(self, eval_id: str, view: IssueView) -> None:
        if self._open is not None:
            self._open[eval_id] = view

    def _check_labels(self, eval_id: str, created: IssueView) -> None:
        """GitHub opens the issue and silently drops labels the token may not set: say so once."""
        present = {label.lower() for label in created.labels}
        missing = [name for name in self.labels if name.lower() not in present]
        if not missing or self._warned_labels:
            return
        self._warned_labels = True
        why = f" (creating the label: {self._label_problem})" if self._label_problem else ""
        self.notes.append(
            f"GitHub opened issue #{created.number} for {eval_id} without the label "
            f"{', '.join(missing)}{why}: a token with `issues: write` may open issues, but a "
            "label needs to exist and the token triage (or push) access to the repository; "
            "the firewall still finds its issues again by the marker in their body"
        )

    def _assign(self, eval_id: str, number: int, owner: str, *, comment: bool = True) -> None:
        login = owner.removeprefix("@")
        why = "a team cannot be assigned" if "/" in login else ""
        if not why:
            try:
                with self.api.calling(f"assign {login} to issue #{number}"):
                    assignees = self.api.assign(number, login)
            except BudgetSpent:  # the sync's one warning says the rest; no comment can follow
                self.notes.append(
                    f"issue #{number} for {eval_id} is unassigned: the run's time for GitHub "
                    f"ran out before owner {login} was assigned; assign them by hand"
                )
                return
            except IssueError as exc:
                why = str(exc)
            else:
                # GitHub answers 201 and quietly drops a login it cannot assign.
                if all(user.lower() != login.lower() for user in assignees):
                    why = "GitHub did not accept the login as an assignee"
        if why:
            self.notes.append(
                f"issue #{number} for {eval_id} is unassigned: could not "
                f"assign owner {login}: {why}"
            )
            if not comment:
                return
            with contextlib.suppress(IssueError), self.api.calling(f"comment on #{number}"):
                self.api.comment(
                    number,
                    text.render_template("issue_comment_unassigned.md.j2", owner=login, why=why),
                )

    def _close(self, eval_id: str, number: int, comment: str) -> None:
        with self._on(f"close issue #{number} for {eval_id}", eval_id, number):
            self.api.comment(number, comment)
            self.api.close_issue(number, "completed")
        self._forget(eval_id, number)

    def _forget(self, eval_id: str, number: int) -> None:
        """The eval's issue ``number`` is no longer open (closed, or gone)."""
        kept = self._open or {}
        if eval_id in kept and kept[eval_id].number == number:
            del kept[eval_id]


def _owner(ctx: IssueContext) -> str | None:
    return ctx.entry.owner or (ctx.report.owner if ctx.report else None)


def _not_planned(view: IssueView) -> bool:
    return view.state == "closed" and view.state_reason == "not_planned"


def _closed_key(view: IssueView) -> tuple[dt.datetime, int]:
    return (view.closed_at or dt.datetime.min.replace(tzinfo=dt.timezone.utc), view.number)
