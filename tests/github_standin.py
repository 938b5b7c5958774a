"""A stateful stand-in for the slice of GitHub's REST API that the firewall uses.

The real PyGithub client talks to it over HTTP on 127.0.0.1 (a random free
port), under a GitHub Enterprise style prefix (``/api/v3``), so the tests run
the same code paths as production without the internet and without patching.
It keeps issues, comments, labels and pull requests in memory, records every
request (the ``Authorization`` header left out), and behaves as GitHub does
where the firewall must cope with it (shapes and messages from real
exchanges, e.g. PyGithub's tests/ReplayData):

- an issue deleted by hand answers 410 "This issue was deleted"; one
  transferred answers 301 with a Location under ``/repositories/ID/...``
  (PyGithub follows it to the issue in its new repository); a locked one
  refuses comments with 403; a body over 65,536 characters is a 422;
- a token without triage access gets its issue opened and its labels
  silently dropped (``triage=False``); ``has_issues=False`` answers 410
  "Issues are disabled for this repo" on every issue endpoint;
- pull requests share the issues' numbers; one open pull request per head
  and base, a second is a 422 "A pull request already exists for OWNER:BRANCH.";
  a pull request's conversation comments are issue comments on its number, and
  work where issues are disabled;
- a private repository (``private=True``) answers 403 "Resource not accessible by
  integration" to a token without the ``permissions`` a request needs (None: all): a
  pull request read through ``/pulls/N`` needs ``pull-requests: read``, its issue and
  comments ``issues`` or ``pull-requests``; a public one lets any token read;
- comments are listed a page at a time (``per_page``, Link headers), edited
  and deleted by id (``/issues/comments/ID``; a deleted one answers 404), and
  may be a person's (``add_comment``);
- every issue and comment has its author (``user``): what the token writes is
  the token's identity's (``login``), what a test adds is anyone's (``author=``).
  ``GET /user`` answers as GitHub does for the token's kind: a login ending in
  ``[bot]`` is an app's installation token (GitHub Actions' ``GITHUB_TOKEN`` is
  ``github-actions[bot]``), which GitHub refuses with 403 "Resource not accessible
  by integration"; any other login is a person's token, answered with the user.
  By default the token is Actions' own, except with ``triage=False``: an app's
  token with ``issues: write`` may label, so a token that may not is a person's.

It can be told to fail as GitHub does (``FAILURE_MODES``): 5xx, 401, primary
and secondary rate limits (403 or 429, with or without Retry-After), a
read-only token, a 422, Actions not permitted to open pull requests, a stale
list, or a slow answer. And as what stands between a job and GitHub on a bad
day does: a 200 that is not JSON (``{not json``), a single sign-on page in
HTML, JSON of the wrong shape, a body cut short, an answer that trickles in a
byte at a time, one that never comes.

    with GitHubStandIn(assignable={"alice"}) as hub:
        hub.fail("503", method="POST", path=r"/issues$", times=1)
        tracker = GitHubIssues(hub.repository, hub.token, base_url=hub.url, ...)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import threading
import time
import urllib.parse
import zlib
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

JSON = dict[str, Any]
FAILURE_MODES = (
    "500",
    "502",
    "503",
    "401",
    "rate-limit",  # primary: 403, x-ratelimit-remaining 0, reset hours away
    "rate-limit-429",  # primary, as GitHub also answers it
    "secondary-rate-limit",  # 403 with a long Retry-After
    "secondary-rate-limit-429",  # 429 with a long Retry-After
    "secondary-rate-limit-no-retry-after",  # 403, no Retry-After and no reset
    "read-only",
    "422",
    "issues-disabled",
    "actions-may-not-create-pulls",
    "stale",  # 200 and an empty list: a replica that has not seen the latest write yet
    "slow",  # the request takes effect, the answer comes after `delay` s
    "not-json",  # 200 and `{not json`, as JSON
    "html",  # 200 and a single sign-on page, as a proxy in the way answers
    "wrong-shape",  # 200 and JSON, an object where a list belongs and a list for an object
    "truncated",  # 200, the headers promise more than the body that comes before the close
    "trickle",  # the request takes effect; the headers, then one byte every `delay` s
    "no-answer",  # the request is read, nothing is ever sent back
)
# The modes that change how an answer is sent, not what it says: the request takes effect.
DELIVERIES = ("slow", "trickle", "no-answer")
SSO_PAGE = (
    "<!DOCTYPE html><html><head><title>Sign in to your account</title></head>"
    '<body><form action="/sso/login">Single sign-on is required.</form></body></html>'
)
LISTS = r"/(issues|labels|comments|pulls)$"
MAX_BODY = 65_536
DOCS = "https://docs.github.com/rest"


@dataclasses.dataclass(frozen=True)
class Recorded:
    method: str
    path: str  # as requested, prefix included, query left out
    query: dict[str, list[str]]
    headers: dict[str, str]  # without Authorization
    body: Any


@dataclasses.dataclass
class Failure:
    mode: str
    method: str | None  # None: any
    path: str | None  # a regex searched in the path after the prefix; None: any
    times: int | None  # None: for ever
    delay: float

    def matches(self, method: str, path: str) -> bool:
        return (
            (self.method is None or self.method == method)
            and (self.path is None or re.search(self.path, path) is not None)
            and (self.times is None or self.times > 0)
        )


@dataclasses.dataclass
class StoredIssue:
    number: int
    title: str
    body: str
    labels: list[str]
    assignees: list[str] = dataclasses.field(default_factory=list)
    state: str = "open"
    state_reason: str | None = None
    pull: bool = False
    comments: list[str] = dataclasses.field(default_factory=list)
    locked: bool = False
    head: str = ""  # a pull request's branch
    merged_at: str | None = None
    base: str = ""
    repository: str = ""  # where it lives: another repository once transferred
    created_at: str = ""
    closed_at: str | None = None
    comment_authors: dict[int, str] = dataclasses.field(default_factory=dict)  # by index
    author: str = ""  # who opened it; "" the token's identity
    deleted_comments: set[int] = dataclasses.field(default_factory=set)  # 1-based indices

    def live_comments(self) -> list[tuple[int, str]]:
        """(1-based index, body) of the comments not deleted."""
        return [
            (index, body)
            for index, body in enumerate(self.comments, start=1)
            if index not in self.deleted_comments
        ]


@dataclasses.dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    delivery: str = "whole"  # or "truncated", "trickle", "no-answer"
    pace: float = 0.0  # trickle: seconds between two bytes


class GitHubStandIn:
    """Start with ``with``; ``url`` is the API base URL to hand to the client."""

    def __init__(
        self,
        *,
        owner: str = "acme",
        name: str = "widgets",
        prefix: str = "/api/v3",
        token: str = "ghs_standin_secret_token_0123456789",
        assignable: Iterable[str] = ("alice",),
        triage: bool = True,
        has_issues: bool = True,
        private: bool = False,
        permissions: Mapping[str, str] | None = None,
        default_branch: str = "main",
        login: str | None = None,
    ) -> None:
        """``login``: the token's identity (default: ``github-actions[bot]``, or a person's
        login with ``triage=False``)."""
        self.owner, self.name, self.prefix, self.token = owner, name, prefix.rstrip("/"), token
        self.assignable = {login.lower() for login in assignable}
        self.triage, self.has_issues = triage, has_issues
        self.login = login or ("github-actions[bot]" if triage else "ci-maintainer")
        self.private = private
        self.default_branch = default_branch
        self.permissions = None if permissions is None else dict(permissions)
        self.issues: dict[int, StoredIssue] = {}
        self.deleted: set[int] = set()
        self.moved: dict[int, StoredIssue] = {}  # old number here -> the issue in its new home
        self.labels: dict[str, JSON] = {}
        self.requests: list[Recorded] = []
        self.failures: list[Failure] = []
        self._clock = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    @property
    def repository(self) -> str:
        return f"{self.owner}/{self.name}"

    def __enter__(self) -> GitHubStandIn:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stopping.set()  # ends any slow answer at once
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- what a test sets up and looks at

    def fail(
        self,
        mode: str,
        *,
        method: str | None = None,
        path: str | None = None,
        times: int | None = None,
        delay: float = 3.0,
    ) -> None:
        """Answer matching requests with ``mode`` (see FAILURE_MODES) ``times`` times.

        ``delay``: how late a slow answer comes, and the seconds between two bytes of a
        trickle.
        """
        assert mode in FAILURE_MODES, mode
        with self._lock:
            self.failures.append(Failure(mode, method, path, times, delay))

    def heal(self) -> None:
        with self._lock:
            self.failures.clear()

    def add_issue(
        self,
        title: str,
        body: str,
        labels: Iterable[str] = (),
        *,
        state: str = "open",
        state_reason: str | None = None,
        pull: bool = False,
        author: str | None = None,
    ) -> int:
        """An issue as ``author`` opened it (default: the token's identity)."""
        with self._lock:
            for name in labels:
                self.labels.setdefault(name, {"color": "ededed", "description": None})
            issue = self._new_issue(title, body, list(labels), pull=pull)
            issue.author = author or ""
            if state == "closed":
                self._close(issue, state_reason or "completed")
            return issue.number

    def close_by_hand(self, number: int, reason: str) -> None:
        """A person closes the issue, e.g. as "not_planned"."""
        with self._lock:
            self._close(self.issues[number], reason)

    def close_pull(self, number: int, *, merged: bool = False) -> None:
        """A maintainer merges the pull request, or closes it without merging."""
        with self._lock:
            pull = self.issues[number]
            self._close(pull, "completed")
            pull.merged_at = pull.closed_at if merged else None

    def delete_issue(self, number: int) -> None:
        """Deleted by an admin: GitHub answers 410 for it from now on."""
        with self._lock:
            del self.issues[number]
            self.deleted.add(number)

    def transfer_issue(self, number: int, to: str = "acme/elsewhere") -> StoredIssue:
        """Transferred to another repository, where it gets a number of its own."""
        with self._lock:
            issue = self.issues.pop(number)
            issue.repository, issue.number = to, 9000 + number
            self.moved[number] = issue
            return issue

    def lock_issue(self, number: int) -> None:
        with self._lock:
            self.issues[number].locked = True

    def add_comment(self, number: int, body: str, *, author: str = "octocat") -> int:
        """A comment written by a person; its id."""
        with self._lock:
            issue = self.issues[number]
            issue.comments.append(body)
            issue.comment_authors[len(issue.comments)] = author
            return _comment_id(issue, len(issue.comments))

    def delete_comment(self, number: int, index: int) -> None:
        """A person deletes the issue's ``index``-th comment (1-based)."""
        with self._lock:
            self.issues[number].deleted_comments.add(index)

    def comments_on(self, number: int) -> list[str]:
        """The bodies of the issue's (or pull request's) comments that are not deleted."""
        return [body for _, body in self.issues[number].live_comments()]

    def open_issues(self) -> list[StoredIssue]:
        return [i for i in self.issues.values() if i.state == "open" and not i.pull]

    def pulls(self) -> list[StoredIssue]:
        return [issue for issue in self.issues.values() if issue.pull]

    def calls(self, method: str | None = None, path: str = "") -> list[Recorded]:
        """Recorded requests with this method whose path (after the prefix) matches a regex."""
        return [
            r
            for r in self.requests
            if (method is None or r.method == method)
            and re.search(path, r.path.removeprefix(self.prefix))
        ]

    # --- the API

    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: Any) -> Reply:
        parsed = urllib.parse.urlsplit(raw_path)
        query = urllib.parse.parse_qs(parsed.query)
        visible = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        with self._lock:
            self.requests.append(Recorded(method, parsed.path, query, visible, body))
            failure = next((f for f in self.failures if f.matches(method, parsed.path)), None)
            if failure is not None and failure.times is not None:
                failure.times -= 1
        if not parsed.path.startswith(self.prefix + "/"):
            return _not_found()
        path = parsed.path[len(self.prefix) :]
        if failure is not None and failure.mode == "stale":
            return Reply(200, [])
        if failure is not None and failure.mode not in DELIVERIES:
            return _failure(failure.mode, listing=re.search(LISTS, path) is not None)
        if headers.get("Authorization") not in (f"token {self.token}", f"Bearer {self.token}"):
            return _failure("401")
        with self._lock:
            permitted = self._permitted(method, path)
            reply = self._route(method, path, query, body) if permitted else _failure("read-only")
        if failure is None:
            return reply
        if failure.mode == "slow":  # the request took effect, the answer comes late
            self._stopping.wait(failure.delay)
            return reply
        return dataclasses.replace(reply, delivery=failure.mode, pace=failure.delay)

    def wait(self, seconds: float | None) -> bool:
        """Sleep until ``seconds`` pass (None: for ever) or the stand-in stops; whether it
        stopped."""
        return self._stopping.wait(seconds)

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Reply:
        moved = re.fullmatch(r"/repositories/\d+/issues/(\d+)(/comments)?", path)
        if moved:
            found = [i for i in self.moved.values() if i.number == int(moved.group(1))]
            return (
                self._on_issue(method, moved.group(2) or "", found[0], body)
                if found
                else _not_found()
            )
        if path == "/user" and method == "GET":
            return self._authenticated_user()
        repo = f"/repos/{self.owner}/{self.name}"
        if not (path == repo or path.startswith(repo + "/")):
            return _not_found()
        rest = path[len(repo) :]
        if rest == "" and method == "GET":
            return Reply(200, self._repo_json())
        if rest.startswith("/issues") and not self.has_issues and not self._conversation(rest):
            return _failure("issues-disabled")
        if rest == "/issues" and method == "GET":
            return self._list_issues(path, query)
        if rest == "/issues" and method == "POST":
            return self._create_issue(body)
        if rest == "/labels" and method == "GET":
            return Reply(200, [self._label_json(name) for name in self.labels])
        if rest == "/labels" and method == "POST":
            return self._create_label(body)
        if (match := re.fullmatch(r"/labels/([^/]+)", rest)) and method == "GET":
            name = urllib.parse.unquote(match.group(1))
            return Reply(200, self._label_json(name)) if name in self.labels else _not_found()
        if rest.startswith("/pulls"):
            return self._on_pulls(method, rest, query, body)
        if comment := re.fullmatch(r"/issues/comments/(\d+)", rest):
            return self._on_comment(method, int(comment.group(1)), body)
        match = re.fullmatch(r"/issues/(\d+)(/comments|/assignees)?", rest)
        if match is None:
            return _not_found()
        number, sub = int(match.group(1)), match.group(2) or ""
        if number in self.deleted:
            return Reply(410, {"message": "This issue was deleted", "documentation_url": DOCS})
        if number in self.moved:
            home = self.moved[number]
            location = f"{self.url}/repositories/{zlib.crc32(home.repository.encode())}"
            location += f"/issues/{home.number}{sub}"
            message = {"message": "Moved Permanently", "url": location, "documentation_url": DOCS}
            return Reply(301, message, {"Location": location})
        if number not in self.issues:
            return _not_found()
        return self._on_issue(method, sub, self.issues[number], body, query)

    def _permitted(self, method: str, path: str) -> bool:
        """Whether a GITHUB_TOKEN with ``permissions`` (None: all) may make this request, as
        GitHub decides it: what a public repository shows anyone reads without a permission,
        and a pull request's issue and conversation need `issues` or `pull-requests`."""
        if self.permissions is None or path == "/user":
            return True
        rest = path.removeprefix(f"/repos/{self.owner}/{self.name}")
        if rest == "":
            return True  # metadata: every token reads it
        needed = "read" if method == "GET" else "write"
        if needed == "read" and not self.private:
            return True
        if rest.startswith("/pulls"):
            scopes = ["pull-requests"]
        elif self._conversation(rest):
            scopes = ["issues", "pull-requests"]
        else:
            scopes = ["issues"]
        granted = [self.permissions.get(scope, "none") for scope in scopes]
        return any(level == "write" or level == needed for level in granted)

    def _conversation(self, rest: str) -> bool:
        """Whether the path is a pull request's issue or its comments, which issues being off
        leaves be (GitHub serves every pull request through the issue endpoints)."""
        listing = re.fullmatch(r"/issues/(\d+)(?:/comments)?", rest)
        single = re.fullmatch(r"/issues/comments/(\d+)", rest)
        number = int(listing.group(1)) if listing else int(single.group(1)) // 1000 if single else 0
        return number in self.issues and self.issues[number].pull

    def _on_comment(self, method: str, comment_id: int, body: Any) -> Reply:
        issue = self.issues.get(comment_id // 1000)
        index = comment_id % 1000
        if issue is None or not 0 < index <= len(issue.comments) or index in issue.deleted_comments:
            return _not_found()
        if method == "GET":
            return Reply(200, self._comment_json(issue, index))
        if method == "PATCH":
            if len(body.get("body") or "") > MAX_BODY:
                return _too_long("IssueComment")
            issue.comments[index - 1] = body["body"]
            return Reply(200, self._comment_json(issue, index))
        if method == "DELETE":
            issue.deleted_comments.add(index)
            return Reply(204)
        return Reply(405, {"message": "Method Not Allowed"})

    def _on_issue(
        self,
        method: str,
        sub: str,
        issue: StoredIssue,
        body: Any,
        query: dict[str, list[str]] | None = None,
    ) -> Reply:
        query = query or {}
        if sub == "" and method == "GET":
            return Reply(200, self._issue_json(issue))
        if sub == "" and method == "PATCH":
            if len(body.get("body") or "") > MAX_BODY:
                return _too_long("Issue")
            if body.get("state_reason") not in (
                None,
                "completed",
                "not_planned",
                "duplicate",
                "reopened",
            ):
                return _failure("422")
            for field in ("title", "body"):
                if field in body:
                    setattr(issue, field, body[field])
            if body.get("state") == "closed" and issue.state != "closed":
                self._close(issue, body.get("state_reason") or "completed")
            elif body.get("state") == "open" and issue.state != "open":
                issue.state, issue.state_reason, issue.closed_at = "open", "reopened", None
            return Reply(200, self._issue_json(issue))
        if sub == "/comments" and method == "POST":
            if issue.locked:
                return Reply(
                    403,
                    {
                        "message": "Unable to create comment because issue is locked.",
                        "documentation_url": "https://docs.github.com/articles/locking-conversations/",
                    },
                )
            if len(body["body"]) > MAX_BODY:
                return _too_long("IssueComment")
            issue.comments.append(body["body"])
            issue.comment_authors[len(issue.comments)] = self.login
            return Reply(201, self._comment_json(issue, len(issue.comments)))
        if sub == "/comments" and method == "GET":
            comments = [self._comment_json(issue, index) for index, _ in issue.live_comments()]
            return self._page(
                f"/repos/{issue.repository}/issues/{issue.number}/comments", query, comments
            )
        if sub == "/assignees" and method == "POST":
            # Like GitHub: 201, and a login that cannot be assigned is quietly left out.
            for login in body.get("assignees", []):
                if login.lower() in self.assignable and login not in issue.assignees:
                    issue.assignees.append(login)
            return Reply(201, self._issue_json(issue))
        return Reply(405, {"message": "Method Not Allowed"})

    def _list_issues(self, path: str, query: dict[str, list[str]]) -> Reply:
        state = query.get("state", ["open"])[0]
        wanted = [n.lower() for n in query.get("labels", [""])[0].split(",") if n]
        found = [
            issue
            for issue in sorted(self.issues.values(), key=lambda i: -i.number)
            if state in ("all", issue.state)
            and all(n in [label.lower() for label in issue.labels] for n in wanted)
        ]
        if query.get("sort", [""])[0] == "updated":  # closing is the last update here
            found.sort(key=lambda i: i.closed_at or i.created_at, reverse=True)
        return self._page(path, query, [self._issue_json(issue) for issue in found])

    def _page(self, path: str, query: dict[str, list[str]], items: list[JSON]) -> Reply:
        per_page = int(query.get("per_page", ["30"])[0])
        page = int(query.get("page", ["1"])[0])
        last = max(1, -(-len(items) // per_page))
        headers = {}
        if page < last:

            def link(number: int) -> str:
                params = {k: v[0] for k, v in query.items()} | {"page": str(number)}
                return f"<{self.url}{path}?{urllib.parse.urlencode(params)}>"

            headers["Link"] = f'{link(page + 1)}; rel="next", {link(last)}; rel="last"'
        return Reply(200, items[(page - 1) * per_page : page * per_page], headers)

    def _create_issue(self, body: JSON) -> Reply:
        assignees = body.get("assignees", [])
        if any(login.lower() not in self.assignable for login in assignees):
            return _failure("422")
        if len(body.get("body") or "") > MAX_BODY:
            return _too_long("Issue")
        labels = body.get("labels", []) if self.triage else []  # dropped without a word
        for name in labels:
            self.labels.setdefault(name, {"color": "ededed", "description": None})
        issue = self._new_issue(body["title"], body.get("body") or "", labels)
        issue.assignees = list(assignees)
        return Reply(201, self._issue_json(issue))

    def _create_label(self, body: JSON) -> Reply:
        if not self.triage:
            return _failure("read-only")
        if body["name"] in self.labels:
            return Reply(
                422,
                {
                    "message": "Validation Failed",
                    "errors": [{"resource": "Label", "code": "already_exists", "field": "name"}],
                },
            )
        self.labels[body["name"]] = {
            "color": body.get("color", "ededed"),
            "description": body.get("description"),
        }
        return Reply(201, self._label_json(body["name"]))

    # --- pull requests: issues with a head and a base, as GitHub numbers them

    def _on_pulls(self, method: str, rest: str, query: dict[str, list[str]], body: Any) -> Reply:
        if rest == "/pulls" and method == "GET":
            state, head = query.get("state", ["open"])[0], query.get("head", [""])[0]
            base = query.get("base", [""])[0]
            found = [
                self._pull_json(pull)
                for pull in sorted(self.pulls(), key=lambda p: -p.number)
                if state in ("all", pull.state)
                and (not head or f"{self.owner}:{pull.head}" == head)
                and (not base or pull.base == base)
            ]
            return self._page(f"/repos/{self.repository}/pulls", query, found)
        if rest == "/pulls" and method == "POST":
            head = body["head"].removeprefix(f"{self.owner}:")
            if any(
                p.state == "open" and (p.head, p.base) == (head, body["base"]) for p in self.pulls()
            ):
                return _pull_exists(f"{self.owner}:{head}")
            opened = self._new_issue(
                body.get("title") or head, body.get("body") or "", [], pull=True
            )
            opened.head, opened.base = head, body["base"]
            return Reply(201, self._pull_json(opened))
        match = re.fullmatch(r"/pulls/(\d+)", rest)
        pull = self.issues.get(int(match.group(1))) if match else None
        if pull is None or not pull.pull:
            return _not_found()
        if method == "PATCH":
            if len(body.get("body") or "") > MAX_BODY:
                return _too_long("PullRequest")
            for field in ("title", "body"):
                if field in body:
                    setattr(pull, field, body[field])
        return Reply(200, self._pull_json(pull))

    def _new_issue(
        self, title: str, body: str, labels: list[str], *, pull: bool = False
    ) -> StoredIssue:
        number = max(self.issues, default=0) + 1
        number = max(number, max(self.deleted | set(self.moved), default=0) + 1)
        self._clock += dt.timedelta(minutes=1)
        self.issues[number] = StoredIssue(
            number,
            title,
            body,
            labels,
            pull=pull,
            repository=self.repository,
            created_at=_text(self._clock),
        )
        return self.issues[number]

    def _close(self, issue: StoredIssue, reason: str) -> None:
        self._clock += dt.timedelta(minutes=1)
        issue.state, issue.state_reason, issue.closed_at = "closed", reason, _text(self._clock)

    def _authenticated_user(self) -> Reply:
        """``GET /user``: a person's token is answered; an installation token (an app's, and
        Actions' GITHUB_TOKEN) is refused, as GitHub refuses it."""
        if self.login.endswith("[bot]"):
            return Reply(
                403,
                {
                    "message": "Resource not accessible by integration",
                    "documentation_url": f"{DOCS}/users/users#get-the-authenticated-user",
                    "status": "403",
                },
            )
        return Reply(200, _user_json(self.login, self.url))

    # --- JSON as GitHub shapes it

    def _repo_json(self) -> JSON:
        return {
            "id": 1,
            "node_id": "R_1",
            "name": self.name,
            "full_name": self.repository,
            "owner": _user_json(self.owner, self.url),
            "private": self.private,
            "url": f"{self.url}/repos/{self.repository}",
            "has_issues": self.has_issues,
            "default_branch": self.default_branch,
            # As GitHub answers a user's token; triage (or push) access lets it label issues.
            "permissions": {
                "admin": False,
                "maintain": False,
                "push": self.triage,
                "triage": self.triage,
                "pull": True,
            },
            "html_url": f"http://127.0.0.1:{self.port}/{self.repository}",
        }

    def _label_json(self, name: str) -> JSON:
        label = self.labels[name]
        return {
            "id": zlib.crc32(name.encode()),
            "name": name,
            "color": label["color"],
            "description": label["description"],
            "default": False,
            "url": f"{self.url}/repos/{self.repository}/labels/{urllib.parse.quote(name)}",
        }

    def _issue_json(self, issue: StoredIssue) -> JSON:
        url = f"{self.url}/repos/{issue.repository}/issues/{issue.number}"
        kind = "pull" if issue.pull else "issues"
        data: JSON = {
            "id": 1000 + issue.number,
            "node_id": f"I_{issue.number}",
            "number": issue.number,
            "title": issue.title,
            "body": issue.body,
            "state": issue.state,
            "state_reason": issue.state_reason,
            "locked": issue.locked,
            "labels": [self._label_json(name) for name in issue.labels if name in self.labels],
            "assignees": [_user_json(login, self.url) for login in issue.assignees],
            "assignee": (_user_json(issue.assignees[0], self.url) if issue.assignees else None),
            "url": url,
            "repository_url": f"{self.url}/repos/{issue.repository}",
            "comments_url": f"{url}/comments",
            "comments": len(issue.live_comments()),
            "html_url": f"http://127.0.0.1:{self.port}/{issue.repository}/{kind}/{issue.number}",
            "user": _user_json(issue.author or self.login, self.url),
            "created_at": issue.created_at,
            "updated_at": issue.closed_at or issue.created_at,
            "closed_at": issue.closed_at,
        }
        if issue.pull:
            data["pull_request"] = {"url": url.replace("/issues/", "/pulls/")}
        return data

    def _pull_json(self, pull: StoredIssue) -> JSON:
        url = f"{self.url}/repos/{self.repository}/pulls/{pull.number}"
        return {
            "id": 5000 + pull.number,
            "number": pull.number,
            "title": pull.title,
            "body": pull.body,
            "state": pull.state,
            "url": url,
            "html_url": f"http://127.0.0.1:{self.port}/{self.repository}/pull/{pull.number}",
            "issue_url": f"{self.url}/repos/{self.repository}/issues/{pull.number}",
            "head": {"ref": pull.head, "label": f"{self.owner}:{pull.head}", "sha": "0" * 40},
            "base": {"ref": pull.base, "label": f"{self.owner}:{pull.base}", "sha": "1" * 40},
            "user": _user_json(pull.author or self.login, self.url),
            "merged": pull.merged_at is not None,
            "merged_at": pull.merged_at,
            "draft": False,
            "created_at": pull.created_at,
            "updated_at": pull.closed_at or pull.created_at,
            "closed_at": pull.closed_at,
        }

    def _comment_json(self, issue: StoredIssue, index: int) -> JSON:
        issue_url = f"{self.url}/repos/{issue.repository}/issues/{issue.number}"
        comment_id = _comment_id(issue, index)
        kind = "pull" if issue.pull else "issues"
        author = issue.comment_authors.get(index, self.login)
        return {
            "id": comment_id,
            "node_id": f"IC_{comment_id}",
            "body": issue.comments[index - 1],
            "url": f"{self.url}/repos/{issue.repository}/issues/comments/{comment_id}",
            "html_url": f"http://127.0.0.1:{self.port}/{issue.repository}/{kind}/"
            f"{issue.number}#issuecomment-{comment_id}",
            "issue_url": issue_url,
            "user": _user_json(author, self.url),
            "created_at": issue.created_at,
            "updated_at": issue.created_at,
        }


def _comment_id(issue: StoredIssue, index: int) -> int:
    return issue.number * 1000 + index


def _user_json(login: str, base: str) -> JSON:
    return {
        "login": login,
        "id": zlib.crc32(login.encode()),
        "type": "Bot" if login.endswith("[bot]") else "User",
        "url": f"{base}/users/{login}",
    }


def _text(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _not_found() -> Reply:
    return Reply(404, {"message": "Not Found", "documentation_url": DOCS})


def _pull_exists(label: str) -> Reply:
    error = {
        "resource": "PullRequest",
        "code": "custom",
        "message": f"A pull request already exists for {label}.",
    }
    return Reply(
        422,
        {
            "message": "Validation Failed",
            "errors": [error],
            "documentation_url": f"{DOCS}/pulls/pulls#create-a-pull-request",
        },
    )


def _too_long(resource: str) -> Reply:
    return Reply(
        422,
        {
            "message": "Validation Failed",
            "errors": [
                {
                    "resource": resource,
                    "code": "custom",
                    "field": "body",
                    "message": "body is too long (maximum is 65536 characters)",
                }
            ],
            "documentation_url": f"{DOCS}/issues/issues#create-an-issue",
        },
    )


def _failure(mode: str, *, listing: bool = False) -> Reply:
    docs = {"documentation_url": DOCS}
    if mode == "not-json":
        return Reply(200, "{not json")
    if mode == "html":
        return Reply(200, SSO_PAGE, {"Content-Type": "text/html; charset=utf-8"})
    if mode == "wrong-shape":
        return Reply(200, {"status": "ok"} if listing else [{"status": "ok"}])
    if mode == "truncated":
        return Reply(200, '[{"number": 1, "title": "cut sh', delivery="truncated")
    if mode in ("500", "503"):
        return Reply(int(mode), {"message": "Server Error", **docs})
    if mode == "502":  # GitHub's load balancer answers in HTML, not JSON
        return Reply(
            502, "<html><body><h1>502 Bad Gateway</h1></body></html>", {"Content-Type": "text/html"}
        )
    if mode == "401":
        return Reply(401, {"message": "Bad credentials", **docs})
    if mode in ("rate-limit", "rate-limit-429"):
        reset = int(time.time()) + 3 * 3600
        return Reply(
            403 if mode == "rate-limit" else 429,
            {"message": "API rate limit exceeded for installation ID 4242.", **docs},
            {
                "X-RateLimit-Limit": "5000",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Used": "5000",
                "X-RateLimit-Reset": str(reset),
                "X-RateLimit-Resource": "core",
            },
        )
    if mode.startswith("secondary-rate-limit"):
        message = {
            "message": "You have exceeded a secondary rate limit. Please wait a "
            "few minutes before you try again.",
            **docs,
        }
        status = 429 if mode.endswith("429") else 403
        headers = {} if mode.endswith("no-retry-after") else {"Retry-After": "3600"}
        return Reply(status, message, {"X-RateLimit-Remaining": "4000", **headers})
    if mode == "read-only":
        return Reply(403, {"message": "Resource not accessible by integration", **docs})
    if mode == "422":
        return Reply(
            422,
            {
                "message": "Validation Failed",
                "errors": [{"resource": "Issue", "code": "invalid", "field": "assignees"}],
                **docs,
            },
        )
    if mode == "issues-disabled":
        return Reply(
            410,
            {
                "message": "Issues are disabled for this repo",
                "documentation_url": f"{DOCS}/issues/issues#list-repository-issues",
            },
        )
    if mode == "actions-may-not-create-pulls":
        return Reply(
            403,
            {
                "message": "GitHub Actions is not permitted to create or approve pull requests.",
                "documentation_url": f"{DOCS}/pulls/pulls#create-a-pull-request",
            },
        )
    raise AssertionError(mode)


def _handler_for(hub: GitHubStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            reply = hub.handle(self.command, self.path, dict(self.headers.items()), body)
            payload = (
                reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            ).encode()
            if reply.status == 204:  # No Content: a body would be read as the next answer
                payload = b""
            if reply.delivery == "no-answer":
                hub.wait(None)
                self.close_connection = True
                return
            try:
                self.send_response(reply.status)
                headers = {"Content-Type": "application/json; charset=utf-8", **reply.headers}
                for key, value in headers.items():
                    self.send_header(key, value)
                promised = len(payload) * (2 if reply.delivery == "truncated" else 1)
                self.send_header("Content-Length", str(promised))
                self.end_headers()
                if reply.delivery == "trickle":
                    self.wfile.flush()
                    for byte in payload:
                        if hub.wait(reply.pace):
                            break
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                else:
                    self.wfile.write(payload)
                if reply.delivery != "whole":
                    self.close_connection = True
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a timeout test)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output quiet

    return Handler
