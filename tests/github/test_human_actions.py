"""What a person does to an eval's issue costs only that eval, in CI and on a laptop.

A person may close an eval's issue (as completed or as not planned), an admin
delete it (GitHub answers 410) or transfer it (301), a maintainer lock it (a
comment is refused with 403). None of it may change a gate's exit code or crash
it: each test runs the same gate before and after the person's action, with the
real PyGithub against the stand-in, and reads one warning that names the eval
and its issue.

In CI the registry is the reviewed truth on the default branch and the nightly's
progress (streaks, last probes, issue numbers) lives on the state branch of the
origin (``store.shared``); each job is a fresh clone of a local bare origin. On
a laptop the registry is the checkout's own file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from github_standin import GitHubStandIn
from gitrepos import GIT_ENV, fresh_clone, git, make_origin

from firewall.cli import main

pytestmark = pytest.mark.e2e

MARKER = "<!-- firewall:eval=tone -->"
CONFIG = """
k = 5
seed = 7
[[evals]]
id = "tone"
command = "python3 tone.py {trial}"
owner = "alice"
[[evals]]
id = "low"
command = "python3 low.py"
"""
TONE = "import sys\nprint(0.1 if int(sys.argv[1]) % 2 else 0.9)\n"  # scatters: quarantined
LOW = "print(0.1)\n"  # fails the gate: the exit code every run must keep
REGISTRY = {
    "schema_version": 1,
    "evals": {
        "tone": {
            "since": "2026-11-01T03:00:00Z",
            "source": "auto",
            "reason": "iqr 0.8 > 0.03",
            "median": 0.9,
            "iqr": 0.8,
            "k": 5,
            "issue": 1,
            "owner": "alice",
            "last_probe": "2026-11-01T03:00:00Z",
            "review_by": "2099-01-01T00:00:00Z",
        }
    },
}
PROGRESS = {
    "schema_version": 1,
    "evals": {
        "tone": {
            "stable_streak": 1,
            "clean_trials": 30,
            "last_probe": "2026-11-20T03:00:00Z",
            "median": 0.9,
            "iqr": 0.8,
            "k": 30,
            "issue": 1,
        }
    },
}
FILES = {
    "firewall.toml": CONFIG,
    "tone.py": TONE,
    "low.py": LOW,
    "quarantine.json": json.dumps(REGISTRY, indent=2) + "\n",
}


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn(assignable={"alice"}) as standin:
        number = standin.add_issue("Flaky eval quarantined: tone", MARKER, ["flaky-eval"])
        assert number == 1
        yield standin


def push_progress(origin: Path, root: Path) -> None:
    """The state branch as a nightly left it: tone's progress, with its last probe."""
    seed = fresh_clone(origin, root / "state-seed")
    git(seed, "checkout", "--quiet", "--orphan", "firewall-state")
    git(seed, "rm", "-r", "--quiet", "--cached", ".")
    for name in FILES:
        (seed / name).unlink()  # an orphan branch: none of the project's files
    (seed / "progress.json").write_text(json.dumps(PROGRESS, indent=2) + "\n")
    git(seed, "add", "progress.json")
    git(seed, "commit", "--quiet", "-m", "progress")
    git(seed, "push", "--quiet", "origin", "HEAD:firewall-state")


class Gate:
    """`firewall run` as one place runs it: a CI job (a fresh clone each time) or a laptop."""

    def __init__(
        self, where: str, root: Path, hub: GitHubStandIn, files: dict[str, str] = FILES
    ) -> None:
        self.where, self.root, self.hub, self.count = where, root, hub, 0
        if where == "ci":
            self.origin = make_origin(root, files)
            if "quarantine.json" in files:
                push_progress(self.origin, root)
        else:
            self.project = root / "laptop"
            self.project.mkdir()
            for name, text in files.items():
                (self.project / name).write_text(text)

    def run(self, monkeypatch: pytest.MonkeyPatch) -> Result:
        self.count += 1
        env = {
            **GIT_ENV,
            "GITHUB_TOKEN": self.hub.token,
            "GITHUB_REPOSITORY": self.hub.repository,
            "GITHUB_API_URL": self.hub.url,
        }
        if self.where == "ci":
            cwd = fresh_clone(self.origin, self.root / f"job-{self.count}", branch="feature")
            event = self.root / f"job-{self.count}-event.json"
            event.write_text(
                json.dumps(
                    {"repository": {"default_branch": "main"}, "pull_request": {"number": 7}}
                )
            )
            env |= {
                "CI": "true",
                "GITHUB_ACTIONS": "true",
                "GITHUB_EVENT_NAME": "pull_request",
                "GITHUB_REF": "refs/pull/7/merge",
                "GITHUB_HEAD_REF": "feature",
                "GITHUB_EVENT_PATH": str(event),
                "GITHUB_WORKSPACE": str(cwd),
                "GITHUB_STEP_SUMMARY": str(self.root / f"job-{self.count}-summary.md"),
                "GITHUB_OUTPUT": str(self.root / f"job-{self.count}-output.txt"),
            }
        else:
            cwd = self.project
        monkeypatch.chdir(cwd)
        result = CliRunner().invoke(main, ["run"], env=env, catch_exceptions=False)
        assert self.hub.token not in result.output
        return result


def warnings_of(result: Result) -> list[str]:
    """The run's warnings about issues: `firewall: warning:` lines, or annotations in CI."""
    return [
        line
        for line in result.output.splitlines()
        if ("warning" in line and "issue" in line) and "review is overdue" not in line
    ]


@pytest.fixture(params=["ci", "laptop"])
def gate(request: pytest.FixtureRequest, tmp_path: Path, hub: GitHubStandIn) -> Gate:
    return Gate(request.param, tmp_path, hub)


def test_a_gate_in_ci_reads_the_progress_of_a_nightly_and_runs_as_before(
    tmp_path: Path, hub: GitHubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    ci = Gate("ci", tmp_path, hub)
    result = ci.run(monkeypatch)
    assert result.exit_code == 1, result.output
    assert warnings_of(result) == [], result.output
    assert [i.number for i in hub.open_issues()] == [1]


ACTIONS = {
    "closed-as-completed": lambda hub: hub.close_by_hand(1, "completed"),
    "closed-as-not-planned": lambda hub: hub.close_by_hand(1, "not_planned"),
    "deleted": lambda hub: hub.delete_issue(1),
    "transferred": lambda hub: hub.transfer_issue(1, to="acme/elsewhere"),
    "locked": lambda hub: hub.lock_issue(1),
}


SAID = {
    "closed-as-completed": "issue #1 for tone was closed (completed) while tone is still "
    "quarantined: opened issue #2 for it",
    "closed-as-not-planned": "issue #1 for tone was closed as not planned: tone stays "
    "quarantined without an open issue",
    "deleted": "GitHub refused to read issue #1 for tone: 410 This issue was deleted; the "
    "firewall forgets issue #1 for tone",
    "transferred": "issue #1 for tone was transferred to acme/elsewhere",
}


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_person_acting_on_the_issue_changes_no_exit_code(
    gate: Gate, hub: GitHubStandIn, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    before = gate.run(monkeypatch)
    assert before.exit_code == 1, before.output

    ACTIONS[action](hub)
    after = gate.run(monkeypatch)

    assert after.exit_code == before.exit_code, after.output
    assert "Traceback" not in after.output
    if action == "locked":  # a gate writes nothing on a quarantined eval's open issue
        assert warnings_of(after) == [], after.output
        return
    [warning] = warnings_of(after)
    assert SAID[action] in warning, warning
    assert os.environ.get("CI") is None, "the job's variables ended with the command"


def test_a_locked_issue_refuses_a_pull_requests_candidate_and_costs_only_its_eval(
    tmp_path: Path, hub: GitHubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {name: text for name, text in FILES.items() if name != "quarantine.json"}
    ci = Gate("ci", tmp_path, hub, files)  # tone scatters on the pull request: a candidate
    before = ci.run(monkeypatch)
    assert before.exit_code == 1, before.output
    assert len(hub.issues[1].comments) == 1 and len(hub.issues) == 1, "recorded on #1"

    hub.lock_issue(1)
    after = ci.run(monkeypatch)

    assert after.exit_code == before.exit_code, after.output
    [warning] = warnings_of(after)
    assert "record a candidate on issue #1 for tone: 403" in warning
    assert "someone locked the issue" in warning
    assert len(hub.issues[1].comments) == 1 and len(hub.issues) == 1, "no twin of a locked issue"
