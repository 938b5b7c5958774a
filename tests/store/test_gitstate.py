"""The history on a git remote's branch: each eval's newest runs, races retried, rolled up."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from gitrepos import GIT_ENV, branch_files, fresh_clone, git, make_origin

from firewall.constants import RECENT_RUNS, ROLL_UP_EVERY
from firewall.store import statusref
from firewall.store.git import Git, StateError
from firewall.store.gitstate import GitState
from firewall.store.history import HistoryRow, LocalHistory
from firewall.store.recent import RECENT
from firewall.store.rollups import week_of
from firewall.store.shared import SharedHistory
from firewall.store.statefiles import parse_file, run_file
from firewall.timeutil import to_text

BRANCH = "firewall-state"
NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone.utc)


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)


def rows(
    run_id: str, *, days_ago: float = 0, evals: int = 3, median: float = 0.8
) -> list[HistoryRow]:
    stamp = to_text(NOW - dt.timedelta(days=days_ago))
    return [
        HistoryRow(
            eval_id=f"e{i}",
            run_id=run_id,
            mode="run",
            status="pass",
            k=7,
            build_ts=stamp,
            median=median,
            iqr=0.01 * i,
            mean=median,
            sd=0.01,
            n=7,
            pass_rate=1.0,
            drift={"category": 0.25} if i == 0 else {},
            model_ids=("m-1",),
            git_sha="a" * 40,
            git_ref="refs/heads/main",
        )
        for i in range(evals)
    ]


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_origin(tmp_path, {"firewall.toml": ""})


def state_in(origin: Path, where: Path) -> GitState:
    return GitState(fresh_clone(origin, where), "origin", BRANCH)


def week_refs(origin: Path) -> list[str]:
    """The rolled-up weeks the origin keeps off the branch, by name."""
    listed = git(origin, "for-each-ref", "--format=%(refname)", f"refs/firewall/{BRANCH}/weeks/")
    return [name.rsplit("/", 1)[1] for name in listed.split()]


def runs_counted(kept: list[HistoryRow]) -> int:
    """How many runs of an eval the rows stand for: a rollup row stands for ``n`` of them."""
    return sum(row.n if row.mode == "rollup" else 1 for row in kept)


def test_a_run_file_holds_every_field_of_its_rows() -> None:
    written = rows("r1")
    path, text = run_file(written)
    assert path == "runs/2026/12/01/090000Z-r1.jsonl"
    assert list(parse_file(text)) == written
    assert text.count('"run_id"') == 1, "run-level fields are said once, in the header"


def test_the_first_push_makes_an_orphan_branch_with_the_recent_file_and_the_run(
    origin: Path, tmp_path: Path
) -> None:
    state = state_in(origin, tmp_path / "job1")
    assert state.rows() == []
    state.push(rows("r1"))
    assert branch_files(origin, BRANCH) == [RECENT, "runs/2026/12/01/090000Z-r1.jsonl"]
    assert git(origin, "rev-list", "--count", BRANCH) == "1"
    assert git(origin, "log", "--format=%P", "-1", BRANCH) == "", "an orphan: no parent"
    # The default branch and the job's work tree are untouched.
    assert branch_files(origin, "main") == ["firewall.toml"]
    assert git(state.cwd, "status", "--porcelain") == ""

    later = state_in(origin, tmp_path / "job2")
    assert later.rows() == rows("r1")


def test_concurrent_jobs_each_land_their_run(origin: Path, tmp_path: Path) -> None:
    states = [state_in(origin, tmp_path / f"job{n}") for n in range(4)]
    for state in states:
        state.rows()  # every job fetched the same tip before any of them pushed

    def push(n: int) -> None:
        for m in range(3):
            states[n].push(rows(f"j{n}r{m}", days_ago=0.001 * (3 * n + m)))

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(push, range(4)))
    runs = [f for f in branch_files(origin, BRANCH) if f.startswith("runs/")]
    assert runs == ["runs/2026/12/01/090000Z-j0r0.jsonl"], "the newest run's file alone"
    reader = state_in(origin, tmp_path / "reader")
    assert sorted({r.run_id for r in reader.rows()}) == sorted(
        f"j{n}r{m}" for n in range(4) for m in range(3)
    )
    assert len(reader.rows()) == 12 * 3
    assert len({row.run_id for row in reader.rows()}) == 12


def test_each_evals_newest_runs_are_kept_whole_and_older_ones_rolled_up_by_week(
    origin: Path, tmp_path: Path
) -> None:
    state = state_in(origin, tmp_path / "job")
    days = range(RECENT_RUNS + 2 * ROLL_UP_EVERY, -1, -1)  # a run a day, up to today
    for day in days:
        state.push(rows(f"d{day}", days_ago=day, median=0.5 + day / 100))
    # A line rolls its oldest runs up at its eval's turn, one push in ROLL_UP_EVERY, so it
    # holds RECENT_RUNS to RECENT_RUNS + ROLL_UP_EVERY - 1 runs, the newest, and the evals'
    # turns differ: nine pushes in ten leave each eval's week alone.
    files = branch_files(origin, BRANCH)
    assert files == [RECENT, "runs/2026/12/01/090000Z-d0.jsonl"], "no week on the tip"
    assert week_refs(origin), "each rolled-up week a ref of its own"
    reader = state_in(origin, tmp_path / "reader")
    held = {e: sum(r.eval_id == e for r in reader.rows()) for e in ("e0", "e1", "e2")}
    assert len(set(held.values())) > 1, held
    assert all(RECENT_RUNS <= n < RECENT_RUNS + ROLL_UP_EVERY for n in held.values())
    kept = reader.rows(weeks=True)
    for eval_id, n in held.items():
        whole = [r for r in kept if r.mode == "run" and r.eval_id == eval_id]
        assert [(r.run_id, r.median, r.drift) for r in whole] == [
            (r.run_id, round(r.median or 0, 4), r.drift)
            for day in range(n - 1, -1, -1)
            for r in rows(f"d{day}", days_ago=day, median=0.5 + day / 100)
            if r.eval_id == eval_id
        ], "every field kept, numbers to four decimals"
        summaries = [r for r in kept if r.mode == "rollup" and r.eval_id == eval_id]
        # every older run is still counted, once, in its week's rollup
        assert sum(r.n for r in summaries) == len(days) - n
        # a week's rollup stands for its runs: the mean of their medians, folded push by push
        for summary in summaries:
            week = [
                0.5 + day / 100
                for day in days
                if day >= n and week_of(to_text(NOW - dt.timedelta(days=day))) == summary.run_id[7:]
            ]
            assert summary.n == len(week)
            assert summary.median == pytest.approx(sum(week) / len(week))
    # the newest N of each eval, from the recent file alone
    assert [r.run_id for r in reader.rows(eval_ids={"e1"}, last=2)] == ["d1", "d0"]


def test_run_files_of_an_older_firewall_are_folded_in_a_few_at_a_time(
    origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A branch an older firewall wrote holds two weeks of run files: each push folds some
    of them into the recent file, and readers see every row once all the while."""
    from firewall.store import gitstate

    monkeypatch.setattr(gitstate, "MIGRATE_FILES", 2)
    old = {}
    for day in range(5, 0, -1):
        path, text = run_file(rows(f"old{day}", days_ago=day))
        old[path] = text
    writer = state_in(origin, tmp_path / "writer")
    writer.push([], files=old)
    expected = [r for day in range(5, 0, -1) for r in rows(f"old{day}", days_ago=day)]
    for n in range(3):
        writer.push(rows(f"new{n}", days_ago=-n / 100))
        expected += rows(f"new{n}", days_ago=-n / 100)
        reader = state_in(origin, tmp_path / f"reader{n}")
        assert sorted(reader.rows(), key=lambda r: (r.build_ts, r.eval_id)) == sorted(
            expected, key=lambda r: (r.build_ts, r.eval_id)
        )
    assert [f for f in branch_files(origin, BRANCH) if f.startswith("runs/")] == [
        run_file(rows("new2", days_ago=-0.02))[0]
    ]


def test_an_unreachable_remote_is_said_once_and_the_local_file_serves(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    git(clone, "init", "--quiet")
    git(clone, "remote", "add", "origin", str(tmp_path / "no-such-origin.git"))
    said: list[str] = []
    local = LocalHistory(clone / ".firewall" / "history.jsonl")
    shared = SharedHistory(
        local, GitState(clone, "origin", BRANCH), writes=lambda: True, notice=said.append
    )
    shared.append(rows("r1"))
    shared.append(rows("r2"))
    assert [r.run_id for r in shared.last_run()] == ["r2"] * 3
    assert len(list(shared.scan({"e1"}))) == 2
    assert len(said) == 1 and "origin/firewall-state is out of reach" in said[0]
    assert "git fetch from origin/firewall-state failed" in said[0]


def test_a_refused_push_is_said_once_and_changes_nothing_else(origin: Path, tmp_path: Path) -> None:
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'permission denied to github-actions[bot]' >&2\nexit 1\n")
    hook.chmod(0o755)
    clone = fresh_clone(origin, tmp_path / "fork")
    said: list[str] = []
    local = LocalHistory(clone / ".firewall" / "history.jsonl")
    shared = SharedHistory(
        local, GitState(clone, "origin", BRANCH), writes=lambda: True, notice=said.append
    )
    shared.append(rows("r1"))
    shared.append(rows("r2"))
    assert len(said) == 1 and "git push to origin/firewall-state was refused" in said[0]
    assert "contents: write" in said[0], "it says what to change"
    assert [r.run_id for r in local.scan()] == ["r1"] * 3 + ["r2"] * 3
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run(
            ["git", "rev-parse", "--verify", BRANCH], cwd=origin, check=True, capture_output=True
        )


def test_a_run_that_does_not_write_keeps_its_rows_local(origin: Path, tmp_path: Path) -> None:
    clone = fresh_clone(origin, tmp_path / "pull-request")
    local = LocalHistory(clone / ".firewall" / "history.jsonl")
    shared = SharedHistory(
        local, GitState(clone, "origin", BRANCH), writes=lambda: False, notice=print
    )
    shared.append(rows("pr"))
    assert BRANCH not in git(origin, "branch", "--list")
    assert len(list(local.scan())) == 3


def test_state_error_names_the_command() -> None:
    with pytest.raises(StateError, match="git fetch from origin/firewall-state failed"):
        GitState(Path("/"), "origin", BRANCH).rows()


def test_an_empty_or_missing_branch_leaves_the_local_file_as_the_history(
    origin: Path, tmp_path: Path
) -> None:
    clone = fresh_clone(origin, tmp_path / "laptop")
    local = LocalHistory(clone / ".firewall" / "history.jsonl")
    said: list[str] = []
    shared = SharedHistory(
        local, GitState(clone, "origin", BRANCH), writes=lambda: False, notice=said.append
    )
    shared.append(rows("mine"))
    assert [r.run_id for r in shared.last_run()] == ["mine"] * 3
    assert len(list(shared.scan())) == 3 and said == []


def test_git_never_waits_for_a_password(tmp_path: Path) -> None:
    from firewall.store.git import Git

    # ssh may not ask for a passphrase on a terminal; a command the user set stands.
    assert "BatchMode=yes" in Git(tmp_path).environment(None)["GIT_SSH_COMMAND"]
    assert Git(tmp_path).environment(None)["GIT_TERMINAL_PROMPT"] == "0"
    own = Git(tmp_path, {"GIT_SSH_COMMAND": "ssh -i key"}).environment(None)
    assert own["GIT_SSH_COMMAND"] == "ssh -i key"


GH006 = """#!/bin/sh
echo 'error: GH006: Protected branch update failed for refs/heads/firewall-state.' >&2
echo 'error: Changes must be made through a pull request.' >&2
exit 1
"""


def test_a_protected_state_branch_is_told_apart_from_a_lost_race(
    origin: Path, tmp_path: Path
) -> None:
    """GitHub's branch protection answers GH006 (a ruleset GH013): retrying is no use, and
    the message says what to change instead of "lost the race 5 times"."""
    hook = origin / "hooks" / "pre-receive"
    hook.write_text(GH006)
    hook.chmod(0o755)
    state = state_in(origin, tmp_path / "job")
    with pytest.raises(StateError) as refused:
        state.push(rows("r1"))
    text = str(refused.value)
    assert "was refused" in text and "GH006" in text and "exempt the state branch" in text
    assert "lost the race" not in text


def test_concurrent_writers_of_one_file_keep_each_others_evals(
    origin: Path, tmp_path: Path
) -> None:
    """A push gate remembering an issue number while the nightly saves tonight's streaks:
    each changes its own evals on the tip it lands on, so neither rolls the other back."""
    from firewall.lifecycle import Progress
    from firewall.store.progress import PROGRESS

    first = state_in(origin, tmp_path / "nightly")
    first.push([], updates={PROGRESS.path: PROGRESS.merge({"tone": lambda _: Progress(k=1)})})
    gate = state_in(origin, tmp_path / "gate")
    gate.rows()  # the gate read the tip at its start...
    nightly = state_in(origin, tmp_path / "nightly-2")
    nightly.push(  # ...then the nightly counted a stable night...
        [], updates={PROGRESS.path: PROGRESS.merge({"tone": lambda _: Progress(stable_streak=1)})}
    )

    def learn_issue(tip: Progress | None) -> Progress:
        return (tip or Progress()).model_copy(update={"issue": 42})

    gate.push(
        [], updates={PROGRESS.path: PROGRESS.merge({"tone": learn_issue, "pii": learn_issue})}
    )
    final = PROGRESS.parse(state_in(origin, tmp_path / "reader").read_text(PROGRESS.path))
    assert final is not None
    assert final["tone"].stable_streak == 1 and final["tone"].issue == 42
    assert final["pii"].issue == 42


def test_eight_writers_of_candidates_at_once_keep_every_eval(origin: Path, tmp_path: Path) -> None:
    from firewall.lifecycle import Candidate
    from firewall.store.progress import CANDIDATES

    states = [state_in(origin, tmp_path / f"job-{i}") for i in range(8)]

    def record(i: int) -> None:
        candidate = Candidate(k=5, at=NOW, pr=i)
        states[i].push(
            [], updates={CANDIDATES.path: CANDIDATES.merge({f"e{i}": lambda _: candidate})}
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(record, range(8)))
    final = CANDIDATES.parse(state_in(origin, tmp_path / "reader").read_text(CANDIDATES.path))
    assert final is not None and sorted(final) == [f"e{i}" for i in range(8)]


def test_the_state_branch_uses_the_checkouts_credentials_else_the_steps_token(
    tmp_path: Path,
) -> None:
    """actions/checkout persists the job's token as an extraheader: pushes with it start no
    workflow, so it is kept. With persist-credentials: false there is none, and the step's
    GITHUB_TOKEN is sent, as the proposal's push sends it."""
    repo = tmp_path / "job"
    repo.mkdir()
    git(repo, "init", "--quiet")
    git(repo, "remote", "add", "origin", "https://github.example/acme/app.git")
    env = {"GITHUB_TOKEN": "ghs_token", "GITHUB_SERVER_URL": "https://github.example"}
    header = GitState(repo, "origin", BRANCH, env=env)._auth
    assert "AUTHORIZATION: basic" in " ".join(header.values())
    git(repo, "config", "--local", "http.https://github.example/.extraheader", "AUTHORIZATION: x")
    assert GitState(repo, "origin", BRANCH, env=env)._auth == {}


# One CI job of a sharded matrix: fetch the tip, wait for the others, push one run.
_JOB = """
import datetime as dt, sys, time
from pathlib import Path
from firewall.store import statusref
from firewall.store.gitstate import GitState
from firewall.store.history import HistoryRow
clone, run_id, go, evals = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
keep, days_ago = int(sys.argv[5]), float(sys.argv[6])
state = GitState(clone, "origin", "firewall-state", watched=lambda: {"e1"})
state.rows()
while not go.exists():
    time.sleep(0.01)
at = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone.utc) - dt.timedelta(days=days_ago)
stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
state.push([HistoryRow(eval_id=f"e{i}", run_id=run_id, mode="run", status="pass", k=7,
                       build_ts=stamp, median=0.8) for i in range(evals)], keep_runs=keep, room=0)
"""


@pytest.mark.parametrize(
    ("jobs", "keep"),
    [(16, RECENT_RUNS), (16, 4)],  # 64: benchmarks/state.py --jobs 64
    ids=["recent-file", "into-the-weeks"],
)
def test_a_sharded_matrix_pushing_at_once_keeps_every_run(
    origin: Path, tmp_path: Path, jobs: int, keep: int
) -> None:
    """Sixteen processes, each a job on a clone of its own, push one run at the same moment:
    every run lands (a user's matrix kept 24 rows of 48 when a push had five tries). With
    each eval keeping its newest four, twelve runs fall into three weeks' refs, which the
    jobs replace at once, each with its lease, atomically with the tip."""
    import os
    import sys

    evals = 3
    go = tmp_path / "go"
    # A push to GitHub takes a second or two, and the race is lost in that time: the
    # origin's hook makes each push take a while, as a remote across a network does.
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\ncat >/dev/null\nsleep 0.3\n")
    hook.chmod(0o755)
    clones = [fresh_clone(origin, tmp_path / f"job-{n}") for n in range(jobs)]
    env = {**os.environ, **GIT_ENV, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _JOB,
                str(clone),
                f"run{n:02d}",
                str(go),
                str(evals),
                str(keep),
                str(n),  # a run a day: the oldest fall into three weeks
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, clone in enumerate(clones)
    ]
    go.touch()
    answers = [proc.communicate(timeout=300) for proc in procs]
    failures = [err for proc, (_, err) in zip(procs, answers, strict=True) if proc.returncode]
    assert failures == [], failures[0][-1500:] if failures else ""
    kept = state_in(origin, tmp_path / "reader").rows(weeks=True)
    assert runs_counted(kept) == jobs * evals
    whole = {row.run_id for row in kept if row.mode == "run"}
    assert len(whole) == min(jobs, keep)
    fallen = {week_of(to_text(NOW - dt.timedelta(days=n))) for n in range(keep, jobs)}
    assert sorted(week_refs(origin)) == sorted(fallen)
    # The status commit the last push cut is the tip's, and answers as the tip does.
    cut = git(origin, "show", f"{statusref.remote_ref(BRANCH)}:{statusref.STATUS}")
    assert json.loads(cut.splitlines()[0])["tip"] == git(origin, "rev-parse", BRANCH)
    triage = GitState(fresh_clone(origin, tmp_path / "status"), "origin", BRANCH, triage=True)
    assert triage.rows(eval_ids={"e1"}) == state_in(origin, tmp_path / "tip").rows(eval_ids={"e1"})
    assert git(triage.cwd, "for-each-ref", "refs/firewall/state") == ""


def test_a_lost_race_naming_a_commit_with_403_in_it_is_no_refusal() -> None:
    """One push in a few hundred names a commit whose hash holds "403": that is a race to
    retry, not a token without write access (it failed a job of a sixteen-job matrix)."""
    from firewall.store.statepush import lost_a_race as _lost_a_race
    from firewall.store.statepush import refused as _refused

    stderr = (
        "To /srv/origin.git\n"
        " ! [rejected]        781c403b136dc6944de86b2e4e0c3b4e7a2215f1 -> firewall-state "
        "(fetch first)\n"
        "error: failed to push some refs to '/srv/origin.git'\n"
    )
    assert _refused(stderr) is None and _lost_a_race(stderr)
    assert _refused("remote: HTTP 403\nfatal: unable to access") is not None


def test_a_reader_reads_only_the_files_of_its_window(
    origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI command asks for two weeks, the status of the last run, or progress.json: it reads
    those files, never the year behind them (a million rows took a minute and a gigabyte)."""
    from firewall.store.git import Git

    writer = state_in(origin, tmp_path / "writer")
    for day in (300, 200, 100, 40, 30, 20, 10, 2, 1):
        writer.push(rows(f"d{day}", days_ago=day), keep_runs=3, room=0)
    writer.push([], files={"progress.json": "{}\n"})
    read: list[str] = []
    batch = Git.batch

    def counted(self: Git, request: bytes) -> bytes:
        read.extend(request.decode().split())
        return batch(self, request)

    monkeypatch.setattr(Git, "batch", counted)
    reader = state_in(origin, tmp_path / "reader")
    assert reader.read_text("progress.json") == "{}\n"
    assert len(read) == 1, "progress.json alone"
    since = to_text(NOW - dt.timedelta(days=14))
    read.clear()
    assert {row.run_id for row in reader.rows(since, last=2)} == {"d2", "d1"}
    assert read == [f"{reader.tip()}:{RECENT}"], "each eval's newest runs: the recent file alone"
    window = reader.rows(since)
    assert {row.run_id for row in window} == {"d10", "d2", "d1"}
    # and the one rollup week that reaches into the window, if any
    assert len(read) <= 2 and all(name.split(":")[1].startswith("rollup/") for name in read[1:])
    read.clear()
    assert [row.run_id for row in reader.last_run()] == ["d1"] * 3
    assert len(read) == 1, "the newest run's file"
    read.clear()
    reader.push(rows("today"), keep_runs=3, room=0)
    assert (
        sorted(name.split(":")[1] for name in read)
        == [RECENT, "rollup/2026-W47.jsonl"][: len(read)]
    ), "a push reads the recent file and the week its oldest run falls into"


def test_an_over_nested_line_on_the_branch_is_skipped_and_said_once(
    origin: Path, tmp_path: Path
) -> None:
    """It made every CI `run` and `status` exit 4 (a RecursionError); now its file's other
    rows are read, and the notice names it once, however many readers ask."""
    good = rows("r1")
    path, text = run_file(good)
    deep = "[" * 100_000
    writer = state_in(origin, tmp_path / "writer")
    writer.push([], files={path: text + deep + "\n", "runs/2026/11/30/090000Z-r0.jsonl": deep})
    said: list[str] = []
    clone = fresh_clone(origin, tmp_path / "reader")
    shared = SharedHistory(
        LocalHistory(clone / "history.jsonl"),
        GitState(clone, "origin", BRANCH),
        writes=lambda: False,
        notice=said.append,
    )
    assert shared.recent(since=NOW - dt.timedelta(days=14)) == good
    assert shared.last_run() == good
    assert list(shared.scan()) == good
    assert len(said) == 1 and "cannot be read" in said[0] and "RecursionError" in said[0]


def test_an_unreadable_progress_file_counts_as_empty_and_is_said_once(
    origin: Path, tmp_path: Path
) -> None:
    from firewall.store.progress import CANDIDATES, PROGRESS

    writer = state_in(origin, tmp_path / "writer")
    writer.push([], files={PROGRESS.path: "[" * 100_000, CANDIDATES.path: "\x00garbage"})
    said: list[str] = []
    clone = fresh_clone(origin, tmp_path / "reader")
    shared = SharedHistory(
        LocalHistory(clone / "history.jsonl"),
        GitState(clone, "origin", BRANCH),
        writes=lambda: False,
        notice=said.append,
    )
    assert shared.progress() is None and shared.progress() is None
    assert shared.candidates() == {} and shared.candidates() == {}
    assert len(said) == 2 and "progress.json" in said[0] and "candidates.json" in said[1]


def test_a_roll_up_starts_the_branch_anew_so_a_full_clone_stays_small(
    origin: Path, tmp_path: Path
) -> None:
    """A plain `git clone` (or `fetch-depth: 0`) fetches the branch's whole history: a year
    of superseded run files, 175 MB at 1,000 evals. Each push leaves the branch one
    parentless commit, so its history is its tip."""
    state = state_in(origin, tmp_path / "job")
    for day in range(RECENT_RUNS + 30, -1, -1):
        for hour in (0.5, 0.25):  # two runs a day
            state.push(rows(f"d{day}h{hour}", days_ago=day + hour))
    assert int(git(origin, "rev-list", "--count", BRANCH)) == 1
    reachable = git(origin, "rev-list", "--objects", BRANCH).splitlines()
    tip_objects = git(origin, "ls-tree", "-r", "-t", BRANCH).splitlines()
    assert len(reachable) == len(tip_objects) + 2, "the tip's files and trees, its commit and tree"
    assert len(state_in(origin, tmp_path / "reader").rows()) > 0


# --- rolled-up weeks: refs of their own, off the tip ------------------------------------


def test_a_year_of_pushes_leaves_no_week_on_the_tip_and_every_run_in_the_week_refs(
    origin: Path, tmp_path: Path
) -> None:
    """A run every six days for a year, each eval keeping its newest three: the tip holds the
    recent file and the newest run, each week that rows fell into is a ref of its own, and
    together they still count every run."""
    state = state_in(origin, tmp_path / "job")
    days = list(range(366, -1, -6))
    for day in days:
        state.push(rows(f"d{day}", days_ago=day, median=0.5 + day / 1000), keep_runs=3, room=0)
    assert branch_files(origin, BRANCH) == [RECENT, run_file(rows("d0"))[0]]
    fallen = {week_of(to_text(NOW - dt.timedelta(days=day))) for day in days[:-3]}
    assert sorted(week_refs(origin)) == sorted(fallen)
    for week in week_refs(origin):
        commit = f"refs/firewall/{BRANCH}/weeks/{week}"
        assert git(origin, "log", "--format=%P", "-1", commit) == "", "a parentless commit"
        assert git(origin, "ls-tree", "-r", "--name-only", commit) == f"rollup/{week}.jsonl"
    reader = state_in(origin, tmp_path / "reader")
    everything = reader.rows(weeks=True)
    for eval_id in ("e0", "e1", "e2"):
        assert runs_counted([r for r in everything if r.eval_id == eval_id]) == len(days)
    assert runs_counted(everything) == 3 * len(days)
    # the means of each week's runs, as they were pushed
    for summary in (r for r in everything if r.mode == "rollup"):
        medians = [
            0.5 + day / 1000
            for day in days[:-3]
            if week_of(to_text(NOW - dt.timedelta(days=day))) == summary.run_id[7:]
        ]
        assert summary.n == len(medians)
        assert summary.median == pytest.approx(sum(medians) / len(medians))
    # A window asks for the weeks it reaches into, and only them.
    since = to_text(NOW - dt.timedelta(days=40))
    window = GitState(reader.cwd, "origin", BRANCH).rows(since, {"e1"}, weeks=True)
    stamps = {day: to_text(NOW - dt.timedelta(days=day)) for day in days}
    by_week: dict[str, list[str]] = {}
    for day in days[:-3]:
        by_week.setdefault(week_of(stamps[day]), []).append(stamps[day])
    # a week's row is built at its last run's time, and stands for all of the week's runs
    expected = sum(len(kept) for kept in by_week.values() if max(kept) >= since)
    assert runs_counted(window) == expected + 3
    assert all(row.build_ts >= since for row in window)


def test_a_checkout_and_a_default_read_never_fetch_the_weeks(origin: Path, tmp_path: Path) -> None:
    """actions/checkout (one commit, shallow), a plain `git clone` and every CI read take the
    branch's tip only; `git clone --mirror` alone takes the weeks."""
    from actions import checkout, tip

    writer = state_in(origin, tmp_path / "writer")
    for day in range(20, -1, -2):
        writer.push(rows(f"d{day}", days_ago=day), keep_runs=2, room=0)
    assert week_refs(origin)
    ci = checkout(origin, tmp_path / "ci", ref="refs/heads/main", sha=tip(origin, "main"))
    plain = fresh_clone(origin, tmp_path / "plain")
    states = [GitState(clone, "origin", BRANCH) for clone in (ci, plain)]
    for state in states:
        assert git(state.cwd, "for-each-ref", "refs/firewall/") == ""
        since = to_text(NOW - dt.timedelta(days=14))
        assert {r.run_id for r in state.rows(since)} == {"d2", "d0"}
        assert state.medians(since, {"e0"}, last=14) == {"e0": [0.8, 0.8]}
        assert state.last_run() and state.read_text("progress.json") is None
        assert git(state.cwd, "for-each-ref", "refs/firewall/weeks/") == ""
    for state in states:
        clone = state.cwd
        state.push(rows(f"today-{clone.name}"), keep_runs=2, room=0)  # fetches the week it writes
        fetched = git(clone, "for-each-ref", "--format=%(refname)", "refs/firewall/").split()
        assert fetched[0] == "refs/firewall/state" and len(fetched) == 2
        assert fetched[1].rsplit("/", 1)[1] in week_refs(origin)
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "--quiet", "--mirror", str(origin), str(mirror))
    assert week_refs(mirror) == week_refs(origin)


def test_status_reads_the_weeks_only_when_its_window_reaches_past_the_recent_runs(
    tmp_path: Path,
) -> None:
    """`firewall status` draws the default two weeks from each eval's newest runs (the tip);
    `--days 90` adds the older runs' weekly means, fetching the weeks its window reaches."""
    import json
    import os
    import shutil
    import sys

    since = to_text(NOW - dt.timedelta(days=120))
    evals: dict[str, dict[str, str]] = {"e1": {"since": since, "source": "manual"}}
    registry = {"schema_version": 1, "evals": evals}
    for entry in evals.values():
        entry["reason"] = "flaky"
    origin = make_origin(
        tmp_path,
        {"firewall.toml": '[[evals]]\nid = "e1"\ncommand = "echo 1"\n'}
        | {"quarantine.json": json.dumps(registry)},
    )
    writer = state_in(origin, tmp_path / "writer")
    now = dt.datetime.now(dt.timezone.utc)
    back = (now - NOW).total_seconds() / 86400
    for day in range(60, -1, -3):
        writer.push(rows(f"d{day}", days_ago=day - back, median=0.5), keep_runs=3, room=0)
    firewall = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
    env = {**os.environ, **GIT_ENV}
    env = {k: v for k, v in env.items() if not k.startswith(("GITHUB_", "RUNNER_")) and k != "CI"}

    def status(where: Path, *args: str) -> tuple[list[float | None], bool]:
        """The quarantined eval's trend, and whether any week was fetched."""
        clone = fresh_clone(origin, where)
        proc = subprocess.run(
            [firewall, "status", "--json", *args],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert "cannot be read" not in proc.stderr and "out of reach" not in proc.stderr
        fetched = git(clone, "for-each-ref", "refs/firewall/weeks/") != ""
        return json.loads(proc.stdout)["quarantined"][0]["trend"], fetched

    assert status(tmp_path / "default") == ([0.5, 0.5, 0.5], False)
    trend, fetched = status(tmp_path / "ninety", "--days", "90")
    # the three runs kept whole, after a weekly mean for each week of the other eighteen
    weekly = {week_of(to_text(now - dt.timedelta(days=day))) for day in range(60, 8, -3)}
    assert fetched and trend == [0.5] * (len(weekly) + 3)


def test_a_week_an_older_firewall_left_on_the_tip_moves_off_a_few_a_push(
    origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older firewall kept every week on the tip. Each push moves a few to refs of their
    own (as they are, or merged with a ref that week already has), and a reader that asks
    for weeks sees every run all the while."""
    from firewall.store import gitstate
    from firewall.store import weeks as weekrefs
    from firewall.store.rollups import render_rollup, roll_up

    monkeypatch.setattr(gitstate, "MIGRATE_WEEKS", 2)
    old = {}
    for week_ago in range(10, 4, -1):
        ran = rows(f"old{week_ago}", days_ago=7 * week_ago)
        old[f"rollup/{week_of(ran[0].build_ts)}.jsonl"] = render_rollup(
            week_of(ran[0].build_ts), roll_up(ran)
        )
    writer = state_in(origin, tmp_path / "writer")
    writer.push([], files=old)
    # one of those weeks has a ref already (a newer firewall's push), holding another run
    both = sorted(old)[3].removeprefix("rollup/").removesuffix(".jsonl")
    extra = rows("other", days_ago=7 * 7)
    assert week_of(extra[0].build_ts) == both
    blob = Git(writer.cwd).blob(render_rollup(both, roll_up(extra)))
    made = weekrefs.commits(Git(writer.cwd), {both: blob}, message="newer")
    git(
        writer.cwd, "push", "--quiet", "origin", f"{made[both]}:{weekrefs.remote_ref(BRANCH, both)}"
    )

    expected = 3 * (len(old) + 1)
    for n in range(4):
        writer.push(rows(f"new{n}", days_ago=-n / 100))
        on_tip = [f for f in branch_files(origin, BRANCH) if f.startswith("rollup/")]
        assert len(on_tip) == max(0, len(old) - 2 * (n + 1))
        reader = state_in(origin, tmp_path / f"reader{n}")
        assert runs_counted(reader.rows(weeks=True)) == expected + 3 * (n + 1)
    assert sorted(week_refs(origin)) == sorted(w[7:-6] for w in old)
    merged = [r for r in reader.rows(weeks=True) if r.run_id == f"rollup-{both}"]
    assert [r.n for r in merged] == [2, 2, 2], "the tip's week and the ref's, merged"


def test_garbage_in_a_week_ref_is_skipped_and_said_once(origin: Path, tmp_path: Path) -> None:
    """A week's ref is written by whoever can push: a commit without its file, a line nested
    past the parser, garbage. A reader skips what it cannot read, says so once, goes on."""
    from firewall.store import weeks as weekrefs

    writer = state_in(origin, tmp_path / "writer")
    writer.push(rows("r1"))
    bad = {"2026-W40": "[" * 100_000 + "\n", "2026-W41": "\x00garbage\n{}\n"}
    blobs = {week: Git(writer.cwd).blob(text) for week, text in bad.items()}
    made = weekrefs.commits(Git(writer.cwd), blobs, message="bad")
    empty_tree = Git(writer.cwd).out("mktree", stdin="")
    empty = Git(writer.cwd).out("commit-tree", empty_tree, "-m", "empty")
    specs = [f"{c}:{weekrefs.remote_ref(BRANCH, w)}" for w, c in made.items()]
    specs.append(f"{empty}:{weekrefs.remote_ref(BRANCH, '2026-W42')}")
    git(writer.cwd, "push", "--quiet", "origin", *specs)
    said: list[str] = []
    clone = fresh_clone(origin, tmp_path / "reader")
    shared = SharedHistory(
        LocalHistory(clone / "history.jsonl"),
        GitState(clone, "origin", BRANCH),
        writes=True.__bool__,
        notice=said.append,
    )
    assert list(shared.scan()) == rows("r1")
    assert shared.recent(since=NOW - dt.timedelta(days=90), weeks=True) == rows("r1")
    assert len(said) == 1 and "cannot be read" in said[0]
    # and a push that folds rows into such a week replaces it with what it can read
    shared.state.push(rows("r2", days_ago=-1), keep_runs=1, room=0)
    assert runs_counted(list(shared.state.rows(weeks=True))) == 6


def test_weeks_between_crosses_a_year() -> None:
    from firewall.store.weeks import weeks_between

    assert weeks_between("2026-12-20", "2027-01-06") == [
        "2026-W51",
        "2026-W52",
        "2026-W53",
        "2027-W01",
    ]
    assert weeks_between("2026-12-28", "2027-01-11") == ["2026-W53", "2027-W01", "2027-W02"]
    assert weeks_between("2026-12-01", "2026-12-01") == ["2026-W49"]


def test_the_weeks_a_push_rolls_into_are_fetched_while_it_folds(
    origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The weeks of the runs that can fall out are asked for before the fold, beside it: a
    push that rolls up makes one round trip for its weeks, and the fold does not wait for
    it (a fold that rolls up finds its weeks asked for before it ends)."""
    from firewall.store import gitstate, weeks
    from firewall.store.recentfold import fold_recent

    state = state_in(origin, tmp_path / "job")
    for day in range(RECENT_RUNS + ROLL_UP_EVERY, 0, -1):
        state.push(rows(f"d{day}", days_ago=day))
    asked: list[set[str]] = []
    called = threading.Event()
    fetch = weeks.fetch

    def counted(*args: Any, **kwargs: Any) -> dict[str, str]:
        asked.append(set(args[3]))
        called.set()
        return fetch(*args, **kwargs)

    rolling: list[int] = []

    def folding(*args: Any, **kwargs: Any) -> Any:
        folded = fold_recent(*args, **kwargs)
        if folded[1]:  # it rolls up: its weeks are being fetched already
            rolling.append(len(asked))
            assert called.wait(10), "the weeks were asked for only after the fold"
        return folded

    monkeypatch.setattr(weeks, "fetch", counted)
    monkeypatch.setattr(gitstate, "fold_recent", folding)
    per_push = []
    for n in range(ROLL_UP_EVERY):
        asked.clear()
        called.clear()
        state.push(rows(f"n{n}", days_ago=-n / 100))
        per_push.append(len(asked))
    assert max(per_push) == 1, per_push  # one round trip for the weeks, at most
    # Each of the 3 evals rolled up at its turn, and a push that is no eval's turn
    # fetched no week.
    assert 1 <= len(rolling) <= 3 and per_push.count(1) == len(rolling), per_push
