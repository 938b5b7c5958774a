"""The REST calls to GitHub, through PyGithub: the only module that imports it.

GitHub is a side effect that must never hang or change a gate's decision: few,
bounded retries, no waiting for a rate limit to reset, and every failure is an
``IssueError`` whose one line says what failed. The token is never printed.

Two kinds of failure (``Session.calling``): what stops every issue (GitHub
down or unreachable, a bad or read-only token, a rate limit, issues disabled)
is an ``IssueError``; what concerns one issue, in a block that names its eval
(deleted, not found, locked, a 422 on that issue), is an ``IssueGone`` or an
``IssueRefused`` that costs only that eval. A transferred issue is followed by
PyGithub (GitHub answers 301) to the repository it now lives in, and
``IssueView.repository`` says which.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType

import requests
from github import Auth, Github, GithubException
from github.Issue import Issue
from github.Repository import Repository
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import MaxRetryError, ResponseError
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

from firewall.errors import IssueError, IssueGone, IssueRefused, PullRequestNotPermitted
from firewall.github.issue_api import IssueView
from firewall.github.issues import DEFAULT_LABEL
from firewall.github.markers import fit
from firewall.github.problems import http_problem, message_of, network_problem
from firewall.github.proposals import Proposal
from firewall.github.tracker import IssueBook

DEFAULT_API_URL = "https://api.github.com"
LABEL_COLOUR = "d93f0b"
LABEL_DESCRIPTION = "An eval the flakiness firewall quarantined"
MAX_WAIT_S = 10.0  # the longest a CI step waits on GitHub before giving up until the next run

_REPOSITORY_IN_URL = re.compile(r"/repos/([^/]+/[^/]+)/(?:issues|pulls)/\d+$")


@dataclasses.dataclass(frozen=True)
class Transport:
    """How patiently to talk to GitHub; the defaults suit a CI step, tests shrink them."""

    timeout: int = 10  # seconds per request; PyGithub takes whole seconds
    retries: int = 2  # after a 5xx or a dropped connection, reads and idempotent writes only
    backoff: float = 0.5  # seconds before the second retry, doubling, capped at MAX_WAIT_S
    request_gap: float = 0.25  # PyGithub's pacing between any two requests
    write_gap: float = 1.0  # GitHub asks for a second between writes (secondary rate limits)


class _BoundedRetry(Retry):
    """urllib3's Retry that never sleeps longer than MAX_WAIT_S for one attempt.

    A secondary rate limit says 403 or 429 with Retry-After: a short one is
    waited out, a long one ends the attempt at once, and PyGithub raises on
    the response it gets back (``raise_on_status=False``).
    """

    RETRY_AFTER_STATUS_CODES = frozenset({403, 429, 503})

    def get_backoff_time(self) -> float:
        return min(super().get_backoff_time(), MAX_WAIT_S)

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> _BoundedRetry:
        wait = self.get_retry_after(response) if response is not None else None
        if wait is not None and wait > MAX_WAIT_S:
            raise MaxRetryError(_pool, url or "", ResponseError(f"Retry-After {wait:.0f} s"))  # type: ignore[arg-type]
        return super().increment(method, url, response, error, _pool, _stacktrace)


def _retry(transport: Transport) -> Retry:
    # POST is left out: a create that timed out may have happened, and retrying it
    # would open a duplicate; the next run finds the issue by its marker instead.
    return _BoundedRetry(
        total=transport.retries,
        backoff_factor=transport.backoff,
        status_forcelist=(500, 502, 503, 504),
        allowed_methods=frozenset({"GET", "HEAD", "PATCH", "PUT", "DELETE"}),
        raise_on_status=False,
    )


class Session:
    """One repository through PyGithub, and the translation of its failures."""

    def __init__(self, repository: str, token: str, *, base_url: str, transport: Transport) -> None:
        self.repository = repository
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._transport = transport
        self._client = Github(
            auth=Auth.Token(token),
            base_url=self.base_url,
            timeout=transport.timeout,
            retry=_retry(transport),
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
        try:
            yield
        except GithubException as exc:
            error = _refusal(action, exc, eval_id, number)
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

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def _repository(self) -> Repository:
        if self._repo is None:
            repo = self._client.get_repo(self.repository)
            if repo.has_issues is False:
                raise IssueError(
                    f"issues are disabled in {self.repository}: enable them (Settings -> "
                    "General -> Features -> Issues) or turn the firewall's issues off with "
                    "`[github] issues = false`"
                )
            self._repo = repo
        return self._repo


class RestIssues(Session):
    """``tracker.IssueAPI`` through PyGithub; bodies are cut to GitHub's limit on the way out."""

    def __init__(self, repository: str, token: str, *, base_url: str, transport: Transport) -> None:
        super().__init__(repository, token, base_url=base_url, transport=transport)
        self._issues: dict[int, Issue] = {}  # as last seen, so a change needs no extra read

    def list_issues(self, *, state: str, label: str | None, limit: int) -> list[IssueView]:
        repo = self._repository()
        if label is not None and state == "closed":  # the latest closings first
            listing = repo.get_issues(state=state, labels=[label], sort="updated", direction="desc")
        elif label is not None:
            listing = repo.get_issues(state=state, labels=[label])
        else:
            listing = repo.get_issues(state=state)
        return [self._keep(issue) for issue in itertools.islice(listing, limit)]

    def get_issue(self, number: int) -> IssueView:
        return self._keep(self._repository().get_issue(number))

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> IssueView:
        return self._keep(
            self._repository().create_issue(title=title, body=fit(body), labels=list(labels))
        )

    def edit_issue(self, number: int, *, title: str | None = None, body: str | None = None) -> None:
        issue = self._issue(number)
        if title is not None:
            issue.edit(title=title)
        if body is not None:
            issue.edit(body=fit(body))

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

    def comment(self, number: int, body: str) -> None:
        self._issue(number).create_comment(fit(body))

    def comment_bodies(self, number: int) -> list[str]:
        return [comment.body or "" for comment in self._issue(number).get_comments()]

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

    def assign(self, number: int, login: str) -> list[str]:
        issue = self._issue(number)
        issue.add_to_assignees(login)
        return [user.login for user in issue.assignees]

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
        transport: Transport = Transport(),
    ) -> None:
        self.rest = RestIssues(repository, token, base_url=base_url, transport=transport)
        super().__init__(self.rest, labels)
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
        with self.calling(f"open a pull request from {head} into {base}"):
            try:
                pull = self._repository().create_pull(
                    base=base, head=head, title=title, body=fit(body)
                )
            except GithubException as exc:
                message = _problem(exc).lower()  # a 422 says why in its `errors`
                if exc.status == 403 and "not permitted to create or approve" in message:
                    raise PullRequestNotPermitted(_not_permitted(self.repository)) from None
                if exc.status != 422 or "already exists" not in message:
                    raise
                existing = self._open_pull(owner, head, base)  # a concurrent run opened it
                if existing is None:
                    raise
                return self._update(existing, head, title, body)
        return Proposal(number=pull.number, url=pull.html_url, created=True)

    def _open_pull(self, owner: str, head: str, base: str) -> Proposal | None:
        with self.calling(f"find the open pull request from {head} into {base}"):
            pulls = self._repository().get_pulls(state="open", head=f"{owner}:{head}", base=base)
            pull = next(iter(pulls), None)
        return None if pull is None else Proposal(number=pull.number, url=pull.html_url)

    def _update(self, existing: Proposal, head: str, title: str, body: str) -> Proposal:
        with self.calling(f"update pull request #{existing.number} from {head}"):
            pull = self._repository().get_pull(existing.number)
            pull.edit(title=title, body=fit(body))
        return existing


def from_environment(
    labels: Sequence[str], env: Mapping[str, str], *, transport: Transport = Transport()
) -> GitHubIssues | None:
    """The tracker for the repository Actions runs in; None without a token and a repository."""
    found = _repository_and_token(env)
    if found is None:
        return None
    return GitHubIssues(*found, labels=labels, base_url=_api_url(env), transport=transport)


def pull_requests_from_environment(
    env: Mapping[str, str], *, transport: Transport = Transport()
) -> GitHubPullRequests | None:
    """Pull requests for the repository Actions runs in; None without a token and a repository."""
    found = _repository_and_token(env)
    if found is None:
        return None
    return GitHubPullRequests(*found, base_url=_api_url(env), transport=transport)


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
        repository=moved.group(1) if moved else issue.url,
        pull="/pull/" in issue.html_url,  # `pull_request` would cost a request per issue
        comments=issue.comments,
        created_at=issue.created_at,
        closed_at=issue.closed_at,
    )


def _refusal(
    action: str, exc: GithubException, eval_id: str | None, number: int | None
) -> IssueError:
    """Which IssueError a refusal is: one issue's (with ``eval_id``) or everything's."""
    status, message = exc.status, message_of(exc.data)
    said = f"GitHub refused to {action}: {_problem(exc)}"
    if eval_id is None:
        return IssueError(said)
    gone = (status == 410 and "deleted" in message.lower()) or (status == 404 and number)
    if gone:
        return IssueGone(
            f"{said}; the firewall forgets the number of the issue for {eval_id} and finds it "
            "again by its marker, or opens a new one",
            eval_id=eval_id,
            number=number,
        )
    if (status == 403 and "locked" in message.lower()) or status == 422:
        return IssueRefused(said, eval_id=eval_id, number=number)
    return IssueError(said)


def _problem(exc: GithubException) -> str:
    return http_problem(exc.status, exc.data, exc.headers)


def _not_permitted(repository: str) -> str:
    return (
        f"GitHub Actions may not open pull requests in {repository}: allow it under Settings "
        '-> Actions -> General -> Workflow permissions -> "Allow GitHub Actions to create and '
        "approve pull requests\" (and in the organisation's settings), or pass a GitHub App "
        "token or a fine-grained personal access token as the action's `github-token` input, "
        "which also makes the proposal's own checks run (a pull request opened with "
        "GITHUB_TOKEN starts no workflow runs)"
    )
