"""The history on the GitHub topology: every job on its own checkout of one origin.

A CI runner keeps nothing between jobs. Here each job's workspace is made from a
local bare origin as `actions/checkout@v4` makes it (shallow, one refspec, no
``origin/HEAD``, a pull request detached on its merge commit), and the installed
`firewall` command runs in it with the variables and the payload GitHub sends;
what one job leaves for the next can only travel through the origin.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from actions import checkout, job_env, open_pull_request, pull_request_payload, push_payload, tip
from gitrepos import GIT_ENV, branch_files, fresh_clone, git, make_origin

pytestmark = pytest.mark.e2e

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
REPOSITORY = "acme/app"
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
    """One CI job on its own checkout, made as `actions/checkout@v4` makes it, with the
    payload GitHub sends; ``ci=False`` is a developer's fresh clone instead."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GITHUB_", "RUNNER_")) and key != "CI"
    }
    env.update(GIT_ENV)
    if not ci:
        workspace = fresh_clone(origin, where)
    else:
        base = tip(origin, "main")
        if head is not None:  # a pull request: its branch, and GitHub's merge commit
            author = fresh_clone(origin, where.parent / f"{where.name}-author")
            git(author, "push", "--quiet", "origin", f"HEAD:refs/heads/{head}")
            number = int(ref.split("/")[2])
            sha = open_pull_request(origin, where.parent, number=number, base="main", head=head)
            payload = pull_request_payload(
                REPOSITORY,
                "main",
                number=number,
                head=head,
                head_sha=base,
                base="main",
                base_sha=base,
            )
        else:
            sha = base
            payload = push_payload(REPOSITORY, "main", branch="main", before=base, after=base)
        workspace = checkout(origin, where, ref=ref, sha=sha)
        env = job_env(
            workspace,
            event_name=event,
            payload=payload,
            ref=ref,
            sha=sha,
            repository=REPOSITORY,
            head_ref=head or "",
            base_ref="main" if head else "",
        )
    proc = subprocess.run(
        [FIREWALL, *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=300
    )
    return proc, workspace


def summary_of(where: Path) -> str:
    """The job summary a job appended to, in its runner's scratch directory."""
    return (where.parent / f"{where.name}-runner" / "summary.md").read_text()


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_origin(tmp_path, {"firewall.toml": CONFIG, "score.py": SCORE})


def runs_on_state_branch(origin: Path) -> list[str]:
    """The runs the state branch holds rows of (recent.jsonl names each run once)."""
    try:
        files = branch_files(origin, "firewall-state")
    except AssertionError:  # no such branch yet
        return []
    if "recent.jsonl" not in files:
        return []
    header = git(origin, "show", "firewall-state:recent.jsonl").splitlines()[0]
    return sorted(json.loads(header)["runs"])


def test_history_travels_between_jobs_through_the_origin(origin: Path, tmp_path: Path) -> None:
    first, _ = job(origin, tmp_path / "main-1", "run")
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(runs_on_state_branch(origin)) == 1, first.stderr

    second, _ = job(origin, tmp_path / "main-2", "run")
    assert second.returncode == 0, second.stdout + second.stderr
    assert len(runs_on_state_branch(origin)) == 2
    summary = summary_of(tmp_path / "main-2")
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
    summary = summary_of(tmp_path / "pr")
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


def test_a_job_that_cannot_tell_its_default_branch_says_so(origin: Path, tmp_path: Path) -> None:
    """A workflow_run job whose payload names no default branch, on a checkout whose remote
    cannot be asked: its history would go nowhere in silence; it says so, and exits as it
    would."""
    base = tip(origin, "main")
    workspace = checkout(origin, tmp_path / "job", ref="refs/heads/main", sha=base)
    env = job_env(
        workspace,
        event_name="workflow_run",
        payload={"action": "completed"},
        ref="refs/heads/main",
        sha=base,
        repository=REPOSITORY,
    )
    git(workspace, "remote", "set-url", "origin", str(tmp_path / "moved.git"))
    proc = subprocess.run(
        [FIREWALL, "run"], cwd=workspace, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.count("cannot tell the repository's default branch") == 1
