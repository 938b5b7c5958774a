"""Which runs write the shared history: CI on the default branch, never a pull request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from actions import checkout as actions_checkout
from actions import job_env, open_pull_request, schedule_payload, tip
from gitrepos import GIT_ENV, fresh_clone, git, make_origin

from firewall.pipeline.checkout import Checkout


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)


def event(tmp_path: Path, payload: dict[str, object]) -> str:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return str(path)


def test_a_push_to_the_default_branch_in_actions_writes(tmp_path: Path) -> None:
    env = {
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_EVENT_PATH": event(tmp_path, {"repository": {"default_branch": "main"}}),
    }
    checkout = Checkout.find(tmp_path, env, "origin")
    assert (checkout.branch, checkout.default_branch, checkout.pull_request) == (
        "main",
        "main",
        None,
    )
    assert checkout.writes_shared_state


def test_a_pull_request_in_actions_never_writes(tmp_path: Path) -> None:
    env = {
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_REF": "refs/pull/12/merge",
        "GITHUB_HEAD_REF": "main",  # even a pull request from a fork's main
        "GITHUB_EVENT_PATH": event(
            tmp_path, {"pull_request": {"number": 12}, "repository": {"default_branch": "main"}}
        ),
    }
    checkout = Checkout.find(tmp_path, env, "origin")
    assert checkout.pull_request == 12 and not checkout.writes_shared_state


def test_a_scheduled_nightly_on_the_default_branch_writes(tmp_path: Path) -> None:
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "schedule",
        "GITHUB_REF": "refs/heads/trunk",
        "GITHUB_EVENT_PATH": event(tmp_path, {"repository": {"default_branch": "trunk"}}),
    }
    assert Checkout.find(tmp_path, env, "origin").writes_shared_state


def test_gitlab_merge_requests_and_default_branch(tmp_path: Path) -> None:
    base = {"CI": "true", "GITLAB_CI": "true", "CI_DEFAULT_BRANCH": "main"}
    assert Checkout.find(
        tmp_path, {**base, "CI_COMMIT_BRANCH": "main"}, "origin"
    ).writes_shared_state
    request = {**base, "CI_MERGE_REQUEST_IID": "3", "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "fix"}
    checkout = Checkout.find(tmp_path, request, "origin")
    assert checkout.pull_request == 3 and not checkout.writes_shared_state


def test_elsewhere_git_answers_and_a_laptop_never_writes(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"firewall.toml": ""})
    clone = fresh_clone(origin, tmp_path / "clone")
    laptop = Checkout.find(clone, {}, "origin")
    assert (laptop.branch, laptop.default_branch) == ("main", "main")
    assert laptop.on_default_branch and not laptop.writes_shared_state
    assert Checkout.find(clone, {"CI": "true"}, "origin").writes_shared_state
    feature = fresh_clone(origin, tmp_path / "feature", branch="feature")
    assert not Checkout.find(feature, {"CI": "true"}, "origin").writes_shared_state


def test_jenkins_change_requests_never_write(tmp_path: Path) -> None:
    env = {"JENKINS_URL": "http://127.0.0.1:8080/", "BRANCH_NAME": "PR-5", "CHANGE_ID": "5"}
    checkout = Checkout.find(tmp_path, env, "origin")
    assert checkout.ci and checkout.pull_request == 5 and not checkout.writes_shared_state


@pytest.mark.parametrize("default", ["main", "trunk"])
@pytest.mark.parametrize("event_name", ["schedule", "workflow_run", "repository_dispatch"])
def test_the_default_branch_is_known_on_a_checkout_as_actions_makes_it(
    tmp_path: Path, default: str, event_name: str
) -> None:
    """No origin/HEAD in the checkout; a schedule payload without `repository`; events whose
    payload names no default branch: the ref (schedule) or the remote itself answers."""
    origin = make_origin(tmp_path, {"a.txt": "a"}, branch=default)
    sha = tip(origin, default)
    workspace = actions_checkout(origin, tmp_path / "job", ref=f"refs/heads/{default}", sha=sha)
    payload = schedule_payload() if event_name == "schedule" else {"action": "completed"}
    env = job_env(
        workspace,
        event_name=event_name,
        payload=payload,
        ref=f"refs/heads/{default}",
        sha=sha,
        repository="acme/app",
    )
    found = Checkout.find(workspace, env, "origin")
    assert found.default_branch == default and found.on_default_branch
    assert found.writes_shared_state


def test_a_pull_request_on_its_detached_merge_commit_knows_the_default_branch(
    tmp_path: Path,
) -> None:
    origin = make_origin(tmp_path, {"a.txt": "a"}, branch="trunk")
    seed = tmp_path / "seed"
    git(seed, "checkout", "--quiet", "-b", "feature")
    (seed / "b.txt").write_text("b")
    git(seed, "add", "b.txt")
    git(seed, "commit", "--quiet", "-m", "b")
    git(seed, "push", "--quiet", "origin", "feature")
    merge = open_pull_request(origin, tmp_path, number=4, base="trunk", head="feature")
    workspace = actions_checkout(origin, tmp_path / "job", ref="refs/pull/4/merge", sha=merge)
    env = job_env(
        workspace,
        event_name="pull_request",
        payload={"number": 4, "pull_request": {"number": 4}},  # a payload cut short
        ref="refs/pull/4/merge",
        sha=merge,
        repository="acme/app",
        head_ref="feature",
        base_ref="trunk",
    )
    found = Checkout.find(workspace, env, "origin")
    assert (found.pull_request, found.default_branch) == (4, "trunk")
    assert not found.writes_shared_state


def test_a_checkout_that_cannot_tell_its_default_branch_says_why(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"a.txt": "a"})
    workspace = actions_checkout(
        origin, tmp_path / "job", ref="refs/heads/main", sha=tip(origin, "main")
    )
    git(workspace, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    env = job_env(
        workspace,
        event_name="workflow_run",
        payload={},
        ref="refs/heads/main",
        sha=tip(origin, "main"),
        repository="acme/app",
    )
    found = Checkout.find(workspace, env, "origin")
    assert found.default_branch is None and not found.writes_shared_state
    assert "ls-remote" in found.default_source


def test_with_no_credentials_left_for_git_the_api_names_the_default_branch(tmp_path: Path) -> None:
    """actions/checkout with persist-credentials: false on a private repository: git cannot
    ask the remote; the step's token asks the API (GET /repos/OWNER/NAME) once."""
    from github_standin import GitHubStandIn

    origin = make_origin(tmp_path, {"a.txt": "a"}, branch="trunk")
    sha = tip(origin, "trunk")
    workspace = actions_checkout(origin, tmp_path / "job", ref="refs/heads/trunk", sha=sha)
    git(workspace, "remote", "set-url", "origin", str(tmp_path / "no-access.git"))
    with GitHubStandIn(default_branch="trunk") as hub:
        env = job_env(
            workspace,
            event_name="workflow_run",
            payload={"action": "completed"},
            ref="refs/heads/trunk",
            sha=sha,
            repository=hub.repository,
            token=hub.token,
            api_url=hub.url,
        )
        found = Checkout.find(workspace, env, "origin")
        assert (found.default_branch, found.on_default_branch) == ("trunk", True)
        assert found.default_source == "the API's repository.default_branch"
        assert len(hub.calls("GET")) == 1


def test_the_remote_is_asked_for_its_default_branch_only_when_a_stage_needs_it(
    tmp_path: Path,
) -> None:
    """A laptop's clone without origin/HEAD: asking costs `git ls-remote`, a round trip."""
    origin = make_origin(tmp_path, {"firewall.toml": ""})
    clone = fresh_clone(origin, tmp_path / "clone")
    git(clone, "symbolic-ref", "--delete", "refs/remotes/origin/HEAD")
    asked = tmp_path / "asked"
    upload_pack = tmp_path / "upload-pack"
    upload_pack.write_text(f'#!/bin/sh\necho asked >> "{asked}"\nexec git-upload-pack "$@"\n')
    upload_pack.chmod(0o755)
    git(clone, "config", "remote.origin.uploadpack", str(upload_pack))

    laptop = Checkout.find(clone, {}, "origin")
    assert (laptop.branch, laptop.pull_request, laptop.writes_shared_state) == ("main", None, False)
    assert not asked.exists(), "nothing so far needed the default branch"
    assert (laptop.default_branch, laptop.on_default_branch) == ("main", True)
    assert laptop.default_source == "git ls-remote --symref origin HEAD"
    assert laptop.default_branch == "main"
    assert asked.read_text() == "asked\n", "asked once, when first needed"
