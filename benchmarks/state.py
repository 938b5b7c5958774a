"""What a CI job fetches of the shared history after a year: bytes and seconds.

Builds a local bare origin whose state branch holds what a year of runs leaves
behind for 1,000 evals at 6 runs a day, as the firewall's own pushes leave it:
the tip (one parentless commit) holds each eval's newest 30 runs
(``recent.jsonl``) and the newest run's file; the 52 weeks before are rolled up
(one row per eval per week), each week a parentless commit at
``refs/firewall/firewall-state/weeks/<week>``, which no clone fetches. Then, as
a job on a fresh clone would, it reads the history through the firewall's own
reader (a shallow fetch of the tip) and reports how many bytes came over and
how long it took, against the targets of 5 MB and 5 s. The baseline in the same
run is git alone fetching the same tip (`git fetch --depth 1 origin
firewall-state`): the ratio is what reading and parsing the rows adds to git's
own cost.

With ``--runs-per-day N`` it times real `firewall run` and `firewall status`
commands on a CI checkout with a year of state and without a state branch
(CPU, wall, peak RSS), the store's reads alone, and what the branch adds to a
full clone and to a mirror clone (the weeks) after a month and a year; with
``--jobs N`` it pushes N runs at once and counts the rows kept.

    python benchmarks/state.py                 # 1,000 evals, a year, 3 repetitions
    python benchmarks/state.py --evals 200 --repetitions 1
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Collection, Iterator
from pathlib import Path

import firewall
from firewall.constants import RECENT_RUNS, ROLL_UP_EVERY
from firewall.store import weeks as week_refs
from firewall.store.git import Git
from firewall.store.gitstate import GitState
from firewall.store.history import HistoryRow
from firewall.store.recent import RECENT
from firewall.store.recentfold import fold_recent
from firewall.store.rollups import render_rollup, roll_up, week_of
from firewall.timeutil import to_text

RUNS_PER_DAY = 6
DAYS = 365
# An eval's line holds its newest RECENT_RUNS runs and up to ROLL_UP_EVERY - 1 more, and
# rolls them up at its turn, one push in ROLL_UP_EVERY, the evals' turns staggered by their
# ids (firewall.store.recentfold). The tips measured: the steady state (each line at its
# own place in the cycle: a push rolls up a tenth of the evals), and the branch as the
# release before left it (every line FULL, no count of pushes: the first push after an
# upgrade).
FULL = RECENT_RUNS + ROLL_UP_EVERY - 1
PUSHES = 4_000  # the steady tip's count of pushes so far: any number
ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_SYSTEM": os.devnull,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}
# Byte-code caches on, as an installed package has them (pip compiles it): with
# PYTHONDONTWRITEBYTECODE set, an editable install recompiles the firewall's modules at
# every start, a second of each command that both sides of every ratio would share.


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, env=ENV, check=True
    )
    return proc.stdout.strip()


def run_rows(evals: int, at: dt.datetime, rng: random.Random) -> list[HistoryRow]:
    """A run's rows as a real `firewall run` writes them: the fingerprint and the files it
    read (each eval's, a run's own) and the trials and seconds it cost."""
    stamp = to_text(at)
    run_id = f"{rng.getrandbits(48):012x}"
    digest = f"{rng.getrandbits(64):016x}"
    rows = []
    for i in range(evals):
        median = min(1.0, max(0.0, 0.8 + rng.gauss(0, 0.05)))
        inputs = {"file:bench_evals.py": digest, "firewall": "0.1.0", "settings": f"{i:016x}"}
        rows.append(
            HistoryRow(
                eval_id=f"suite/eval-{i:04d}",
                run_id=run_id,
                mode="run",
                status="pass" if median >= 0.8 else "fail",
                k=7,
                build_ts=stamp,
                median=median,
                iqr=abs(rng.gauss(0.01, 0.01)),
                mean=median,
                sd=abs(rng.gauss(0.01, 0.005)),
                n=7,
                pass_rate=1.0 if median >= 0.8 else 0.0,
                git_sha=f"{rng.getrandbits(160):040x}",
                git_ref="refs/heads/main",
                fingerprint=f"{rng.getrandbits(128):032x}",
                inputs=inputs,
                trials=7,
                seconds=round(rng.uniform(0, 0.01), 4),
            )
        )
    return rows


def build_origin(
    root: Path,
    evals: int,
    runs_per_day: int = RUNS_PER_DAY,
    *,
    history: bool = True,
    days: int = DAYS,
    name: str = "origin.git",
    project: dict[str, str] | None = None,
    now: dt.datetime = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc),
    held: int | None = None,
    watched: Collection[str] | None = None,
) -> Path:
    """A bare origin with a default branch (``project``'s files, else an empty config) and
    a state branch ``days`` old, as the firewall's pushes leave it: each eval's newest
    ``held`` runs in recent.jsonl (without, each at its place in the roll-up cycle, as
    ``PUSHES`` pushes leave it), the newest run's file, older runs rolled up by week,
    one parentless commit (the last push's, made by the firewall itself). Without
    ``history``, the origin has no state branch at all. With ``watched`` (the registry's
    evals), the last push cuts the status commit to them, as `firewall run` does."""
    origin = root / name
    git(root, "init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    # A push is kept as the pack it came in, as a hosted server keeps it. git's default
    # (receive.unpackLimit 100) unpacks a push of a few objects, the tip's, into loose
    # objects, and `git daemon` then deflates recent.jsonl again for every fetch (0.26 s
    # of the server's CPU at 5,000 evals): the server's cost in the commands' wall time.
    git(origin, "config", "receive.unpackLimit", "1")
    seed = root / f"seed-{name}"
    git(root, "clone", "--quiet", str(origin), str(seed))
    for path, text in (project or {"firewall.toml": ""}).items():
        (seed / path).write_text(text)
    git(seed, "add", "--all")
    git(seed, "commit", "--quiet", "-m", "project")
    git(seed, "push", "--quiet", "origin", "HEAD:main")
    if not history:
        return origin

    rng = random.Random(20261201)
    step = dt.timedelta(days=1) / runs_per_day
    # The runs each eval's line holds before the push below: ``held - 1`` each (that push
    # makes ``held``), or, in the steady state, its runs since its last turn (the push
    # below is number PUSHES - 1; recentfold._turn is the same hash).
    if held is None:
        counts = [RECENT_RUNS + (PUSHES - 2 + _turn(i)) % ROLL_UP_EVERY for i in range(evals)]
    else:
        counts = [held - 1] * evals
    most = max(counts)
    newest = [now - step * n for n in range(most)][::-1]  # kept whole, and the push below
    per_run = [
        [r for r, count in zip(run_rows(evals, at, rng), counts, strict=True) if n >= most - count]
        for n, at in enumerate(newest)
    ]
    recent, _ = fold_recent(None, [r for rows in per_run for r in rows], keep=most, room=0)
    # The count of pushes so far, or none: the release before did not count them.
    pushes = f'"pushes":{PUSHES - 1},' if held is None else ""
    recent = recent.replace('"pushes":1,', pushes, 1)
    # The weeks before them, one row per eval per week standing for its runs (the fold's
    # arithmetic, on one run a day: the numbers differ, the bytes per row do not).
    weeks: dict[str, list[HistoryRow]] = {}
    first = newest[0] - dt.timedelta(days=days)
    for day in range(days):
        at = first + dt.timedelta(days=day)
        if at >= newest[0]:
            break
        weeks.setdefault(week_of(to_text(at)), []).extend(roll_up(run_rows(evals, at, rng)))
    files = {RECENT: recent}
    # Each week a parentless commit of its own, off the tip, as the firewall's pushes keep it.
    blobs = {
        week: git(seed, "hash-object", "-w", "--stdin", stdin=render_rollup(week, rows))
        for week, rows in weeks.items()
    }
    made = week_refs.commits(Git(seed, ENV), blobs, message="built")
    refs = [f"{commit}:{week_refs.remote_ref('firewall-state', w)}" for w, commit in made.items()]
    for start in range(0, len(refs), 100):
        git(seed, "push", "--quiet", "origin", *refs[start : start + 100])
    index = {**ENV, "GIT_INDEX_FILE": str(root / f"index-{name}")}
    for path, text in files.items():
        blob = git(seed, "hash-object", "-w", "--stdin", stdin=text)
        subprocess.run(
            ["git", "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"],
            cwd=seed,
            env=index,
            check=True,
        )
    tree = subprocess.run(
        ["git", "write-tree"], cwd=seed, env=index, capture_output=True, text=True, check=True
    ).stdout.strip()
    tip = git(seed, "commit-tree", tree, "-m", "built")
    git(seed, "push", "--quiet", "origin", f"{tip}:refs/heads/firewall-state")
    # The last run of the day, pushed by the firewall: its fold and its parentless tip.
    # A run cuts the status commit to the registry's evals, as `firewall run` does.
    cut = None if watched is None else lambda: watched
    writer = GitState(seed, "origin", "firewall-state", env=ENV, watched=cut)
    writer.push(run_rows(evals, now + step, rng))
    git(origin, "gc", "--quiet", "--prune=now")
    return origin


def _turn(i: int) -> int:
    """The turn of eval ``i`` in the roll-up cycle, as ``recentfold._turn`` hashes its id."""
    return zlib.crc32(f"suite/eval-{i:04d}".encode())


def pack_bytes(clone: Path) -> int:
    stats = dict(
        line.split(": ", 1)
        for line in git(clone, "count-objects", "-v").splitlines()
        if ": " in line
    )
    return (int(stats.get("size-pack", "0")) + int(stats.get("size", "0"))) * 1024


def measure(origin: Path, root: Path, n: int) -> dict[str, float]:
    clone = root / f"job-{n}"
    git(root, "clone", "--quiet", "--depth=1", f"file://{origin}", str(clone))
    before = pack_bytes(clone)
    started = time.perf_counter()
    rows = GitState(clone, "origin", "firewall-state", env=ENV).rows()
    seconds = time.perf_counter() - started
    fetched = pack_bytes(clone) - before

    baseline = root / f"baseline-{n}"
    git(root, "clone", "--quiet", "--depth=1", f"file://{origin}", str(baseline))
    started = time.perf_counter()
    git(baseline, "fetch", "--quiet", "--depth=1", "origin", "firewall-state")
    baseline_s = time.perf_counter() - started
    return {"rows": len(rows), "bytes": fetched, "seconds": seconds, "baseline_s": baseline_s}


# What a CI command reads of the state, in a process of its own (time and peak memory):
# the trends of every eval over two weeks (a publishing `run`), the last run and the
# quarantine's trends (`status`), progress.json (every command), and a push (a writing run).
_COMMAND = """
import datetime as dt, sys, time
from pathlib import Path
from firewall.store.gitstate import GitState
from firewall.store.history import LocalHistory
from firewall.store.shared import SharedHistory
from firewall.report.status import read_trends
clone, branch, evals = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
started = time.perf_counter()
shared = SharedHistory(LocalHistory(clone / "history.jsonl"),
                       GitState(clone, "origin", branch), writes=lambda: False, notice=print)
now = dt.datetime.fromisoformat(sys.argv[4])
ids = {f"suite/eval-{i:04d}" for i in range(evals)}
trend = read_trends(shared, ids, at=now)  # a publishing run's summary
# a pull request's comment: each eval's latest status on the default branch
shared.recent(ids, since=now - dt.timedelta(days=30), last=1, ref="refs/heads/main")
# `firewall status`: the quarantine's trends (50 evals) and the last run
shared.recent(set(sorted(ids)[:50]), since=now - dt.timedelta(days=14))
last = shared.last_run()
shared.progress()
# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, the benchmark's own peak with it.
peak = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM"))
print(len(trend), len(last), time.perf_counter() - started, int(peak.split()[1]) * 1024)
"""


def command_cost(
    root: Path, origin: Path, branch: str, evals: int, n: int, at: dt.datetime
) -> dict[str, float]:
    clone = root / f"cmd-{branch}-{n}"
    git(root, "clone", "--quiet", "--depth=1", f"file://{origin}", str(clone))
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _COMMAND, str(clone), branch, str(evals), at.isoformat()],
        capture_output=True,
        text=True,
        env=ENV,
        check=True,
    ).stdout.split()
    # The process's whole life, start-up and imports included, as a command's would be.
    seconds = time.perf_counter() - started
    return {"sparklines": float(out[-4]), "seconds": seconds, "rss": float(out[-1])}


# --- a real CI command, with a year of state and with none ------------------------------

FIREWALL = str(Path(sys.executable).parent / "firewall")
QUARANTINED = 50  # of the evals, in quarantine.json: what `status` shows with its trends


def ci_project(evals: int, at: dt.datetime) -> dict[str, str]:
    """The default branch of a project of ``evals`` trivial evals (k = 7, the default), the
    first ``QUARANTINED`` of them in the registry, with the ids the state's rows carry."""
    config = "seed = 20261201\n" + "".join(
        f'\n[[evals]]\nid = "suite/eval-{i:04d}"\npython = "bench_evals:fn"\n' for i in range(evals)
    )
    since = to_text(at - dt.timedelta(days=30))
    entries = {
        f"suite/eval-{i:04d}": {"since": since, "source": "manual", "reason": "benchmark"}
        for i in range(QUARANTINED)
    }
    return {
        "firewall.toml": config,
        "bench_evals.py": "def fn(seed):\n    return 1.0\n",
        "quarantine.json": json.dumps({"schema_version": 1, "evals": entries}),
        ".gitignore": ".firewall/\nfirewall-report.json\n",
    }


@contextlib.contextmanager
def git_server(root: Path) -> Iterator[str]:
    """``git daemon`` serving ``root`` on loopback, pushes allowed: its URL's prefix. The
    server's packing is then its own processes' work, as GitHub's is, not the command's
    (a ``file://`` remote runs upload-pack and receive-pack as the command's children)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--enable=receive-pack",
            f"--base-path={root}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(root),
        ],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while (
            subprocess.run(
                ["git", "ls-remote", f"git://127.0.0.1:{port}/none.git"],
                env=ENV,
                capture_output=True,
            ).returncode
            != 0
        ):
            if time.monotonic() > deadline:
                sys.exit("git daemon did not start")
            time.sleep(0.1)
        yield f"git://127.0.0.1:{port}"
    finally:
        daemon.terminate()
        daemon.wait()


def ci_checkout(root: Path, origin: Path, name: str, server: str) -> Path:
    """A checkout as actions/checkout makes it: one commit of the default branch fetched
    shallow, no other branch, no ``refs/remotes/origin/HEAD``."""
    clone = root / name
    git(root, "init", "--quiet", "--initial-branch=main", str(clone))
    git(clone, "remote", "add", "origin", f"{server}/{origin.relative_to(root)}")
    git(
        clone,
        "fetch",
        "--quiet",
        "--no-tags",
        "--depth=1",
        "origin",
        "+refs/heads/main:refs/remotes/origin/main",
    )
    git(clone, "checkout", "--quiet", "--force", "-B", "main", "refs/remotes/origin/main")
    return clone


def ci_env(clone: Path) -> dict[str, str]:
    """A push to the default branch in GitHub Actions, without a token (no issues)."""
    event = clone.parent / f"{clone.name}-event.json"
    event.write_text(json.dumps({"repository": {"default_branch": "main"}}))
    summary, outputs = clone.parent / f"{clone.name}-summary.md", clone.parent / f"{clone.name}-out"
    summary.write_text("")
    outputs.write_text("")
    env = {k: v for k, v in ENV.items() if not k.startswith(("GITHUB_", "FIREWALL_", "RUNNER_"))}
    env.pop("CI", None)
    return {
        **env,
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_SHA": git(clone, "rev-parse", "HEAD"),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(outputs),
    }


# The command, timed from a small process of its own: a child's peak RSS on Linux starts
# at its parent's at the fork, and this benchmark's own process holds a year of rows.
_TIMED = """
import json, os, subprocess, sys, time
began = time.perf_counter()
proc = subprocess.Popen(sys.argv[2:], cwd=sys.argv[1], stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE)
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
print(json.dumps({"code": os.waitstatus_to_exitcode(status), "wall": time.perf_counter() - began,
                  "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss * 1024,
                  "stderr": err.decode("utf-8", "replace")[-3000:]}))
"""


def timed_command(clone: Path, env: dict[str, str], *args: str) -> dict[str, float]:
    """Wall and CPU seconds (the command and the workers it reaped) and peak RSS of a
    `firewall` command in ``clone``, which must exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", _TIMED, str(clone), FIREWALL, *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    measured: dict[str, float] = json.loads(done.stdout)
    if measured["code"] != 0:
        sys.exit(f"firewall {' '.join(args)} exited {measured['code']}:\n{measured['stderr']}")
    return measured


Measured = dict[str, dict[str, float]]  # a command to its cpu, wall and rss


def ci_commands(
    root: Path, tips: dict[str, Path], without: Path, repetitions: int, server: str
) -> dict[str, list[tuple[Measured, Measured]]]:
    """`firewall run` (a push to the default branch: it reads the trends, pushes its rows)
    and `firewall status` on a fresh CI checkout, with a year of state (each of ``tips``:
    a name to an origin) and without a state branch, back to back each repetition. Each
    command starts from the same state: the year's refs as built (the tip, the status
    commit, the weeks), or no state at all (a run without state creates the branch: that
    is what it costs)."""
    built = {name: state_refs(origin) for name, origin in tips.items()}
    pairs: dict[str, list[tuple[Measured, Measured]]] = {name: [] for name in tips}
    for n in range(repetitions):
        for name, origin in tips.items():
            pair = []
            for state in (origin, without):
                measured = {}
                for command in ("run", "status"):
                    set_state_refs(state, built[name] if state is origin else {})
                    clone = ci_checkout(
                        root, state, f"ci-{name}-{state.stem}-{command}-{n}", server
                    )
                    measured[command] = timed_command(clone, ci_env(clone), command)
                pair.append(measured)
            pairs[name].append((pair[0], pair[1]))
    return pairs


def state_refs(origin: Path) -> dict[str, str]:
    """The origin's state: the branch's tip and every ref the firewall keeps beside it."""
    listed = git(
        origin,
        "for-each-ref",
        "--format=%(refname) %(objectname)",
        "refs/heads/firewall-state",
        "refs/firewall/",
    )
    return dict(line.split() for line in listed.splitlines())


def set_state_refs(origin: Path, refs: dict[str, str]) -> None:
    """The origin's state set to ``refs``: each ref as it was, any other state ref gone."""
    now = state_refs(origin)
    lines = [f"delete {ref}" for ref in now if ref not in refs]
    lines += [f"update {ref} {sha}" for ref, sha in refs.items() if now.get(ref) != sha]
    if lines:
        git(origin, "update-ref", "--stdin", stdin="\n".join(lines) + "\n")


def print_ci_commands(evals: int, ci: dict[str, list[tuple[Measured, Measured]]]) -> None:
    """The commands' table: each tip's medians and ratios, and a cycle of pushes."""
    print(
        f"\n| a real CI command ({evals:,} trivial evals, k = 7, a push to the default "
        "branch in Actions, a fresh shallow checkout, the remote a `git daemon` on "
        "loopback) | with a year of state | without a state branch | ratio |\n"
        "|---|---:|---:|---:|"
    )
    tips = {
        "steady": (
            f"a push ({RECENT_RUNS} to {FULL} runs an eval on the tip: it rolls up the "
            f"evals whose turn it is, one in {ROLL_UP_EVERY})"
        ),
        "full": (
            f"the first push after an upgrade ({FULL} runs every eval, as the release "
            "before left the branch)"
        ),
    }
    for command, label in (("run", "`firewall run`"), ("status", "`firewall status`")):
        for tip, what_tip in tips.items():
            for key, what, scale, unit in (
                ("cpu", "CPU (the command and the processes it reaped)", 1, "s"),
                ("wall", "wall", 1, "s"),
                ("rss", "peak RSS (ru_maxrss)", 1e-6, "MB"),
            ):
                mine = statistics.median(w[command][key] for w, _ in ci[tip])
                theirs = statistics.median(wo[command][key] for _, wo in ci[tip])
                ratio = statistics.median(w[command][key] / wo[command][key] for w, wo in ci[tip])
                print(
                    f"| {label}, {what_tip}: {what} | {mine * scale:.2f} {unit} | "
                    f"{theirs * scale:.2f} {unit} | {ratio:.2f}x |"
                )


def clone_bytes(root: Path, origin: Path, name: str, *, mirror: bool = False) -> int:
    """What a full clone of the repository fetches: every branch, all their history (a plain
    `git clone`, or `actions/checkout` with `fetch-depth: 0`); with ``mirror``, every ref
    (`git clone --mirror`: the rolled-up weeks too)."""
    clone = root / name
    how = ["--mirror"] if mirror else ["--no-checkout"]
    git(root, "clone", "--quiet", *how, f"file://{origin}", str(clone))
    return pack_bytes(clone)


def weeks_bytes(origin: Path, branch: str) -> tuple[int, int]:
    """How many rolled-up weeks ``branch`` keeps off its tip, and what they pack to."""
    refs = git(origin, "for-each-ref", "--format=%(refname)", f"refs/firewall/{branch}/weeks/")
    names = refs.split()
    return len(names), pack_bytes_of(origin, *names) if names else 0


def year_of_state(evals: int, runs_per_day: int, repetitions: int) -> None:
    """A CI command's reads on a year of state against the same reads with no state, and
    what the state adds to a full clone after a month and after a year."""
    # The firewall's byte-code written first, as pip writes it when it installs the package.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(firewall.__file__).parent)],
        env=ENV,
        check=True,
    )
    with tempfile.TemporaryDirectory(prefix="firewall-state-bench-") as scratch:
        root = Path(scratch)
        started = time.perf_counter()
        at = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) - dt.timedelta(hours=2)
        project = ci_project(evals, at)
        quarantined = [f"suite/eval-{i:04d}" for i in range(QUARANTINED)]
        origin = build_origin(
            root, evals, runs_per_day, project=project, now=at, watched=quarantined
        )  # the steady state
        full = build_origin(
            root,
            evals,
            runs_per_day,
            project=project,
            now=at,
            name="full.git",
            held=FULL,
            watched=quarantined,
        )
        month = build_origin(root, evals, runs_per_day, days=30, name="month.git")
        stateless = build_origin(root, evals, history=False, name="none.git", project=project)
        print(
            f"built a month and a year of state ({evals} evals, {runs_per_day} runs a day) "
            f"in {time.perf_counter() - started:.0f} s"
        )
        built = state_refs(origin)
        with git_server(root) as server:
            ci = ci_commands(root, {"steady": origin, "full": full}, stateless, repetitions, server)
        set_state_refs(origin, built)
        pairs = []
        for n in range(repetitions):  # with and without state back to back, each repetition
            pairs.append(
                (
                    command_cost(root, origin, "firewall-state", evals, n, at),
                    command_cost(root, origin, "no-such-branch", evals, n, at),
                )
            )
        time_ratio = statistics.median(w["seconds"] / wo["seconds"] for w, wo in pairs)
        rss_ratio = statistics.median(w["rss"] / wo["rss"] for w, wo in pairs)
        with_state = sorted((w for w, _ in pairs), key=lambda r: r["seconds"])[repetitions // 2]
        without = sorted((wo for _, wo in pairs), key=lambda r: r["seconds"])[repetitions // 2]
        tip_year = pack_bytes_of(origin, "firewall-state") / 1e6
        tip_month = pack_bytes_of(month, "firewall-state") / 1e6
        main_only = pack_bytes_of(origin, "main") / 1e6
        clone_year = clone_bytes(root, origin, "full-year") / 1e6
        clone_month = clone_bytes(root, month, "full-month") / 1e6
        mirror_year = clone_bytes(root, origin, "mirror-year", mirror=True) / 1e6
        mirror_month = clone_bytes(root, month, "mirror-month", mirror=True) / 1e6
        weeks_year, weeks_year_bytes = weeks_bytes(origin, "firewall-state")
        weeks_month, weeks_month_bytes = weeks_bytes(month, "firewall-state")
        tip_files = git(origin, "ls-tree", "-r", "--name-only", "firewall-state").split()
        commits = git(origin, "rev-list", "--count", "firewall-state")
    per_month = (clone_year - clone_month) / 11
    mirror_per_month = (mirror_year - mirror_month) / 11
    print_ci_commands(evals, ci)
    print(
        "\n| the store's reads alone, in a process (no project, no evals) | with a year of "
        "state | without state | ratio |\n"
        "|---|---:|---:|---:|\n"
        f"| time (a process: start-up, imports, the reads) | {with_state['seconds']:.2f} s | "
        f"{without['seconds']:.2f} s | {time_ratio:.2f}x |\n"
        f"| peak memory (VmHWM) | {with_state['rss'] / 1e6:.0f} MB | "
        f"{without['rss'] / 1e6:.0f} MB | {rss_ratio:.2f}x |\n"
        f"| sparklines of the summary's trends drawn | {with_state['sparklines']:,.0f} | 0 | |\n"
        "\n| what the state branch adds to a full clone | after a month | after a year |\n"
        "|---|---:|---:|\n"
        f"| the state branch's tip, packed | {tip_month:.1f} MB | {tip_year:.1f} MB |\n"
        f"| a full `git clone` (all branches, all history) | {clone_month:.1f} MB | "
        f"{clone_year:.1f} MB |\n"
        f"| commits on the state branch | 1 | {commits} |\n"
        f"| files on the tip | | {len(tip_files)} ({', '.join(sorted(tip_files)[:3])}) |\n"
        f"| rolled-up weeks, each a ref off the branch (packed) | {weeks_month} "
        f"({weeks_month_bytes / 1e6:.1f} MB) | {weeks_year} ({weeks_year_bytes / 1e6:.1f} MB) |\n"
        f"| a `git clone --mirror` (every ref, the weeks too) | {mirror_month:.1f} MB | "
        f"{mirror_year:.1f} MB |\n"
        f"| growth of a full clone: per month {per_month:.2f} MB, per year "
        f"{per_month * 12:.1f} MB (the default branch alone packs to {main_only:.3f} MB) | | |\n"
        f"| growth of a mirror clone: per month {mirror_per_month:.2f} MB, per year "
        f"{mirror_per_month * 12:.1f} MB | | |\n"
        f"\nmedian of {repetitions}; command: python benchmarks/state.py --evals {evals} "
        f"--runs-per-day {runs_per_day} --repetitions {repetitions}"
    )


def pack_bytes_of(origin: Path, *refs: str) -> int:
    """The bytes a pack of everything reachable from ``refs`` takes: what a clone adds."""
    objects = git(origin, "rev-list", "--objects", *refs)
    pack = subprocess.run(
        ["git", "pack-objects", "--stdout", "-q"],
        cwd=origin,
        input=objects.encode(),
        capture_output=True,
        env=ENV,
        check=True,
    )
    return len(pack.stdout)


def concurrent_jobs(jobs: int, hook_s: float) -> None:
    """``jobs`` processes, each a job on a clone of its own, push a run at once; count rows."""
    with tempfile.TemporaryDirectory(prefix="firewall-state-bench-") as scratch:
        root = Path(scratch)
        origin = root / "origin.git"
        git(root, "init", "--quiet", "--bare", "--initial-branch=main", str(origin))
        hook = origin / "hooks" / "pre-receive"
        hook.write_text(f"#!/bin/sh\ncat >/dev/null\nsleep {hook_s}\n")
        hook.chmod(0o755)
        seed = root / "seed"
        git(root, "clone", "--quiet", str(origin), str(seed))
        git(seed, "commit", "--quiet", "--allow-empty", "-m", "project")
        git(seed, "push", "--quiet", "origin", "HEAD:main")
        go = root / "go"
        clones = []
        for n in range(jobs):
            clones.append(root / f"job-{n}")
            git(root, "clone", "--quiet", str(origin), str(clones[-1]))
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _JOB, str(clone), f"run{n:03d}", str(go), "3"],
                env=ENV,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n, clone in enumerate(clones)
        ]
        started = time.perf_counter()
        go.touch()
        answers = [proc.communicate() for proc in procs]
        seconds = time.perf_counter() - started
        failed = sum(1 for proc in procs if proc.returncode)
        reader = root / "reader"
        git(root, "clone", "--quiet", str(origin), str(reader))
        # Past each eval's newest 30, runs are in the weeks: a rolled-up row stands for n runs.
        rows = GitState(reader, "origin", "firewall-state", env=ENV).rows(weeks=True)
        kept = sum(row.n if row.mode == "rollup" else 1 for row in rows)
        errors = {err.strip().splitlines()[-1] for (_, err) in answers if err.strip()}
    print(
        f"\n{jobs} jobs pushing at once ({hook_s:g} s per push at the origin): "
        f"{kept} of {jobs * 3} rows kept, {failed} jobs failed, all done in {seconds:.1f} s"
        + (f"; {sorted(errors)[:2]}" if errors else "")
        + f"\ncommand: python benchmarks/state.py --jobs {jobs} --push-delay {hook_s:g}"
    )


_JOB = """
import sys, time
from pathlib import Path
from firewall.store.gitstate import GitState
from firewall.store.history import HistoryRow
clone, run_id, go, evals = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
state = GitState(clone, "origin", "firewall-state")
state.tip()
while not go.exists():
    time.sleep(0.01)
state.push([HistoryRow(eval_id=f"e{i}", run_id=run_id, mode="run", status="pass", k=7,
                       build_ts="2026-12-01T09:00:00Z", median=0.8) for i in range(evals)])
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evals", type=int, default=1000)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--runs-per-day", type=int, default=0, help="a CI command's reads")
    parser.add_argument("--jobs", type=int, default=0, help="concurrent pushes instead")
    parser.add_argument("--push-delay", type=float, default=0.3)
    args = parser.parse_args(argv)
    if args.jobs:
        concurrent_jobs(args.jobs, args.push_delay)
        return 0
    if args.runs_per_day:
        year_of_state(args.evals, args.runs_per_day, args.repetitions)
        return 0
    with tempfile.TemporaryDirectory(prefix="firewall-state-bench-") as scratch:
        root = Path(scratch)
        started = time.perf_counter()
        origin = build_origin(root, args.evals)
        print(
            f"built a year of state for {args.evals} evals in {time.perf_counter() - started:.0f} s"
        )
        results = [measure(origin, root, n) for n in range(args.repetitions)]
    results.sort(key=lambda r: r["seconds"])
    middle = results[len(results) // 2]
    megabytes = middle["bytes"] / 1e6
    ok = megabytes < 5 and middle["seconds"] < 5
    print(
        "\n| measurement | value | target | met |\n|---|---:|---|---|\n"
        f"| rows a CI job reads (each eval's newest 30 runs) | {middle['rows']:,.0f} |  |  |\n"
        f"| bytes fetched by a job on a fresh clone | {megabytes:.2f} MB | < 5 MB | "
        f"{'yes' if megabytes < 5 else '**NO**'} |\n"
        f"| time to fetch and read them | {middle['seconds']:.2f} s | < 5 s | "
        f"{'yes' if middle['seconds'] < 5 else '**NO**'} |\n"
        f"| baseline: git alone, `git fetch --depth 1` of the same tip | "
        f"{middle['baseline_s']:.2f} s |  |  |\n"
        f"| ratio: the firewall's read / git's fetch | "
        f"{middle['seconds'] / middle['baseline_s']:.1f}x |  |  |\n"
        f"\nmedian of {args.repetitions}; command: python benchmarks/state.py "
        f"--evals {args.evals} --repetitions {args.repetitions}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
