"""The history on a git remote's branch: each eval's newest runs, races retried, rolled up."""

from __future__ import annotations

import datetime as dt
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from gitrepos import GIT_ENV, branch_files, fresh_clone, git, make_origin

from firewall.constants import RECENT_RUNS
from firewall.store.git import StateError
from firewall.store.gitstate import GitState
from firewall.store.history import HistoryRow, LocalHistory
from firewall.store.shared import SharedHistory
from firewall.store.statefiles import RECENT, parse_file, run_file, week_of
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
    days = range(RECENT_RUNS + 20, -1, -1)  # one run a day, oldest first, up to today
    for day in days:
        state.push(rows(f"d{day}", days_ago=day, median=0.5 + day / 100))
    files = branch_files(origin, BRANCH)
    assert [f for f in files if f.startswith("runs/")] == ["runs/2026/12/01/090000Z-d0.jsonl"]
    rolled = [f for f in files if f.startswith("rollup/")]
    assert rolled and all(f.endswith(".jsonl") for f in rolled)
    reader = state_in(origin, tmp_path / "reader")
    kept = reader.rows()
    whole = [r for r in kept if r.mode == "run"]
    assert {r.run_id for r in whole} == {f"d{day}" for day in range(RECENT_RUNS)}
    assert [(r.run_id, r.eval_id, r.median, r.drift) for r in whole] == [
        (r.run_id, r.eval_id, round(r.median or 0, 4), r.drift)
        for day in range(RECENT_RUNS - 1, -1, -1)
        for r in rows(f"d{day}", days_ago=day, median=0.5 + day / 100)
    ], "every field kept, numbers to four decimals"
    summaries = [r for r in kept if r.mode == "rollup"]
    assert {r.eval_id for r in summaries} == {"e0", "e1", "e2"}
    # every older run is still counted, once, in its week's rollup
    assert sum(r.n for r in summaries) == 3 * (len(days) - RECENT_RUNS)
    # a week's rollup stands for its runs: the mean of their medians, folded night by night
    for summary in summaries:
        week = [
            0.5 + day / 100
            for day in days
            if day >= RECENT_RUNS
            and week_of(to_text(NOW - dt.timedelta(days=day))) == summary.run_id[7:]
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
from firewall.store.gitstate import GitState
from firewall.store.history import HistoryRow
clone, run_id, go, evals = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
state = GitState(clone, "origin", "firewall-state")
state.rows()
while not go.exists():
    time.sleep(0.01)
stamp = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
state.push([HistoryRow(eval_id=f"e{i}", run_id=run_id, mode="run", status="pass", k=7,
                       build_ts=stamp, median=0.8) for i in range(evals)])
"""


@pytest.mark.parametrize("jobs", [16])  # 64: benchmarks/state.py --jobs 64
def test_a_sharded_matrix_pushing_at_once_keeps_every_run(
    origin: Path, tmp_path: Path, jobs: int
) -> None:
    """Sixteen processes, each a job on a clone of its own, push one run at the same moment:
    every run lands (a user's matrix kept 24 rows of 48 when a push had five tries)."""
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
            [sys.executable, "-c", _JOB, str(clone), f"run{n:02d}", str(go), str(evals)],
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
    kept = state_in(origin, tmp_path / "reader").rows()
    assert len(kept) == jobs * evals
    assert len({row.run_id for row in kept}) == jobs


def test_a_lost_race_naming_a_commit_with_403_in_it_is_no_refusal() -> None:
    """One push in a few hundred names a commit whose hash holds "403": that is a race to
    retry, not a token without write access (it failed a job of a sixteen-job matrix)."""
    from firewall.store.gitstate import _lost_a_race, _refused

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
        writer.push(rows(f"d{day}", days_ago=day), keep_runs=3)
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
    reader.push(rows("today"), keep_runs=3)
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
