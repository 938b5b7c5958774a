"""Quarantine issues through the CLI, with the real PyGithub client against the stand-in.

These run as on a laptop with a token: the registry is this checkout's file, and
every command runs in one directory. How it goes in CI, where each job has a fresh
clone and the registry changes only through commits, is in tests/pipeline/.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from github_standin import GitHubStandIn

from firewall.cli import main

EVAL = """
import sys
from pathlib import Path
seed, trial = int(sys.argv[1]), int(sys.argv[2])
mode = Path("mode.txt").read_text().strip()
# Unstable whatever the nightly's random base seed: 0.1 and 0.9 by trial index.
score = (0.1 if trial % 2 else 0.9) if mode == "unstable" else 0.9 + (seed % 3) / 1000
print('{"score": %s}' % score)
"""


@pytest.fixture
def hub(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubStandIn]:
    (project / "tone.py").write_text(EVAL)
    (project / "mode.txt").write_text("unstable")
    (project / "firewall.toml").write_text(
        "k = 5\n[nightly]\nk = 30\nrelease_after = 2\n"
        '[[evals]]\nid = "tone"\ncommand = "python3 tone.py {seed} {trial}"\nowner = "alice"\n'
    )
    with GitHubStandIn(assignable={"alice"}) as standin:
        monkeypatch.setenv("GITHUB_TOKEN", standin.token)
        monkeypatch.setenv("GITHUB_REPOSITORY", standin.repository)
        monkeypatch.setenv("GITHUB_API_URL", standin.url)
        yield standin


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def entry(project: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((project / "quarantine.json").read_text())["evals"]["tone"]
    return found


def test_quarantine_opens_one_issue_and_release_closes_it(
    project: Path, hub: GitHubStandIn
) -> None:
    result = invoke("run")
    assert result.exit_code == 0, result.output
    (issue,) = hub.open_issues()
    assert entry(project)["issue"] == issue.number
    assert "<!-- firewall:eval=tone -->" in issue.body and issue.assignees == ["alice"]
    assert "firewall replay tone --seed" in issue.body
    assert "flaky-eval" in issue.labels
    assert hub.token not in result.output

    # A second quarantine of the same eval (after a manual release and re-entry) finds the
    # open issue; it says unstable already, so nothing is said on it: no comment, no twin.
    invoke("quarantine", "release", "tone", "--no-issues")
    invoke("run")
    assert len(hub.issues) == 1 and len(hub.open_issues()) == 1
    assert hub.issues[issue.number].comments == [], "its state did not change"

    # Stable nights: the status block follows, and the release closes the issue.
    (project / "mode.txt").write_text("stable")
    invoke("nightly")
    assert "1/2" in hub.issues[issue.number].body or "1 of 2" in hub.issues[issue.number].body
    invoke("nightly")  # release_after is met; the collapse test's 73 clean trials are not
    assert hub.issues[issue.number].state == "open"
    released = invoke("nightly")
    assert "released" in released.output
    assert hub.issues[issue.number].state == "closed"
    assert hub.issues[issue.number].state_reason == "completed"


def test_an_outage_changes_no_decision_and_the_next_run_catches_up(
    project: Path, hub: GitHubStandIn
) -> None:
    hub.fail("503")
    result = invoke("run")
    assert result.exit_code == 0, "quarantine is still not a failure"
    assert "firewall: warning:" in result.output and "503" in result.output
    assert entry(project)["issue"] is None
    assert hub.token not in result.output

    hub.heal()
    invoke("run")  # tone is skipped as quarantined, but its issue is owed
    (issue,) = hub.open_issues()
    assert entry(project)["issue"] == issue.number


def test_a_read_only_token_warns_and_keeps_the_exit_code(project: Path, hub: GitHubStandIn) -> None:
    (project / "firewall.toml").write_text(
        (project / "firewall.toml").read_text()
        + '[[evals]]\nid = "low"\ncommand = "echo \'{\\"score\\": 0.1}\'"\n'
    )
    hub.fail("read-only", method="POST")
    result = invoke("run")
    assert result.exit_code == 1
    assert "Resource not accessible by integration" in result.output


def test_dry_run_and_no_issues_say_what_they_would_do(project: Path, hub: GitHubStandIn) -> None:
    result = invoke("run", "--dry-run")
    assert "would open issue for tone" in result.output
    assert not hub.issues and not (project / "quarantine.json").exists()
    result = invoke("run", "--no-issues")
    assert "would open issue for tone" in result.output and not hub.issues


def test_issues_off_in_the_config_touches_no_issue(project: Path, hub: GitHubStandIn) -> None:
    (project / "firewall.toml").write_text(
        (project / "firewall.toml").read_text() + "[github]\nissues = false\n"
    )
    result = invoke("run")
    assert result.exit_code == 0 and "QUARANTINE" in result.output
    assert not hub.requests
