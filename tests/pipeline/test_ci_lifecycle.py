"""The quarantine lifecycle as it runs on GitHub: every job on its own checkout.

Each job's workspace is made as `actions/checkout@v4` makes it (shallow, one
refspec, no ``origin/HEAD``, a pull request's job detached on GitHub's merge
commit), with the event payload GitHub sends (a cron nightly's is only
``{"schedule": CRON}``), and the default branch is `main` or `trunk`.

A pull-request job finds an instability and records a candidate on the eval's
issue and the state branch; the nightly confirms it and proposes the quarantine as one
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
from actions import (
    checkout,
    job_env,
    open_pull_request,
    pull_request_payload,
    push_payload,
    schedule_payload,
    tip,
)
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


@pytest.fixture(params=["main", "trunk"])
def default(request: pytest.FixtureRequest) -> str:
    """The default branch's name: not always `main`, and nothing may assume it is."""
    return str(request.param)


@pytest.fixture
def origin(tmp_path: Path, default: str) -> Path:
    return make_origin(
        tmp_path,
        {"firewall.toml": CONFIG, "tone.py": TONE, "mode.txt": "stable\n"},
        branch=default,
    )


class Jobs:
    """CI jobs against one origin and one GitHub, each on a checkout of its own made as
    `actions/checkout@v4` makes it, with the payload GitHub sends for its event."""

    def __init__(self, origin: Path, root: Path, hub: GitHubStandIn, default: str) -> None:
        self.origin, self.root, self.hub, self.default, self.count = origin, root, hub, default, 0

    def run(
        self,
        *args: str,
        pull: int | None = None,
        mode: str | None = None,
        code: int = 0,
        token: bool = True,
    ) -> str:
        """A job of one step: a pull request's (``pull``), else a push to the default branch."""
        return self.steps([args], pull=pull, mode=mode, codes=[code], token=token)[0]

    def steps(
        self,
        steps: list[tuple[str, ...]],
        *,
        pull: int | None = None,
        mode: str | None = None,
        codes: list[int] | None = None,
        event: str | None = None,
        token: bool = True,
    ) -> list[str]:
        """One job: its checkout, then its steps in it, as a workflow's steps share one."""
        self.count += 1
        name = f"job-{self.count}-{steps[0][0]}"
        repository = self.hub.repository
        base = tip(self.origin, self.default)
        if pull:
            head = f"feature-{pull}"
            self._push_branch(head, mode)
            sha = open_pull_request(
                self.origin, self.root, number=pull, base=self.default, head=head
            )
            ref = f"refs/pull/{pull}/merge"
            payload = pull_request_payload(
                repository,
                self.default,
                number=pull,
                head=head,
                head_sha=tip(self.origin, head),
                base=self.default,
                base_sha=base,
            )
            event_name, head_ref, base_ref = "pull_request", head, self.default
        else:
            assert mode is None, "a change reaches the default branch through merge()"
            sha, ref, head_ref, base_ref = base, f"refs/heads/{self.default}", "", ""
            event_name = event or "push"
            payload = (
                schedule_payload()
                if event_name == "schedule"
                else push_payload(
                    repository, self.default, branch=self.default, before=base, after=sha
                )
            )
        workspace = checkout(self.origin, self.root / name, ref=ref, sha=sha)
        env = job_env(
            workspace,
            event_name=event_name,
            payload=payload,
            ref=ref,
            sha=sha,
            repository=repository,
            head_ref=head_ref,
            base_ref=base_ref,
            token=self.hub.token if token else None,
            api_url=self.hub.url,
        )
        self.last_env = env
        outputs = []
        for args, code in zip(steps, codes or [0] * len(steps), strict=True):
            proc = subprocess.run(
                [FIREWALL, *args],
                cwd=workspace,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == code, f"{name} {args}: {proc.stdout}\n{proc.stderr}"
            assert self.hub.token not in proc.stdout + proc.stderr
            outputs.append(proc.stdout + proc.stderr)
        return outputs

    def _push_branch(self, head: str, mode: str | None) -> None:
        """The pull request's branch: the default branch's tip with ``mode.txt`` changed."""
        clone = fresh_clone(self.origin, self.root / f"author-{self.count}")
        git(clone, "checkout", "--quiet", "-B", head, f"origin/{self.default}")
        if mode is not None:
            (clone / "mode.txt").write_text(f"{mode}\n")
            git(clone, "commit", "--quiet", "--allow-empty", "-am", f"tone is {mode} here")
        git(clone, "push", "--quiet", "--force", "origin", f"HEAD:refs/heads/{head}")

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

    def nightly(self, *, propose_code: int = 0, token: bool = True) -> tuple[str, str]:
        """The scaffold's nightly on its cron: re-probe, then propose, two steps of one job."""
        night, proposal = self.steps(
            [("nightly",), ("propose",)], codes=[0, propose_code], event="schedule", token=token
        )
        return night, proposal

    def merge(self, branch: str, *, mode: str | None = None) -> None:
        """A person merges ``branch`` into the default branch (or pushes a change to it)."""
        clone = fresh_clone(self.origin, self.root / f"merge-{self.count}")
        git(clone, "checkout", "--quiet", self.default)
        if branch:
            git(clone, "fetch", "--quiet", "origin", branch)
            git(clone, "merge", "--quiet", "--ff-only", "FETCH_HEAD")
        if mode is not None:
            (clone / "mode.txt").write_text(f"{mode}\n")
            git(clone, "commit", "--quiet", "-am", f"tone is {mode} now")
        git(clone, "push", "--quiet", "origin", f"HEAD:{self.default}")

    def registry_on_default(self) -> dict[str, object]:
        shown = subprocess.run(
            ["git", "show", f"{self.default}:quarantine.json"],
            cwd=self.origin,
            capture_output=True,
            text=True,
            check=False,
        )
        return json.loads(shown.stdout)["evals"] if shown.returncode == 0 else {}


def test_a_candidate_is_confirmed_proposed_merged_and_released_only_after_merge(
    origin: Path, tmp_path: Path, hub: GitHubStandIn, default: str
) -> None:
    jobs = Jobs(origin, tmp_path, hub, default)

    # A pull request makes tone scatter: a candidate on a new issue, not a registry change.
    output = jobs.run("run", pull=7, mode="unstable")
    assert "candidate tone" in output
    (issue,) = hub.open_issues()
    assert "firewall:candidate" in issue.body
    assert issue.assignees == ["alice"], "the eval's owner, from the issue's birth"
    assert jobs.registry_on_default() == {}

    # The pull request is merged; the nightly confirms the candidate and proposes it.
    jobs.merge("", mode="unstable")
    _, proposal = jobs.nightly()
    assert "adopt    tone" in proposal
    (pull,) = [p for p in hub.pulls() if p.state == "open"]
    assert pull.head == "firewall/quarantine" and pull.base == default
    assert "tone" in pull.body and len(hub.open_issues()) == 1, "the same issue, no twin"

    # The next night proposes the same thing: nothing is pushed, the pull request stays one.
    _, proposal = jobs.nightly()
    assert "unchanged since firewall/quarantine was last pushed" in proposal
    assert len(hub.pulls()) == 1

    # A reviewer merges the proposal; pull requests now skip tone, and open no issue.
    jobs.merge("firewall/quarantine")
    assert set(jobs.registry_on_default()) == {"tone"}
    assert "QUARANTINED" in jobs.run("run", pull=8)
    assert len(hub.issues) == 2  # the issue and the proposal's pull request

    # tone is fixed on main; three stable nights propose its release (release_after = 2 on
    # the second, the collapse test's 73 clean trials on the third), and the issue stays open.
    jobs.merge("", mode="stable")
    jobs.nightly()
    (held,) = json.loads(jobs.laptop("status", "--json"))["quarantined"]
    assert (held["id"], held["streak"]) == ("tone", 1), "a laptop sees the team's streak"
    _, proposal = jobs.nightly()
    assert "release  tone" not in proposal, "60 clean trials are not yet evidence enough"
    _, proposal = jobs.nightly()
    assert "release  tone" in proposal
    assert hub.issues[issue.number].state == "open", "open until the release reaches main"
    _, proposal = jobs.nightly()  # the release still waits for review: still proposed
    assert "unchanged since" in proposal and hub.issues[issue.number].state == "open"

    # Once the release is merged, the next nightly closes the issue.
    jobs.merge("firewall/quarantine")
    assert jobs.registry_on_default() == {}
    _, proposal = jobs.nightly()
    assert "nothing to propose" in proposal
    closed = hub.issues[issue.number]
    assert closed.state == "closed" and closed.state_reason == "completed"
    assert len([i for i in hub.issues.values() if not i.pull]) == 1, "never a second issue"


def test_a_candidate_the_default_branch_does_not_reproduce_is_dismissed(
    origin: Path, tmp_path: Path, hub: GitHubStandIn, default: str
) -> None:
    jobs = Jobs(origin, tmp_path, hub, default)
    jobs.run("run", pull=7, mode="unstable")  # scatters on the branch, which is not merged
    (issue,) = hub.open_issues()
    night, proposal = jobs.nightly()
    assert "not reproduced on the default branch" in night
    dismissed = hub.issues[issue.number]
    assert dismissed.state == "closed" and dismissed.state_reason == "completed"
    assert any("not reproduced" in comment for comment in dismissed.comments)
    assert "nothing to propose" in proposal and hub.pulls() == []


def test_without_permission_to_open_pull_requests_the_step_fails_and_names_the_setting(
    origin: Path, tmp_path: Path, hub: GitHubStandIn, default: str
) -> None:
    jobs = Jobs(origin, tmp_path, hub, default)
    jobs.merge("", mode="unstable")
    jobs.run("run", pull=7)
    hub.fail("actions-may-not-create-pulls", method="POST", path=r"/pulls$")
    _, output = jobs.nightly(
        propose_code=2
    )  # a setting of the repository: exit 2, never "an eval failed"
    assert "::error" in output and "Allow GitHub Actions to create and approve" in output
    branches = git(origin, "branch", "--list")
    assert "firewall/quarantine" not in branches, "no orphan branch is left behind"


REGISTRY = """{{
  "evals": {{
    "tone": {{
      "k": 5,
      "reason": "iqr 0.8 > 0.03",
      "review_by": "2099-01-01T00:00:00Z",
      "since": "{since}",
      "source": "auto"
    }}
  }},
  "schema_version": 1
}}
"""


def test_a_cron_nightly_releases_a_fixed_eval_on_a_checkout_as_actions_makes_it(
    tmp_path: Path, hub: GitHubStandIn, default: str
) -> None:
    """The scaffold's nightly on its cron, night after night: the one path every user's
    quarantine leaves by. Its payload has no repository and its checkout no origin/HEAD;
    it must still know it is on the default branch, keep its streaks and release."""
    origin = make_origin(
        tmp_path,
        {
            "firewall.toml": CONFIG,
            "tone.py": TONE,
            "mode.txt": "stable\n",
            "quarantine.json": REGISTRY.format(since="2026-11-01T00:00:00Z"),
        },
        branch=default,
    )
    jobs = Jobs(origin, tmp_path, hub, default)
    released_on = None
    for night in range(1, 11):
        output, proposal = jobs.nightly()
        assert "cannot keep" not in output, output
        if "release  tone" in proposal:
            jobs.merge("firewall/quarantine")
            released_on = night
            break
    # release_after = 2 holds on night 2; the collapse test's 73 clean trials on night 3.
    assert released_on == 3, f"released on night {released_on}"
    assert jobs.registry_on_default() == {}
    jobs.nightly()
    (issue,) = [i for i in hub.issues.values() if not i.pull]
    assert issue.state == "closed" and issue.state_reason == "completed"


def test_a_candidate_found_without_a_token_reaches_the_nightly(
    origin: Path, tmp_path: Path, hub: GitHubStandIn, default: str
) -> None:
    """A plain `run:` step has no GITHUB_TOKEN: the candidate goes to the state branch, the
    job says so (and that no issue was touched), and the nightly confirms it from there."""
    jobs = Jobs(origin, tmp_path, hub, default)
    output = jobs.run("run", pull=7, mode="unstable", token=False)
    assert "candidate tone: recorded on the state branch" in output
    assert output.count("this step has no GITHUB_TOKEN") == 1, "said once, with the fix"
    assert hub.issues == {}
    jobs.merge("", mode="unstable")
    night, proposal = jobs.nightly()
    assert "confirmed on the default branch" in night
    assert "adopt    tone" in proposal


def test_with_issues_off_a_candidate_reaches_the_nightly(
    tmp_path: Path, hub: GitHubStandIn, default: str
) -> None:
    origin = make_origin(
        tmp_path,
        {
            "firewall.toml": CONFIG + "[github]\nissues = false\n",
            "tone.py": TONE,
            "mode.txt": "stable\n",
        },
        branch=default,
    )
    jobs = Jobs(origin, tmp_path, hub, default)
    output = jobs.run("run", pull=7, mode="unstable")
    assert "candidate tone" in output and "state branch" in output
    jobs.run("run", pull=7, mode="stable")  # a later push to the pull request: still a candidate
    jobs.merge("", mode="unstable")
    night, proposal = jobs.nightly()
    assert "confirmed on the default branch" in night
    assert "adopt    tone" in proposal
    assert [i for i in hub.issues.values() if not i.pull] == []
