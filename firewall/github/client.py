"""The GitHub side of the issue tracker: the only module that imports PyGithub.

GitHub is a side effect that must never hang or change a gate's decision: few,
bounded retries, no waiting for a rate limit to reset, and every failure is an
``IssueError`` whose one line says what failed. The token is never printed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import http
import re
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType

import requests
from github import Auth, Github, GithubException, RateLimitExceededException
from github.Issue import Issue
from github.Repository import Repository
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import MaxRetryError, ResponseError
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

from firewall.errors import IssueError
from firewall.github.issues import (
    DEFAULT_LABEL,
    IssueContext,
    issue_title,
    marked_eval,
    quarantine_view,
    recorded_state,
    render_body,
    render_template,
    replace_status,
    status_view,
)
from firewall.lifecycle import Event

DEFAULT_API_URL = "https://api.github.com"
LABEL_COLOUR = "d93f0b"
LABEL_DESCRIPTION = "An eval the flakiness firewall quarantined"
MAX_WAIT_S = 10.0  # the longest a CI step waits on GitHub before giving up until the next run


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


class GitHubIssues:
    """The tracker on a real GitHub (or GitHub Enterprise) repository, through PyGithub."""

    def __init__(
        self,
        repository: str,
        token: str,
        *,
        labels: Sequence[str] = (DEFAULT_LABEL,),
        base_url: str = DEFAULT_API_URL,
        transport: Transport = Transport(),
    ) -> None:
        self.repository = repository
        self.labels = list(labels) or [DEFAULT_LABEL]
        self.base_url = base_url.rstrip("/")
        self.notes: list[str] = []  # what was done only in part, e.g. an owner not assigned
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
        self._open: dict[str, Issue] | None = None
        self._labels_ready = False

    def __repr__(self) -> str:
        return f"GitHubIssues({self.repository!r}, base_url={self.base_url!r})"

    def open_or_comment(self, eval_id: str, ctx: IssueContext) -> int:
        action = f"open an issue for {eval_id}"
        existing = self._open_issue_objects(action).get(eval_id)
        if existing is not None:
            with self._calling(f"comment on issue #{existing.number} for {eval_id}"):
                existing.create_comment(
                    render_template(
                        "issue_comment_quarantined.md.j2", **quarantine_view(eval_id, ctx)
                    )
                )
            return existing.number
        with self._calling(action):
            self._ensure_labels()
            issue = self._repository().create_issue(
                title=issue_title(eval_id), body=render_body(eval_id, ctx), labels=self.labels
            )
        self._open_issue_objects(action)[eval_id] = issue
        owner = ctx.entry.owner or (ctx.report.owner if ctx.report else None)
        if owner:
            self._assign(eval_id, issue, owner)
        return issue.number

    def update_status(self, eval_id: str, issue: int, ctx: IssueContext, event: Event) -> None:
        action = f"update issue #{issue} for {eval_id}"
        found = self._marked_issue(eval_id, issue, action)
        body = found.body or ""
        state = "unstable" if event.kind == "quarantined" else event.kind
        block = render_template("issue_status.md.j2", status=status_view(ctx, event, state))
        updated = replace_status(body, block)
        if updated != body:
            with self._calling(action):
                found.edit(body=updated)
        comment = render_template("issue_comment_event.md.j2", **dataclasses.asdict(event))
        if event.kind == "released":
            if found.state != "closed":
                self._close(eval_id, found, comment)
        elif recorded_state(body) != state:  # every stable night changes only the block
            with self._calling(f"comment on issue #{issue} for {eval_id}"):
                found.create_comment(comment)

    def close(self, eval_id: str, issue: int | None, message: str) -> None:
        action = f"close the issue for {eval_id}"
        number = issue if issue is not None else self.open_issues().get(eval_id)
        if number is None:
            return
        found = self._marked_issue(eval_id, number, action)
        if found.state != "closed":  # closed by hand already: nothing left to say
            self._close(
                eval_id,
                found,
                render_template("issue_comment_closed.md.j2", eval_id=eval_id, message=message),
            )

    def open_issues(self) -> dict[str, int]:
        action = f"list the open issues labelled {self.labels[0]}"
        return {
            eval_id: issue.number for eval_id, issue in self._open_issue_objects(action).items()
        }

    # --- the calls behind them

    @contextlib.contextmanager
    def _calling(self, action: str) -> Iterator[None]:
        """Turn whatever PyGithub or the network raises into one IssueError line."""
        try:
            yield
        except GithubException as exc:
            message = f"GitHub refused to {action}: {_http_problem(exc)}"
        except requests.RequestException as exc:
            message = (
                f"could not reach GitHub at {self.base_url} to {action}: "
                f"{_network_problem(exc, self._transport.timeout)}"
            )
        else:
            return
        # `from None`: the request behind the exception carries the token in its headers.
        raise IssueError(message.replace(self._token, "***") if self._token else message) from None

    def _repository(self) -> Repository:
        if self._repo is None:
            self._repo = self._client.get_repo(self.repository)
        return self._repo

    def _open_issue_objects(self, action: str) -> dict[str, Issue]:
        if self._open is None:
            found: dict[str, Issue] = {}
            with self._calling(action):
                for issue in self._repository().get_issues(state="open", labels=[self.labels[0]]):
                    # `pull_request` would cost a request per issue; the URL tells as much.
                    eval_id = marked_eval(issue.body or "")
                    if "/pull/" in issue.html_url or eval_id is None:
                        continue
                    if eval_id not in found or issue.number < found[eval_id].number:
                        found[eval_id] = issue  # a duplicate: keep the oldest
            self._open = found
        return self._open

    def _marked_issue(self, eval_id: str, number: int, action: str) -> Issue:
        with self._calling(action):
            issue = self._repository().get_issue(number)
        if marked_eval(issue.body or "") != eval_id:
            raise IssueError(
                f"issue #{number} is not the firewall's issue for {eval_id} (no "
                f"marker <!-- firewall:eval={eval_id} --> in its body); left it "
                f"alone; set its `issue` to null in the registry to open a new one"
            )
        return issue

    def _ensure_labels(self) -> None:
        if self._labels_ready:
            return
        repo = self._repository()
        present = {label.name.lower() for label in repo.get_labels()}
        for name in self.labels:
            if name.lower() in present:
                continue
            try:
                repo.create_label(name, LABEL_COLOUR, LABEL_DESCRIPTION)
            except GithubException as exc:
                if exc.status != 422:  # 422: a concurrent run created it first
                    raise
        self._labels_ready = True

    def _assign(self, eval_id: str, issue: Issue, owner: str) -> None:
        login = owner.removeprefix("@")
        why = "a team cannot be assigned" if "/" in login else ""
        if not why:
            try:
                with self._calling(f"assign {login} to issue #{issue.number}"):
                    issue.add_to_assignees(login)
            except IssueError as exc:
                why = str(exc)
            else:
                # GitHub answers 201 and quietly drops a login it cannot assign.
                if all(user.login.lower() != login.lower() for user in issue.assignees):
                    why = "GitHub did not accept the login as an assignee"
        if why:
            self.notes.append(
                f"issue #{issue.number} for {eval_id} is unassigned: could not "
                f"assign owner {login}: {why}"
            )
            with contextlib.suppress(IssueError), self._calling(f"comment on #{issue.number}"):
                issue.create_comment(
                    render_template("issue_comment_unassigned.md.j2", owner=login, why=why)
                )

    def _close(self, eval_id: str, issue: Issue, comment: str) -> None:
        with self._calling(f"close issue #{issue.number} for {eval_id}"):
            issue.create_comment(comment)
            issue.edit(state="closed", state_reason="completed")
        if self._open is not None and eval_id in self._open:
            del self._open[eval_id]


def from_environment(
    labels: Sequence[str], env: Mapping[str, str], *, transport: Transport = Transport()
) -> GitHubIssues | None:
    """The tracker for the repository Actions runs in; None without a token and a repository."""
    token, repository = env.get("GITHUB_TOKEN", ""), env.get("GITHUB_REPOSITORY", "")
    if not token or not repository:
        return None
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository):
        raise IssueError(f"GITHUB_REPOSITORY must be OWNER/NAME, got {repository!r}")
    return GitHubIssues(
        repository,
        token,
        labels=labels,
        base_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL,
        transport=transport,
    )


# --- failures, in words


def _http_problem(exc: GithubException) -> str:
    status = exc.status
    data = exc.data
    message = str(data.get("message") or "") if isinstance(data, dict) else ""
    headers = {key.lower(): str(value) for key, value in (exc.headers or {}).items()}
    text = f"{status} {message or _phrase(status)}"
    if isinstance(exc, RateLimitExceededException) or "rate limit" in message.lower():
        return f"{text} ({_rate_limit_hint(headers)}; not waiting: the next run tries again)"
    if status == 401:
        return f"{text} (is GITHUB_TOKEN valid and unexpired?)"
    if status == 403 and "not accessible by integration" in message.lower():
        return (
            f"{text} (a read-only token on a fork PR? the workflow needs `permissions: "
            f"issues: write`)"
        )
    if status == 404:
        return f"{text} (does GITHUB_REPOSITORY name the repository, and can the token see it?)"
    if status >= 500:
        return f"{text} (GitHub is having trouble; the next run tries again)"
    return text


def _rate_limit_hint(headers: Mapping[str, str]) -> str:
    if headers.get("retry-after", "").isdigit():
        return f"GitHub asks to wait {headers['retry-after']} s"
    reset = headers.get("x-ratelimit-reset", "")
    if not reset.isdigit():
        return "rate limited"
    at = dt.datetime.fromtimestamp(int(reset), dt.timezone.utc)
    minutes = max(0, round((at - dt.datetime.now(dt.timezone.utc)).total_seconds() / 60))
    return f"it resets at {at:%H:%M} UTC, in {minutes // 60} h {minutes % 60} min"


def _network_problem(exc: requests.RequestException, timeout: int) -> str:
    text = str(exc)
    if isinstance(exc, requests.Timeout) or "timed out" in text.lower():
        return f"no answer within {timeout} s"
    return f"{type(exc).__name__}: {text[:300]}"


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "error"
