"""The few REST calls the issue tracker makes, as an interface, and the issue as it reads it.

``tracker.IssueBook`` decides; an ``IssueAPI`` calls GitHub (``client.RestIssues``,
through PyGithub). Keeping the two apart keeps PyGithub in one module and the
decisions readable without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from firewall.timeutil import Timestamp


class IssueView(BaseModel):
    """One issue as GitHub returned it, reduced to what the tracker reads."""

    model_config = ConfigDict(frozen=True)

    number: int
    title: str
    body: str
    state: str  # open, closed
    state_reason: str | None = None  # completed, not_planned, duplicate, reopened
    labels: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()  # logins
    repository: str  # OWNER/NAME it lives in now: another one once transferred
    pull: bool = False
    comments: int = 0
    author: str = ""  # the login of whoever opened it
    created_at: Timestamp | None = None
    closed_at: Timestamp | None = None


class CommentView(BaseModel):
    """One comment on an issue: who wrote it, and what."""

    model_config = ConfigDict(frozen=True)

    author: str
    body: str


class IssueAPI(Protocol):
    """The REST calls behind the tracker; every one inside a ``calling`` block."""

    repository: str

    def calling(
        self, action: str, *, eval_id: str | None = None, number: int | None = None
    ) -> AbstractContextManager[None]:
        """Turn failures into one IssueError line; with ``eval_id``, one-issue ones into
        ``IssueGone``/``IssueRefused`` that cost only that eval."""

    def list_issues(self, *, state: str, label: str | None, limit: int) -> list[IssueView]: ...

    def get_issue(self, number: int) -> IssueView: ...

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> IssueView: ...

    def edit_issue(self, number: int, *, title: str | None = None, body: str | None = None) -> None:
        """Change the title or body (cut to GitHub's limit)."""

    def close_issue(self, number: int, reason: str) -> None: ...

    def comment(self, number: int, body: str) -> None: ...

    def comments(self, number: int) -> list[CommentView]: ...

    def whoami(self) -> str | None:
        """The login of the token's own identity, if GitHub tells it: a person's token is
        answered; an installation token (an app's, Actions' ``GITHUB_TOKEN``) is refused,
        and that is None, not a failure."""

    def ensure_labels(self, names: Sequence[str]) -> str | None:
        """Create the missing labels; why GitHub refused to, if it did (not fatal)."""

    def assign(self, number: int, login: str) -> list[str]:
        """Add the assignee; the issue's assignees afterwards."""

    def labels_stick(self) -> bool:
        """Whether the token's issues keep their labels (GitHub drops them, silently, for a
        token without triage access)."""
