"""The rolling proposal: ONE pull request from ONE fixed branch, opened once, updated in place.

The nightly proposes its registry changes (releases, adoptions of candidates)
on a fixed branch that the caller pushes with git; ``PullRequests.propose``
then opens the pull request from it, or updates the title and body of the one
already open, and returns its number and URL. ``client.GitHubPullRequests``
does it on GitHub; ``RecordingPullRequests`` only says what it would do.

A pull request the maintainers closed without merging is their answer:
``PullRequests.last_closed`` finds it (the newest pull request from the branch,
when none is open and it was not merged), so that the caller does not propose
the same change again.

A repository (or organisation) may not let GitHub Actions open pull requests
("Allow GitHub Actions to create and approve pull requests" off): then
``propose`` raises ``PullRequestNotPermitted``, whose line names the setting
and the alternative token, and the caller deletes the branch it pushed. Any
other failure is an ``IssueError`` like every GitHub failure: the nightly's
decisions stand and the next night tries again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel, ConfigDict


class Proposal(BaseModel):
    """The open pull request that carries the proposal."""

    model_config = ConfigDict(frozen=True)

    number: int
    url: str
    created: bool = False  # False: an open one was updated


class Closed(BaseModel):
    """A proposal closed without merging."""

    model_config = ConfigDict(frozen=True)

    number: int
    url: str
    closed_at: dt.datetime | None
    body: str  # what it proposed, by the marker ``pipeline.propose`` writes in it


class PullRequests(Protocol):
    def propose(self, *, head: str, base: str, title: str, body: str) -> Proposal:
        """Open the pull request from ``head`` into ``base``, or update the open one."""

    def last_closed(self, *, head: str, base: str) -> Closed | None:
        """The newest pull request from ``head`` into ``base`` if it was closed without
        merging; None if there is none, or the newest is open or merged."""


class RecordingPullRequests:
    """Pull requests that change nothing on GitHub and record what they would have done."""

    def __init__(self, echo: Callable[[str], None] | None = None) -> None:
        self.actions: list[str] = []
        self._echo = echo

    def propose(self, *, head: str, base: str, title: str, body: str) -> Proposal:
        said = (
            f"would open a pull request from {head} into {base} ({title}), or update the open one"
        )
        line = " ".join(said.split())  # a title may not start a line of its own
        self.actions.append(line)
        if self._echo is not None:
            self._echo(line)
        return Proposal(number=0, url="", created=False)

    def last_closed(self, *, head: str, base: str) -> Closed | None:
        return None  # it asks GitHub nothing
