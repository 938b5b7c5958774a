"""The quarantine lifecycle as it runs on GitHub: every job on its own fresh clone.

A pull-request job finds an instability and records a candidate on the eval's
issue; the nightly on main confirms it and proposes the quarantine as one
rolling pull request; a person merges it; later nightlies count the eval
stable, propose its release, and only once that release is merged is the
issue closed. Each job is a new clone of one bare origin, GitHub is the
stand-in on 127.0.0.1 (pull requests, issues), and the installed `firewall`
command runs with the variables GitHub sets. Nothing a job writes survives it
except through the origin and the stand-in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from github_standin import GitHubStandIn
from gitrepos import GIT_ENV, fresh_clone, git, make_origin

pytestmark = pytest.mark.e2e

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
CONFIG = """
k = 5
seed = "random"
[nightly]
k = 30
release_after = 2
[[evals]]
id = "tone"
command = "python tone.py {trial}"
owner = "alice"
"""
# The eval's behaviour is part of the code under test: `mode.txt` says whether this
# commit's tone eval scatters (0.1/0.9 by trial index, whatever the seed) or not.
TONE = """import sys
from pathlib import Path
trial = int(sys.argv[1])
unstable = Path("mode.txt").read_text().strip() == "unstable"
print(0.1 if unstable and trial % 2 else 0.9)
"""


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn(assignable={"alice"}) as standin:
        yield standin


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_origin(tmp_path, {"firewall.toml": CONFIG, "tone.py": TONE, "mode.txt": "stable\n"})


class Jobs:
    """CI jobs against one origin and one GitHub: each a fresh clone, numbered."""

    def __init__(self, origin: Path, root: Path, hub: GitHubStandIn) -> None:
        self.origin, self.root, self.hub, self.count = origin, root, hub, 0

    def run(
        self, *args: str, pull: int | None = None, mode: str | None = None, code: int = 0
    ) -> str:
        """A job of one step."""
        return self.steps([args], pull=pull, mode=mode, codes=[code])[0]

    def steps(
        self,
        steps: list[tuple[str, ...]],
        *,
        pull: int | None = None,
        mode: str | None = None,
        codes: list[int] | None = None,
    ) -> list[str]:
        """One job: a fresh clone, then its steps in it, as a workflow's steps share one."""
        self.count += 1
        name = f"job-{self.count}-{steps[0][0]}"
        clone = fresh_clone(self.origin, self.root / name, branch="feature" if pull else None)
        if mode is not None:  # the pull request's change
            (clone / "mode.txt").write_text(f"{mode}\n")
        event = self.root / f"{name}-event.json"
        payload: dict[str, object] = {"repository": {"default_branch": "main"}}
        if pull:
            payload["pull_request"] = {"number": pull}
        event.write_text(json.dumps(payload))
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("GITHUB_", "RUNNER_")) and key != "CI"
        }
        env.update(
            GIT_ENV,
            CI="true",
            GITHUB_ACTIONS="true",
            GITHUB_EVENT_NAME="pull_request" if pull else "schedule",
            GITHUB_REF=f"refs/pull/{pull}/merge" if pull else "refs/heads/main",
            GITHUB_EVENT_PATH=str(event),
            GITHUB_TOKEN=self.hub.token,
            GITHUB_REPOSITORY=self.hub.repository,
            GITHUB_API_URL=self.hub.url,
            GITHUB_WORKSPACE=str(clone),
        )
        if pull:
            env["GITHUB_HEAD_REF"] = "feature"
        outputs = []
        for args, code in zip(steps, codes or [0] * len(steps), strict=True):
            proc = subprocess.run(
                [FIREWALL, *args], cwd=clone, env=env, capture_output=True, text=True, timeout=300
            )
            assert proc.returncode == code, f"{name} {args}: {proc.stdout}\n{proc.stderr}"
            assert self.hub.token not in proc.stdout + proc.stderr
            outputs.append(proc.stdout + proc.stderr)
        return outputs

    def laptop(self, *args: str) -> str:
        """A command on a developer's fresh clone: no CI variables, no token."""
        self.count += 1
        clone = fresh_clone(self.origin, self.root / f"laptop-{self.count}")
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("GITHUB_", "RUNNER_")) and key != "CI"
        }
        env.update(GIT_ENV)
        proc = subprocess.run(
            [FIREWALL, *args], cwd=clone, env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    def nightly(self, *, propose_code: int = 0) -> tuple[str, str]:
        """The nightly workflow: re-probe, then propose, two steps of one job."""
        night, proposal = self.steps([("nightly",), ("propose",)], codes=[0, propose_code])
        return night, proposal

    def merge(self, branch: str, *, mode: str | None = None) -> None:
        """A person merges ``branch`` into main (or pushes a change of the eval to main)."""
        clone = fresh_clone(self.origin, self.root / f"merge-{self.count}")
        if branch:
            git(clone, "fetch", "--quiet", "origin", branch)
            git(clone, "merge", "--quiet", "--ff-only", "FETCH_HEAD")
        if mode is not None:
            (clone / "mode.txt").write_text(f"{mode}\n")
            git(clone, "commit", "--quiet", "-am", f"tone is {mode} now")
        git(clone, "push", "--quiet", "origin", "HEAD:main")

    def registry_on_main(self) -> dict[str, object]:
        shown = subprocess.run(
            ["git", "show", "main:quarantine.json"],
            cwd=self.origin,
            capture_output=True,
            text=True,
            check=False,
        )
        return json.loads(shown.stdout)["evals"] if shown.returncode == 0 else {}


def test_a_candidate_is_confirmed_proposed_merged_and_released_only_after_merge(
    origin: Path, tmp_path: Path, hub: GitHubStandIn
) -> None:
    jobs = Jobs(origin, tmp_path, hub)

    # A pull request makes tone scatter: a candidate on a new issue, not a registry change.
    output = jobs.run("run", pull=7, mode="unstable")
    assert "candidate tone" in output
    (issue,) = hub.open_issues()
    assert "firewall:candidate" in issue.body
    assert jobs.registry_on_main() == {}

    # The pull request is merged; the nightly on main confirms the candidate and proposes it.
    jobs.merge("", mode="unstable")
    _, proposal = jobs.nightly()
    assert "adopt    tone" in proposal
    (pull,) = [p for p in hub.pulls() if p.state == "open"]
    assert pull.head == "firewall/quarantine" and pull.base == "main"
    assert "tone" in pull.body and len(hub.open_issues()) == 1, "the same issue, no twin"

    # The next night proposes the same thing: nothing is pushed, the pull request stays one.
    _, proposal = jobs.nightly()
    assert "unchanged since firewall/quarantine was last pushed" in proposal
    assert len(hub.pulls()) == 1

    # A reviewer merges the proposal; pull requests now skip tone, and open no issue.
    jobs.merge("firewall/quarantine")
    assert set(jobs.registry_on_main()) == {"tone"}
    assert "QUARANTINED" in jobs.run("run", pull=8)
    assert len(hub.issues) == 2  # the issue and the proposal's pull request

    # tone is fixed on main; two stable nights propose its release, and the issue stays open.
    jobs.merge("", mode="stable")
    jobs.nightly()
    (held,) = json.loads(jobs.laptop("status", "--json"))["quarantined"]
    assert (held["id"], held["streak"]) == ("tone", 1), "a laptop sees the team's streak"
    _, proposal = jobs.nightly()
    assert "release  tone" in proposal
    assert hub.issues[issue.number].state == "open", "open until the release reaches main"
    _, proposal = jobs.nightly()  # the release still waits for review: still proposed
    assert "unchanged since" in proposal and hub.issues[issue.number].state == "open"

    # Once the release is merged, the next nightly closes the issue.
    jobs.merge("firewall/quarantine")
    assert jobs.registry_on_main() == {}
    _, proposal = jobs.nightly()
    assert "nothing to propose" in proposal
    closed = hub.issues[issue.number]
    assert closed.state == "closed" and closed.state_reason == "completed"
    assert len([i for i in hub.issues.values() if not i.pull]) == 1, "never a second issue"


def test_a_candidate_the_default_branch_does_not_reproduce_is_dismissed(
    origin: Path, tmp_path: Path, hub: GitHubStandIn
) -> None:
    jobs = Jobs(origin, tmp_path, hub)
    jobs.run("run", pull=7, mode="unstable")  # scatters on the branch, which is not merged
    (issue,) = hub.open_issues()
    night, proposal = jobs.nightly()
    assert "not reproduced on the default branch" in night
    dismissed = hub.issues[issue.number]
    assert dismissed.state == "closed" and dismissed.state_reason == "completed"
    assert any("not reproduced" in comment for comment in dismissed.comments)
    assert "nothing to propose" in proposal and hub.pulls() == []


def test_without_permission_to_open_pull_requests_the_step_fails_and_names_the_setting(
    origin: Path, tmp_path: Path, hub: GitHubStandIn
) -> None:
    jobs = Jobs(origin, tmp_path, hub)
    jobs.merge("", mode="unstable")
    jobs.run("run", pull=7)
    hub.fail("actions-may-not-create-pulls", method="POST", path=r"/pulls$")
    _, output = jobs.nightly(propose_code=1)
    assert "::error" in output and "Allow GitHub Actions to create and approve" in output
    branches = git(origin, "branch", "--list")
    assert "firewall/quarantine" not in branches, "no orphan branch is left behind"
