"""The status commit: what `firewall status` reads of the state branch, cut for it by every push.

`status` wants the registry's evals and the last run's counts, not every eval's
newest runs (ten megabytes at 5,000 evals). Each push writes a status commit with
the tip; a reader reads it only when it was cut from the tip the remote holds now
and watches every eval asked for, and the tip otherwise: the answers are the tip's
either way.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from actions import checkout, job_env, push_payload, tip
from gitrepos import GIT_ENV, fresh_clone, git, make_origin

from firewall.errors import RegistryError
from firewall.store import statusref
from firewall.store.gitstate import GitState
from firewall.store.history import HistoryRow
from firewall.timeutil import to_text

BRANCH = "firewall-state"
NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
SINCE = to_text(NOW - dt.timedelta(days=14))
FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_origin(tmp_path, {"firewall.toml": ""})


def rows(run_id: str, hours_ago: float, *, median: float = 0.8) -> list[HistoryRow]:
    stamp = to_text(NOW - dt.timedelta(hours=hours_ago))
    return [
        HistoryRow(
            eval_id=f"e{i}",
            run_id=run_id,
            mode="run",
            status="pass" if i else "quarantined",
            k=7,
            build_ts=stamp,
            median=median + i / 100,
            iqr=0.01,
            git_ref="refs/heads/main",
        )
        for i in range(3)
    ]


def writer(origin: Path, where: Path, watched: set[str] | None = None) -> GitState:
    return GitState(
        fresh_clone(origin, where),
        "origin",
        BRANCH,
        watched=None if watched is None else lambda: watched,
    )


def reader(origin: Path, where: Path, *, triage: bool) -> GitState:
    return GitState(fresh_clone(origin, where), "origin", BRANCH, triage=triage)


def fetched_tip(state: GitState) -> bool:
    return git(state.cwd, "for-each-ref", "refs/firewall/state") != ""


def test_status_reads_the_status_commit_alone_and_gets_the_tips_answers(
    origin: Path, tmp_path: Path
) -> None:
    state = writer(origin, tmp_path / "job", watched={"e0"})
    state.push(rows("r1", 5))
    state.push([], files={"progress.json": '{"e0": {"streak": 2}}'})
    state.push(rows("r2", 1, median=0.5))
    cut = git(origin, "show", f"{statusref.remote_ref(BRANCH)}:{statusref.STATUS}")
    header, *lines = cut.splitlines()
    assert json.loads(header)["watched"] == ["e0"] and len(lines) == 1
    assert json.loads(header)["tip"] == git(origin, "rev-parse", BRANCH)
    assert git(origin, "log", "--format=%P", "-1", statusref.remote_ref(BRANCH)) == ""

    triage = reader(origin, tmp_path / "status", triage=True)
    whole = reader(origin, tmp_path / "whole", triage=False)
    assert triage.holds_history() and whole.holds_history()
    assert triage.rows(SINCE, {"e0"}) == whole.rows(SINCE, {"e0"})
    assert [r.median for r in triage.rows(SINCE, {"e0"})] == [0.8, 0.5]
    assert triage.last_run_summary() == whole.last_run_summary()
    assert triage.last_run_summary() is not None
    assert triage.read_text("progress.json") == whole.read_text("progress.json")
    assert triage.read_text("progress.json") == '{"e0": {"streak": 2}}'
    assert not fetched_tip(triage), "ten megabytes at 5,000 evals, not fetched"


def test_an_eval_the_status_commit_does_not_watch_is_read_from_the_tip(
    origin: Path, tmp_path: Path
) -> None:
    writer(origin, tmp_path / "job", watched={"e0"}).push(rows("r1", 1))
    triage = reader(origin, tmp_path / "status", triage=True)
    whole = reader(origin, tmp_path / "whole", triage=False)
    assert triage.rows(SINCE, {"e0", "e2"}) == whole.rows(SINCE, {"e0", "e2"})
    assert {r.eval_id for r in triage.rows(SINCE, {"e0", "e2"})} == {"e0", "e2"}
    assert fetched_tip(triage)


def test_a_status_commit_cut_from_an_older_tip_is_not_read(origin: Path, tmp_path: Path) -> None:
    """A firewall that writes no status commit (an older one, a job whose registry cannot
    be read) pushed last: the status commit left behind is of an older tip."""
    writer(origin, tmp_path / "new", watched={"e0"}).push(rows("r1", 5))
    old = writer(origin, tmp_path / "old")
    old.push(rows("r2", 1, median=0.5))

    def unreadable() -> set[str]:
        raise RegistryError("quarantine.json: not JSON")

    broken = GitState(fresh_clone(origin, tmp_path / "broken"), "origin", BRANCH)
    broken.watched = unreadable
    broken.push(rows("r3", 0.5, median=0.4))  # its rows are kept all the same
    triage = reader(origin, tmp_path / "status", triage=True)
    assert [r.median for r in triage.rows(SINCE, {"e0"})] == [0.8, 0.5, 0.4]
    assert fetched_tip(triage)


def test_a_branch_without_a_status_commit_is_read_from_its_tip(
    origin: Path, tmp_path: Path
) -> None:
    writer(origin, tmp_path / "old").push(rows("r1", 1))
    triage = reader(origin, tmp_path / "status", triage=True)
    assert [r.run_id for r in triage.rows(SINCE, {"e0"})] == ["r1"]
    assert triage.last_run_summary() is not None and fetched_tip(triage)


@pytest.mark.e2e
def test_a_default_branch_run_cuts_the_status_commit_that_status_then_reads(
    tmp_path: Path,
) -> None:
    """End to end: a CI run on the default branch, then `firewall status` on a laptop."""
    config = "".join(f'[[evals]]\nid = "e{i}"\ncommand = "echo 0.9"\n\n' for i in range(3))
    registry = {
        "schema_version": 1,
        "evals": {"e0": {"since": to_text(NOW), "source": "manual", "reason": "flaky"}},
    }
    origin = make_origin(
        tmp_path, {"firewall.toml": config, "quarantine.json": json.dumps(registry)}
    )
    sha = tip(origin, "main")
    workspace = checkout(origin, tmp_path / "ci", ref="refs/heads/main", sha=sha)
    env = job_env(
        workspace,
        event_name="push",
        payload=push_payload("o/r", "main", branch="main", before=sha, after=sha),
        ref="refs/heads/main",
        sha=sha,
        repository="o/r",
    )
    done = subprocess.run(
        [FIREWALL, "run"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cut = git(origin, "show", f"{statusref.remote_ref(BRANCH)}:{statusref.STATUS}")
    assert json.loads(cut.splitlines()[0])["watched"] == ["e0"]

    laptop = fresh_clone(origin, tmp_path / "laptop")
    plain = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
    plain.pop("CI", None)
    shown = subprocess.run(
        [FIREWALL, "status", "--json"],
        cwd=laptop,
        env={**plain, **GIT_ENV},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert [q["id"] for q in view["quarantined"]] == ["e0"]
    assert view["last_run"]["counts"], "the run's counts, from the status commit"
    assert git(laptop, "for-each-ref", "refs/firewall/state") == "", "the tip is not fetched"
    assert git(laptop, "for-each-ref", statusref.FETCHED) != ""


def test_while_an_older_firewalls_run_files_wait_on_the_tip_status_reads_the_tip(
    origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older firewall left run files on the tip, which pushes fold into the recent file
    a few at a time: until the last is folded, a status commit cut from the recent file
    would miss their rows, so none is written and `status` reads the tip."""
    from firewall.store import gitstate
    from firewall.store.statefiles import run_file

    monkeypatch.setattr(gitstate, "MIGRATE_FILES", 1)
    old = dict(run_file(rows(f"old{n}", 10 - n)) for n in range(3))
    state = writer(origin, tmp_path / "job")
    state.push([], files=old)
    state.watched = lambda: {"e0"}
    read_the_tip = []
    for n in range(4):
        state.push(rows(f"new{n}", 4 - n, median=0.5))
        triage = reader(origin, tmp_path / f"status{n}", triage=True)
        whole = reader(origin, tmp_path / f"whole{n}", triage=False)
        assert triage.rows(SINCE, {"e0"}) == whole.rows(SINCE, {"e0"})
        read_the_tip.append(fetched_tip(triage))
    # two pushes leave an older run file behind; the third folds the last one in
    assert read_the_tip == [True, True, False, False]
