"""CI jobs as GitHub Actions really runs them: the checkout `actions/checkout@v4` makes, the
event payload GitHub sends, and the variables the runner sets.

A job's checkout is never a `git clone`. `actions/checkout` (``git-source-provider.ts``
and ``ref-helper.ts``) does, in an empty directory::

    git init
    git remote add origin URL
    git config --local gc.auto 0
    git -c protocol.version=2 fetch --no-tags --prune --no-recurse-submodules \
        --depth=1 origin +SHA:refs/remotes/origin/BRANCH     (a branch)
                         +SHA:refs/remotes/pull/N/merge      (a pull request)
    git checkout --progress --force -B BRANCH refs/remotes/origin/BRANCH
    git checkout --progress --force refs/remotes/pull/N/merge   (detached HEAD)

so there is no ``refs/remotes/origin/HEAD``, no other branch, one commit of
history, and a pull request's job sits on GitHub's merge commit, detached.

The payloads are the shapes GitHub documents ("Webhook events and payloads") and
sends: a ``schedule`` run's is only ``{"schedule": CRON}``, with no
``repository`` and so no ``default_branch``; a ``push`` and a ``pull_request``
carry ``repository.default_branch``; ``workflow_dispatch`` carries
``repository`` and ``inputs``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path

from gitrepos import GIT_ENV, git

CRON = "17 3 * * *"


def checkout(origin: Path, where: Path, *, ref: str, sha: str) -> Path:
    """A job's workspace as `actions/checkout@v4` makes it for ``ref`` at ``sha``."""
    where.mkdir(parents=True)
    git(where, "init", "--quiet")
    git(where, "remote", "add", "origin", str(origin))
    git(where, "config", "--local", "gc.auto", "0")
    if ref.startswith("refs/heads/"):
        branch = ref.removeprefix("refs/heads/")
        remote_ref = f"refs/remotes/origin/{branch}"
    elif ref.startswith("refs/pull/"):
        branch = None
        remote_ref = f"refs/remotes/pull/{ref.removeprefix('refs/pull/')}"
    else:
        raise ValueError(f"no checkout for {ref!r} in this emulation")
    git(
        where,
        "-c",
        "protocol.version=2",
        "fetch",
        "--quiet",
        "--no-tags",
        "--prune",
        "--no-recurse-submodules",
        "--depth=1",
        "origin",
        f"+{sha}:{remote_ref}",
    )
    if branch is not None:
        git(where, "checkout", "--quiet", "--force", "-B", branch, remote_ref)
    else:
        git(where, "checkout", "--quiet", "--force", remote_ref)
    return where


def tip(origin: Path, branch: str) -> str:
    return git(origin, "rev-parse", f"refs/heads/{branch}")


def open_pull_request(origin: Path, scratch: Path, *, number: int, base: str, head: str) -> str:
    """What GitHub does when a pull request is opened or pushed to: it computes the merge
    of ``head`` into ``base`` and keeps it at ``refs/pull/N/merge`` (and the head at
    ``refs/pull/N/head``). Returns the merge commit's sha."""
    work = scratch / f"merge-{number}-{len(list(scratch.glob(f'merge-{number}-*')))}"
    git(scratch, "clone", "--quiet", str(origin), str(work))
    git(work, "checkout", "--quiet", "--detach", f"origin/{base}")
    git(work, "merge", "--quiet", "--no-ff", "-m", f"Merge {head} into {base}", f"origin/{head}")
    merge = git(work, "rev-parse", "HEAD")
    git(work, "push", "--quiet", "--force", "origin", f"{merge}:refs/pull/{number}/merge")
    git(work, "push", "--quiet", "--force", "origin", f"origin/{head}:refs/pull/{number}/head")
    return merge


def schedule_payload(cron: str = CRON) -> dict[str, object]:
    """All GitHub sends for a ``schedule`` run."""
    return {"schedule": cron}


def repository_json(full_name: str, default_branch: str) -> dict[str, object]:
    owner, name = full_name.split("/")
    return {
        "id": 1296269,
        "name": name,
        "full_name": full_name,
        "private": False,
        "owner": {"login": owner, "type": "Organization"},
        "default_branch": default_branch,
    }


def push_payload(
    full_name: str, default_branch: str, *, branch: str, before: str, after: str
) -> dict[str, object]:
    return {
        "ref": f"refs/heads/{branch}",
        "before": before,
        "after": after,
        "created": False,
        "deleted": False,
        "forced": False,
        "repository": repository_json(full_name, default_branch),
        "pusher": {"name": "octocat"},
        "sender": {"login": "octocat", "type": "User"},
        "commits": [],
        "head_commit": {"id": after},
    }


def pull_request_payload(
    full_name: str,
    default_branch: str,
    *,
    number: int,
    head: str,
    head_sha: str,
    base: str,
    base_sha: str,
    action: str = "synchronize",
) -> dict[str, object]:
    repository = repository_json(full_name, default_branch)
    return {
        "action": action,
        "number": number,
        "pull_request": {
            "number": number,
            "state": "open",
            "head": {"ref": head, "sha": head_sha, "repo": repository},
            "base": {"ref": base, "sha": base_sha, "repo": repository},
            "user": {"login": "octocat", "type": "User"},
        },
        "repository": repository,
        "sender": {"login": "octocat", "type": "User"},
    }


def dispatch_payload(full_name: str, default_branch: str, *, branch: str) -> dict[str, object]:
    return {
        "inputs": {},
        "ref": f"refs/heads/{branch}",
        "repository": repository_json(full_name, default_branch),
        "sender": {"login": "octocat", "type": "User"},
        "workflow": ".github/workflows/firewall-nightly.yml",
    }


@dataclasses.dataclass(frozen=True)
class Job:
    """One job's workspace and the environment its steps run with."""

    workspace: Path
    env: dict[str, str]


def job_env(
    workspace: Path,
    *,
    event_name: str,
    payload: Mapping[str, object],
    ref: str,
    sha: str,
    repository: str,
    head_ref: str = "",
    base_ref: str = "",
    token: str | None = None,
    api_url: str | None = None,
) -> dict[str, str]:
    """The variables the runner sets for a step (``GITHUB_TOKEN`` only where the workflow
    hands it over: a plain ``run:`` step has none)."""
    scratch = workspace.parent / f"{workspace.name}-runner"
    scratch.mkdir(exist_ok=True)
    event_path = scratch / "event.json"
    event_path.write_text(json.dumps(payload))
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GITHUB_", "RUNNER_", "INPUT_")) and key != "CI"
    }
    env.update(
        GIT_ENV,
        CI="true",
        GITHUB_ACTIONS="true",
        GITHUB_EVENT_NAME=event_name,
        GITHUB_EVENT_PATH=str(event_path),
        GITHUB_REF=ref,
        GITHUB_SHA=sha,
        GITHUB_HEAD_REF=head_ref,  # set, and empty, on every event but pull requests
        GITHUB_BASE_REF=base_ref,
        GITHUB_REPOSITORY=repository,
        GITHUB_WORKSPACE=str(workspace),
        GITHUB_WORKFLOW="firewall",
        GITHUB_JOB="firewall",
        GITHUB_RUN_ID="1",
        GITHUB_SERVER_URL="https://github.com",
        GITHUB_STEP_SUMMARY=str(scratch / "summary.md"),
        GITHUB_OUTPUT=str(scratch / "output.txt"),
        RUNNER_TEMP=str(scratch),
    )
    if ref.startswith("refs/heads/"):
        env["GITHUB_REF_NAME"] = ref.removeprefix("refs/heads/")
    elif ref.startswith("refs/pull/"):
        env["GITHUB_REF_NAME"] = ref.removeprefix("refs/pull/")
    if token is not None:
        env["GITHUB_TOKEN"] = token
    if api_url is not None:
        env["GITHUB_API_URL"] = api_url
    return env
