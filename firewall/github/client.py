"""The REST calls to GitHub, through PyGithub: the only module that imports it.

GitHub is a side effect that must never hang or change a gate's decision: few,
bounded retries (``transport``), no waiting for a rate limit to reset, every
call within the run's one time budget (``budget``), and every failure is an
``IssueError`` whose one line says what failed. The token is never printed.
An answer PyGithub cannot read (not JSON, an HTML page, JSON of another shape)
is such a failure too, like a 5xx: whatever PyGithub raises on it is caught
around each call into PyGithub (``Session._call``), where the firewall's own
code is only the reading of PyGithub's objects and the cut of a body to
GitHub's limit, so that a bug of the firewall's never passes for GitHub's.

Two kinds of failure (``Session.calling``): what stops every issue (GitHub
down or unreachable, a bad or read-only token, a rate limit, issues disabled)
is an ``IssueError``; what concerns one issue, in a block that names its eval
(deleted, not found, locked, a 422 on that issue), is an ``IssueGone`` or an
``IssueRefused`` that costs only that eval. A transferred issue is followed by
PyGithub (GitHub answers 301) to the repository it now lives in, and
``IssueView.repository`` says which.

No secret leaves through it: every title and body a session sends (issues,
comments, edits, pull requests) goes through ``Session.outgoing``, which takes
out the secrets of the environment the session was built from
(``firewall.secrets``), before it cuts the text to GitHub's limit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Concatenate, ParamSpec, TypeVar

import requests
from github import Auth, BadAttributeException, Github, GithubException
from github.Issue import Issue
from github.PullRequest import PullRequest
from github.Repository import Repository

from firewall.errors import IssueError, PullRequestNotPermitted
from firewall.github.budget import Budget, BudgetSpent
from firewall.github.issue_api import CommentView, IssueView
from firewall.github.issues import DEFAULT_LABEL
from firewall.github.markers import fit
from firewall.github.problems import (
    answer_problem,
    http_problem,
    message_of,
    network_problem,
    not_permitted,
    refusal,
    unreadable,
)
from firewall.github.proposals import Closed, Proposal
from firewall.github.tracker import IssueBook
from firewall.github.transport import DEFAULT_TRANSPORT, Transport, retry_for
from firewall.secrets import Secrets

__all__ = [  # Transport with them: callers build one to hand in
    "GitHubIssues",
    "GitHubPullRequests",
    "GitHubRepository",
    "RestIssues",
    "Session",
    "Transport",
    "default_branch",
    "from_environment",
    "pull_requests_from_environment",
    "session_from_environment",
]

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="Session")

DEFAULT_API_URL = "https://api.github.com"
LABEL_COLOUR = "d93f0b"
LABEL_DESCRIPTION = "An eval the flakiness firewall quarantined"
# What PyGithub raises when an answer is not what it expects: `{not json` is a
# JSONDecodeError, an HTML page or JSON of another shape a TypeError, a KeyError or an
# AttributeError deep inside it, a field of the wrong type a BadAttributeException, an
# issue missing its number a ValidationError of IssueView (a ValueError).
_MISREAD = (ValueError, TypeError, KeyError, AttributeError, IndexError, BadAttributeException)

_REPOSITORY_IN_URL = re.compile(r"/repos/([^/]+/[^/]+)/(?:issues|pulls)/\d+$")


class _Unreadable(Exception):
    """An answer PyGithub could not make sense of; ``Session.calling`` says which call."""


class _BudgetedToken(Auth.Token):
    """The token, asked for its header before every request: past the deadline it refuses,
    so that a call the run gave up on sends nothing more (see ``budget``)."""

    def __init__(self, token: str, budget: Budget) -> None:
        super().__init__(token)
        self._budget = budget

    def authentication(self, headers: dict[str, str]) -> None:
        self._budget.check()
        super().authentication(headers)


class Session:
    """One repository through PyGithub, and the translation of its failures."""

    def __init__(
        self,
        repository: str,
        token: str,
        *,
        base_url: str,
        transport: Transport,
        budget: Budget | None = None,
        secrets: Secrets | None = None,
    ) -> None:
        """``secrets``: what no text sent may hold (default: the token's value alone)."""
        self.repository = repository
        self.base_url = base_url.rstrip("/")
        self.budget = budget or Budget()
        self.secrets = secrets if secrets is not None else Secrets([token])
        self._token = token
        self._transport = transport
        self._client = Github(
            auth=_BudgetedToken(token, self.budget),
            base_url=self.base_url,
            timeout=transport.timeout,
            retry=retry_for(transport),
            per_page=100,
            seconds_between_requests=transport.request_gap or None,
            seconds_between_writes=transport.write_gap or None,
        )
        self._repo: Repository | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.repository!r}, base_url={self.base_url!r})"

    @contextlib.contextmanager
    def calling(
        self, action: str, *, eval_id: str | None = None, number: int | None = None
    ) -> Iterator[None]:
        """Turn whatever PyGithub or the network raises into one IssueError line."""
        error: IssueError
        try:
            yield
        except BudgetSpent as exc:
            error = exc.doing(action)
        except GithubException as exc:
            error = self._refused(action, exc.status, exc.data, exc.headers, eval_id, number)
        except _Unreadable as exc:
            error = IssueError(unreadable(action, str(exc), self.base_url))
        except requests.RequestException as exc:
            error = IssueError(
                f"could not reach GitHub at {self.base_url} to {action}: "
                f"{network_problem(exc, self._transport.timeout)}"
            )
        except RuntimeError as exc:  # PyGithub refuses a redirect to another host or scheme
            if "redirect" not in str(exc):
                raise
            error = IssueError(f"GitHub sent the request to {action} elsewhere: {exc}")
        else:
            return
        error.args = (self._scrub(str(error)),)
        # `from None`: the request behind the exception carries the token in its headers.
        raise error from None

    def _refused(
        self,
        action: str,
        status: int,
        data: object,
        headers: Mapping[str, str] | None,
        eval_id: str | None,
        number: int | None,
    ) -> IssueError:
        """GitHub's refusal of ``action`` in words; a kind of session may say more."""
        return refusal(action, status, data, headers, eval_id=eval_id, number=number)

    def _scrub(self, text: str) -> str:
        return self.secrets.scrub(text.replace(self._token, "***") if self._token else text)

    def outgoing(self, text: str) -> str:
        """A title or body as it may be sent: without secrets, cut to GitHub's limit. Every
        text a session sends goes through here; the secrets go first, so that no cut can
        leave half of one."""
        return fit(self.secrets.scrub(text))

    def _call(self, call: Callable[[], T]) -> T:
        """``call()``, PyGithub at work, within the run's budget; an answer it could not read
        is an ``_Unreadable`` for ``calling`` to word."""

        def reading() -> T:
            try:
                return call()
            except _MISREAD as exc:
                raise _Unreadable(answer_problem(exc)) from exc

        return self.budget.run(reading)

    def _repository(self) -> Repository:
        if self._repo is None:
            repo = self._client.get_repo(self.repository)
            if not isinstance(repo.has_issues, bool):  # PyGithub takes a page for a repository
                raise _Unreadable(f"no `has_issues` in the answer for {self.repository}")
            if repo.has_issues is False:
                raise IssueError(
                    f"issues are disabled in {self.repository}: enable them (Settings -> "
                    "General -> Features -> Issues) or turn the firewall's issues off with "
                    "`[github] issues = false`"
                )
            self._repo = repo
        return self._repo


def _bounded(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
    """The method as one ``Session._call``: under the run's deadline, its answers read."""

    @functools.wraps(method)
    def bounded(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._call(lambda: method(self, *args, **kwargs))

    return bounded


class RestIssues(Session):
    """``tracker.IssueAPI`` through PyGithub; bodies are cut to GitHub's limit on the way out.

    Each method is one ``_bounded`` call: under the run's deadline, its answers read.
    """

    @functools.cached_property
    def _issues(self) -> dict[int, Issue]:  # as last seen, so a change needs no extra read
        return {}

    @_bounded
    def list_issues(self, *, state: str, label: str | None, limit: int) -> list[IssueView]:
        repo = self._repository()
        if label is not None and state == "closed":  # the latest closings first
            listing = repo.get_issues(state=state, labels=[label], sort="updated", direction="desc")
        elif label is not None:
            listing = repo.get_issues(state=state, labels=[label])
        else:
            listing = repo.get_issues(state=state)
        return [self._keep(issue) for issue in itertools.islice(listing, limit)]

    @_bounded
    def get_issue(self, number: int) -> IssueView:
        return self._keep(self._repository().get_issue(number))

    @_bounded
    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> IssueView:
        return self._keep(
            self._repository().create_issue(
                title=self.outgoing(title), body=self.outgoing(body), labels=list(labels)
            )
        )

    @_bounded
    def edit_issue(self, number: int, *, title: str | None = None, body: str | None = None) -> None:
        issue = self._issue(number)
        if title is not None:
            issue.edit(title=self.outgoing(title))
        if body is not None:
            issue.edit(body=self.outgoing(body))

    @_bounded
    def close_issue(self, number: int, reason: str) -> None:
        issue = self._issue(number)
        try:
            issue.edit(state="closed", state_reason=reason)
        except GithubException as exc:
            # PyGithub (2.1.1 on) passes any reason through; a GitHub Enterprise Server that
            # predates "duplicate" answers 422: closed as completed, the comment says the rest.
            if exc.status != 422 or reason == "completed":
                raise
            issue.edit(state="closed", state_reason="completed")

    @_bounded
    def comment(self, number: int, body: str) -> None:
        self._issue(number).create_comment(self.outgoing(body))

    @_bounded
    def comments(self, number: int) -> list[CommentView]:
        return [
            CommentView(author=comment.user.login if comment.user else "", body=comment.body or "")
            for comment in self._issue(number).get_comments()
        ]

    @_bounded
    def whoami(self) -> str | None:
        try:
            login = self._client.get_user().login
        except GithubException as exc:
            # GitHub refuses `GET /user` to an installation token (an app's, and Actions'
            # GITHUB_TOKEN) with this 403; every other refusal is one.
            message = message_of(exc.data).lower()
            if exc.status == 403 and "not accessible by integration" in message:
                return None
            raise
        if not isinstance(login, str) or not login:
            raise _Unreadable("no `login` in the answer for the token's own user")
        return login

    @_bounded
    def ensure_labels(self, names: Sequence[str]) -> str | None:
        repo = self._repository()
        present = {label.name.lower() for label in repo.get_labels()}
        for name in names:
            if name.lower() in present:
                continue
            try:
                repo.create_label(name, LABEL_COLOUR, LABEL_DESCRIPTION)
            except GithubException as exc:
                if exc.status == 422:  # a concurrent run created it first
                    continue
                if exc.status in (403, 404) and "rate limit" not in message_of(exc.data).lower():
                    return self._scrub(_problem(exc))  # the issue may still be opened
                raise
        return None

    @_bounded
    def assign(self, number: int, login: str) -> list[str]:
        issue = self._issue(number)
        issue.add_to_assignees(login)
        return [user.login for user in issue.assignees]

    @_bounded
    def labels_stick(self) -> bool:
        # A user's token: the repository says what it may do (`triage` lets it label). An
        # app's installation token (GITHUB_TOKEN) gets no `permissions`, and labels with
        # `issues: write`.
        permissions = self._repository().raw_data.get("permissions")
        if not isinstance(permissions, dict):
            return True
        return any(permissions.get(level) is True for level in ("triage", "push", "maintain"))

    def _issue(self, number: int) -> Issue:
        if number not in self._issues:
            self._issues[number] = self._repository().get_issue(number)
        return self._issues[number]

    def _keep(self, issue: Issue) -> IssueView:
        view = _view(issue)
        if view.repository.lower() == self.repository.lower():
            self._issues[issue.number] = issue
        return view


class GitHubIssues(IssueBook):
    """The tracker on a real GitHub (or GitHub Enterprise) repository."""

    def __init__(
        self,
        repository: str,
        token: str,
        *,
        labels: Sequence[str] = (DEFAULT_LABEL,),
        base_url: str = DEFAULT_API_URL,
        transport: Transport = DEFAULT_TRANSPORT,
        budget: Budget | None = None,
        secrets: Secrets | None = None,
        scope: str | None = None,
    ) -> None:
        """``scope``: the configuration's issues (``markers.config_scope``; None the default)."""
        self.rest = RestIssues(
            repository,
            token,
            base_url=base_url,
            transport=transport,
            budget=budget,
            secrets=secrets,
        )
        super().__init__(self.rest, labels, scope)
        self.repository = repository
        self.base_url = self.rest.base_url

    def __repr__(self) -> str:
        return f"GitHubIssues({self.repository!r}, base_url={self.base_url!r})"


class GitHubPullRequests(Session):
    """``proposals.PullRequests`` on GitHub: one open pull request per head branch."""

    def propose(self, *, head: str, base: str, title: str, body: str) -> Proposal:
        owner = self.repository.split("/")[0]
        existing = self._open_pull(owner, head, base)
        if existing is not None:
            return self._update(existing, head, title, body)
        text, title = self.outgoing(body), self.outgoing(title)
        with self.calling(f"open a pull request from {head} into {base}"):
            try:
                return self._call(
                    lambda: _proposal(
                        self._repository().create_pull(
                            base=base, head=head, title=title, body=text
                        ),
                        created=True,
                    )
                )
            except GithubException as exc:
                message = _problem(exc).lower()  # a 422 says why in its `errors`
                if exc.status == 403 and "not permitted to create or approve" in message:
                    raise PullRequestNotPermitted(not_permitted(self.repository)) from None
                if exc.status != 422 or "already exists" not in message:
                    raise
                existing = self._open_pull(owner, head, base)  # a concurrent run opened it
                if existing is None:
                    raise
                return self._update(existing, head, title, body)

    def last_closed(self, *, head: str, base: str) -> Closed | None:
        owner = self.repository.split("/")[0]

        def find() -> Closed | None:
            pulls = self._repository().get_pulls(
                state="all", head=f"{owner}:{head}", base=base, sort="created", direction="desc"
            )
            pull = next(iter(pulls), None)
            if pull is None or pull.state != "closed" or pull.merged_at is not None:
                return None
            return Closed(
                number=pull.number,
                url=pull.html_url,
                closed_at=pull.closed_at,
                body=pull.body or "",
            )

        with self.calling(f"find the last pull request from {head} into {base}"):
            return self._call(find)

    def _open_pull(self, owner: str, head: str, base: str) -> Proposal | None:
        def find() -> Proposal | None:
            pulls = self._repository().get_pulls(state="open", head=f"{owner}:{head}", base=base)
            pull = next(iter(pulls), None)
            return None if pull is None else _proposal(pull)

        with self.calling(f"find the open pull request from {head} into {base}"):
            return self._call(find)

    def _update(self, existing: Proposal, head: str, title: str, body: str) -> Proposal:
        text, title = self.outgoing(body), self.outgoing(title)
        with self.calling(f"update pull request #{existing.number} from {head}"):
            self._call(
                lambda: self._repository().get_pull(existing.number).edit(title=title, body=text)
            )
        return existing


class GitHubRepository(Session):
    """The repository itself, for what a job's checkout cannot tell: its default branch."""

    def default_branch(self) -> str:
        with self.calling(f"read the default branch of {self.repository}"):
            name = self._call(lambda: self._client.get_repo(self.repository).default_branch)
            if not isinstance(name, str) or not name:
                raise _Unreadable(f"no `default_branch` in the answer for {self.repository}")
        return name


def default_branch(env: Mapping[str, str]) -> str | None:
    """The default branch of the repository Actions runs in, asked of the API (one call);
    None without a token and a repository. Raises ``IssueError`` when GitHub does not say."""
    repository = session_from_environment(
        GitHubRepository, env, transport=dataclasses.replace(DEFAULT_TRANSPORT, retries=0)
    )
    return repository.default_branch() if repository is not None else None


def from_environment(
    labels: Sequence[str],
    env: Mapping[str, str],
    *,
    transport: Transport = DEFAULT_TRANSPORT,
    budget: Budget | None = None,
    scope: str | None = None,
) -> GitHubIssues | None:
    """The tracker for the repository Actions runs in; None without a token and a repository.

    ``budget``: the run's, shared by every GitHub client of one command (default: a fresh one).
    ``scope``: the configuration's issues (``markers.config_scope``; None the default).
    """
    found = _repository_and_token(env)
    if found is None:
        return None
    return GitHubIssues(
        *found,
        labels=labels,
        base_url=_api_url(env),
        transport=transport,
        budget=budget,
        secrets=Secrets.from_env(env),
        scope=scope,
    )


def pull_requests_from_environment(
    env: Mapping[str, str],
    *,
    transport: Transport = DEFAULT_TRANSPORT,
    budget: Budget | None = None,
) -> GitHubPullRequests | None:
    """Pull requests for the repository Actions runs in; None without a token and a repository."""
    return session_from_environment(GitHubPullRequests, env, transport=transport, budget=budget)


def session_from_environment(
    kind: type[S],
    env: Mapping[str, str],
    *,
    transport: Transport = DEFAULT_TRANSPORT,
    budget: Budget | None = None,
) -> S | None:
    """A ``kind`` of session on the repository Actions runs in (e.g. ``comment.GitHubComment``);
    None without a token and a repository."""
    found = _repository_and_token(env)
    if found is None:
        return None
    return kind(
        *found,
        base_url=_api_url(env),
        transport=transport,
        budget=budget,
        secrets=Secrets.from_env(env),
    )


def _repository_and_token(env: Mapping[str, str]) -> tuple[str, str] | None:
    token, repository = env.get("GITHUB_TOKEN", ""), env.get("GITHUB_REPOSITORY", "")
    if not token or not repository:
        return None
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository):
        raise IssueError(f"GITHUB_REPOSITORY must be OWNER/NAME, got {repository!r}")
    return repository, token


def _api_url(env: Mapping[str, str]) -> str:
    return env.get("GITHUB_API_URL") or DEFAULT_API_URL


def _view(issue: Issue) -> IssueView:
    # Only what the listing's JSON holds: any other attribute costs a request per issue.
    moved = _REPOSITORY_IN_URL.search(issue.url)
    return IssueView(
        number=issue.number,
        title=issue.title or "",
        body=issue.body or "",
        state=issue.state,
        state_reason=issue.state_reason,
        labels=tuple(label.name for label in issue.labels),
        assignees=tuple(user.login for user in issue.assignees),
        repository=moved.group(1) if moved else issue.url,
        pull="/pull/" in issue.html_url,  # `pull_request` would cost a request per issue
        comments=issue.comments,
        author=issue.user.login if issue.user else "",
        created_at=issue.created_at,
        closed_at=issue.closed_at,
    )


def _proposal(pull: PullRequest, *, created: bool = False) -> Proposal:
    return Proposal(number=pull.number, url=pull.html_url, created=created)


def _problem(exc: GithubException) -> str:
    return http_problem(exc.status, exc.data, exc.headers)
