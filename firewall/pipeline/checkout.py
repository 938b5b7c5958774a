"""Where a command runs: in CI or not, on a pull request or on the default branch.

Which runs write the shared history follows from it: only CI runs on the default
branch, so that the trend is the default branch's and rows of unmerged pull
requests never pollute it. Each CI system says so in its own variables; git
itself answers where none does.

The default branch must be known on every event, and a job's checkout does not
know it: `actions/checkout` fetches one refspec and sets no
``refs/remotes/origin/HEAD``, and a ``schedule`` run's payload is only
``{"schedule": CRON}``, with no ``repository``. So the answer is sought, in
order: the event's ``repository.default_branch``; for ``schedule``, the ref
itself (GitHub runs scheduled workflows on the default branch only); the
clone's ``origin/HEAD``; the remote, asked (``git ls-remote --symref REMOTE
HEAD``). A checkout that still cannot tell keeps the reason, for the run to say.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from firewall.store.git import ask

_TRUE = ("1", "true", "yes")
_PULL_REF = re.compile(r"^refs/pull/(\d+)/")


def in_ci(env: Mapping[str, str]) -> bool:
    """Whether this runs on a CI system (GitHub, GitLab, Jenkins, or anything that sets CI)."""
    return any(
        env.get(name, "").lower() in _TRUE for name in ("CI", "GITHUB_ACTIONS", "GITLAB_CI")
    ) or bool(env.get("JENKINS_URL"))


@dataclasses.dataclass(frozen=True)
class Checkout:
    ci: bool
    branch: str | None  # the branch under test; for a pull request, its head branch
    pull_request: int | None  # the pull (merge) request's number, or None
    # The default branch and how it was learnt (or, when it was not, why not: said by a
    # run that needed it, with the fix). Learnt when a stage first asks, since asking may
    # cost a round trip to the remote (`git ls-remote`): a laptop's run that compares
    # with no branch asks nothing.
    learn_default: Callable[[], tuple[str | None, str]] = dataclasses.field(
        default=lambda: (None, ""), repr=False, compare=False
    )

    @functools.cached_property
    def _default(self) -> tuple[str | None, str]:
        return self.learn_default()

    @property
    def default_branch(self) -> str | None:
        return self._default[0]

    @property
    def default_source(self) -> str:
        return self._default[1]

    @property
    def on_default_branch(self) -> bool:
        return (
            self.pull_request is None
            and self.branch is not None
            and self.branch == self.default_branch
        )

    @property
    def writes_shared_state(self) -> bool:
        """Whether this run's history goes to the state branch: CI on the default branch."""
        return self.ci and self.on_default_branch

    @classmethod
    def find(cls, cwd: Path, env: Mapping[str, str], remote: str) -> Checkout:
        ci = in_ci(env)
        if env.get("GITHUB_ACTIONS") == "true":
            return cls._github(cwd, env, remote, ci=ci)
        if env.get("GITLAB_CI"):
            request = env.get("CI_MERGE_REQUEST_IID")
            named = env.get("CI_DEFAULT_BRANCH")
            return cls(
                ci=ci,
                branch=env.get("CI_COMMIT_BRANCH")
                or env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME"),
                pull_request=int(request) if request and request.isdigit() else None,
                learn_default=(
                    (lambda: (named, "CI_DEFAULT_BRANCH"))
                    if named
                    else (lambda: remote_default(cwd, remote))
                ),
            )
        change = env.get("CHANGE_ID")  # Jenkins multibranch pipelines
        return cls(
            ci=ci,
            branch=env.get("BRANCH_NAME") if env.get("JENKINS_URL") else _current_branch(cwd),
            pull_request=int(change) if change and change.isdigit() else None,
            learn_default=lambda: remote_default(cwd, remote),
        )

    @classmethod
    def _github(cls, cwd: Path, env: Mapping[str, str], remote: str, *, ci: bool) -> Checkout:
        event = _event(env)
        ref = env.get("GITHUB_REF", "")
        number = _PULL_REF.match(ref)
        pull = event.get("pull_request")
        pull_number = pull.get("number") if isinstance(pull, dict) else None
        if number is None and isinstance(pull_number, int):
            pull_request: int | None = pull_number
        else:
            pull_request = int(number.group(1)) if number else None
        if env.get("GITHUB_EVENT_NAME", "").startswith("pull_request") and pull_request is None:
            pull_request = 0  # a pull request whose number the job does not say
        branch = env.get("GITHUB_HEAD_REF") or (
            ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None
        )
        repository = event.get("repository")
        named = repository.get("default_branch") if isinstance(repository, dict) else None

        def learn() -> tuple[str | None, str]:
            if isinstance(named, str) and named:
                return named, "the event's repository.default_branch"
            if env.get("GITHUB_EVENT_NAME") == "schedule" and branch:
                return branch, "GITHUB_REF of a schedule run, always the default branch"
            default, source = remote_default(cwd, remote)
            if default is None:  # persist-credentials: false, a private repository
                return _api_default(env, source)
            return default, source

        return cls(ci=ci, branch=branch, pull_request=pull_request, learn_default=learn)


def _event(env: Mapping[str, str]) -> dict[str, object]:
    """The webhook payload GitHub leaves in GITHUB_EVENT_PATH, or {} when there is none."""
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _current_branch(cwd: Path) -> str | None:
    return ask(cwd, "symbolic-ref", "--quiet", "--short", "HEAD")


def remote_default(cwd: Path, remote: str) -> tuple[str | None, str]:
    """The remote's default branch and how it was learnt, or None and why not.

    A full clone recorded it (``refs/remotes/REMOTE/HEAD``); a CI checkout did not,
    so the remote is asked, which costs one round trip and only where needed.
    """
    if not remote:
        return None, "no git remote is set in [state] remote, to ask for its default branch"
    head = ask(cwd, "symbolic-ref", "--quiet", "--short", f"refs/remotes/{remote}/HEAD")
    if head:
        return head.removeprefix(f"{remote}/"), f"refs/remotes/{remote}/HEAD"
    answer = ask(cwd, "ls-remote", "--symref", remote, "HEAD")
    for line in (answer or "").splitlines():
        pointer, _, name = line.partition("\t")
        if name == "HEAD" and pointer.startswith("ref: refs/heads/"):
            return pointer.removeprefix("ref: refs/heads/"), f"git ls-remote --symref {remote} HEAD"
    return None, (
        f"the checkout has no refs/remotes/{remote}/HEAD and `git ls-remote --symref {remote} "
        "HEAD` did not answer (no remote, or no credentials for it)"
    )


def _api_default(env: Mapping[str, str], why_not: str) -> tuple[str | None, str]:
    """The repository's default branch from GitHub's API, where the job has a token."""
    from firewall.errors import IssueError
    from firewall.github.client import default_branch  # PyGithub loads only when needed

    try:
        named = default_branch(env)
    except IssueError as exc:
        return None, f"{why_not}; and the API: {exc}"
    if named is None:
        return None, f"{why_not}; and no GITHUB_TOKEN to ask the API"
    return named, "the API's repository.default_branch"
