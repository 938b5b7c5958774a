"""Where a command runs: in CI or not, on a pull request or on the default branch.

Which runs write the shared history follows from it: only CI runs on the default
branch, so that the trend is the default branch's and rows of unmerged pull
requests never pollute it. Each CI system says so in its own variables; git
itself answers where none does.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

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
    default_branch: str | None

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
            return cls(
                ci=ci,
                branch=env.get("CI_COMMIT_BRANCH")
                or env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME"),
                pull_request=int(request) if request and request.isdigit() else None,
                default_branch=env.get("CI_DEFAULT_BRANCH") or _remote_default(cwd, remote),
            )
        change = env.get("CHANGE_ID")  # Jenkins multibranch pipelines
        return cls(
            ci=ci,
            branch=env.get("BRANCH_NAME") if env.get("JENKINS_URL") else _current_branch(cwd),
            pull_request=int(change) if change and change.isdigit() else None,
            default_branch=_remote_default(cwd, remote),
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
        default = repository.get("default_branch") if isinstance(repository, dict) else None
        return cls(
            ci=ci,
            branch=branch,
            pull_request=pull_request,
            default_branch=default if isinstance(default, str) else _remote_default(cwd, remote),
        )


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
    return _git(cwd, "symbolic-ref", "--quiet", "--short", "HEAD")


def _remote_default(cwd: Path, remote: str) -> str | None:
    """The remote's default branch as the clone recorded it (refs/remotes/REMOTE/HEAD)."""
    if not remote:
        return None
    head = _git(cwd, "symbolic-ref", "--quiet", "--short", f"refs/remotes/{remote}/HEAD")
    return head.removeprefix(f"{remote}/") if head else None


def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None
