"""The history on the GitHub topology: every job on its own fresh clone of one origin.

A CI runner keeps nothing between jobs. Here each job is a new clone of a local bare
origin, and the installed `firewall` command runs in it with the variables GitHub
sets; what one job leaves for the next can only travel through the origin.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepos import GIT_ENV, branch_files, fresh_clone, make_origin

pytestmark = pytest.mark.e2e

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
CONFIG = """
k = 5
seed = "random"
[[evals]]
id = "steady"
command = "python score.py steady {trial}"
[[evals]]
id = "wobbly"
command = "python score.py wobbly {trial}"
"""
SCORE = """import sys
name, trial = sys.argv[1], int(sys.argv[2])
score = 0.9 if name == "steady" or trial % 2 else 0.1
print(score)
"""


def job(
    origin: Path,
    where: Path,
    *args: str,
    event: str = "push",
    ref: str = "refs/heads/main",
    head: str | None = None,
    ci: bool = True,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One CI job: a fresh clone, the command, and what the job leaves in its own files."""
    clone = fresh_clone(origin, where, branch=head)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GITHUB_", "RUNNER_")) and key != "CI"
    }
    env.update(GIT_ENV)
    if ci:
        payload = where.parent / f"{where.name}-event.json"
        body: dict[str, object] = {"repository": {"default_branch": "main"}}
        if event == "pull_request":
            body["pull_request"] = {"number": 7}
        payload.write_text(json.dumps(body))
        env.update(
            CI="true",
            GITHUB_ACTIONS="true",
            GITHUB_EVENT_NAME=event,
            GITHUB_REF=ref,
            GITHUB_EVENT_PATH=str(payload),
            GITHUB_STEP_SUMMARY=str(where.parent / f"{where.name}-summary.md"),
            GITHUB_OUTPUT=str(where.parent / f"{where.name}-output.txt"),
            GITHUB_WORKSPACE=str(clone),
        )
        if head:
            env["GITHUB_HEAD_REF"] = head
    proc = subprocess.run(
        [FIREWALL, *args], cwd=clone, env=env, capture_output=True, text=True, timeout=300
    )
    return proc, clone


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_origin(tmp_path, {"firewall.toml": CONFIG, "score.py": SCORE})


def runs_on_state_branch(origin: Path) -> list[str]:
    try:
        return [f for f in branch_files(origin, "firewall-state") if f.startswith("runs/")]
    except AssertionError:  # no such branch yet
        return []


def test_history_travels_between_jobs_through_the_origin(origin: Path, tmp_path: Path) -> None:
    first, _ = job(origin, tmp_path / "main-1", "run")
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(runs_on_state_branch(origin)) == 1

    second, _ = job(origin, tmp_path / "main-2", "run")
    assert second.returncode == 0, second.stdout + second.stderr
    assert len(runs_on_state_branch(origin)) == 2
    summary = (tmp_path / "main-2-summary.md").read_text()
    steady = next(line for line in summary.splitlines() if "| steady |" in line.replace("`", ""))
    assert "▇▇" in steady, "the second job's trend shows both jobs' medians (0.9 on a 0-1 scale)"

    # A laptop clone sees the team's state, though no job's files survived.
    status, _ = job(origin, tmp_path / "laptop", "status", "--json", ci=False)
    assert status.returncode == 0, status.stderr
    last = json.loads(status.stdout)["last_run"]
    assert last is not None and last["mode"] == "run" and last["counts"]["pass"] == 1
    calibrated, _ = job(origin, tmp_path / "laptop-2", "calibrate", "--json", ci=False)
    assert json.loads(calibrated.stdout)["overall"]["points"] == 4, "2 evals x 2 jobs"


def test_a_pull_request_reads_the_trend_but_never_writes_it(origin: Path, tmp_path: Path) -> None:
    job(origin, tmp_path / "main-1", "run")
    before = runs_on_state_branch(origin)
    pull, _ = job(
        origin,
        tmp_path / "pr",
        "run",
        event="pull_request",
        ref="refs/pull/7/merge",
        head="feature",
    )
    assert pull.returncode == 0, pull.stdout + pull.stderr
    assert runs_on_state_branch(origin) == before
    summary = (tmp_path / "pr-summary.md").read_text()
    assert "▇" in summary, "the default branch's trend, read in the pull request's job"


def test_a_job_that_cannot_push_says_so_once_and_exits_as_it_would(
    origin: Path, tmp_path: Path
) -> None:
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'Permission to acme/bot.git denied' >&2\nexit 1\n")
    hook.chmod(0o755)
    refused, _ = job(origin, tmp_path / "fork", "run")
    assert refused.returncode == 0, refused.stdout + refused.stderr
    assert refused.stderr.count("out of reach") == 1
    assert runs_on_state_branch(origin) == []
