"""What a CI job fetches of the shared history after a year: bytes and seconds.

Builds a local bare origin whose state branch holds what a year of runs leaves
behind for 1,000 evals at 6 runs a day: the last two weeks of runs whole (one
file per run, 84 files) and the 50 weeks before rolled up (one row per eval per
week), on top of one commit per run (2,190 of them), as the firewall's own
pushes would make it. Then, as a job on a fresh clone would, it reads the
history through the firewall's own reader (a shallow fetch of the tip) and
reports how many bytes came over and how long it took, against the targets of
5 MB and 5 s. The baseline in the same run is git alone fetching the same tip
(`git fetch --depth 1 origin firewall-state`): the ratio is what reading and
parsing the rows adds to git's own cost.

    python benchmarks/state.py                 # 1,000 evals, a year, 3 repetitions
    python benchmarks/state.py --evals 200 --repetitions 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from firewall.store.gitstate import RAW_DAYS, GitState
from firewall.store.history import HistoryRow
from firewall.store.statefiles import render_rollup, roll_up, run_file, week_of
from firewall.timeutil import to_text

RUNS_PER_DAY = 6
DAYS = 365
ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_SYSTEM": os.devnull,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, env=ENV, check=True
    )
    return proc.stdout.strip()


def run_rows(evals: int, at: dt.datetime, rng: random.Random) -> list[HistoryRow]:
    stamp = to_text(at)
    run_id = f"{rng.getrandbits(48):012x}"
    rows = []
    for i in range(evals):
        median = min(1.0, max(0.0, 0.8 + rng.gauss(0, 0.05)))
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
            )
        )
    return rows


def build_origin(root: Path, evals: int) -> Path:
    """A bare origin with a default branch and a year-old state branch."""
    origin = root / "origin.git"
    git(root, "init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    seed = root / "seed"
    git(root, "clone", "--quiet", str(origin), str(seed))
    (seed / "firewall.toml").write_text("")
    git(seed, "add", "--all")
    git(seed, "commit", "--quiet", "-m", "project")
    git(seed, "push", "--quiet", "origin", "HEAD:main")

    rng = random.Random(20261201)
    now = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    recent: dict[str, str] = {}
    weeks: dict[str, list[HistoryRow]] = {}
    for day in range(DAYS, -1, -1):
        for run in range(RUNS_PER_DAY):
            at = now - dt.timedelta(days=day) + dt.timedelta(hours=4 * run)
            rows = run_rows(evals, at, rng)
            if day <= RAW_DAYS:
                path, text = run_file(rows)
                recent[path] = text
            else:
                weeks.setdefault(week_of(rows[0].build_ts), []).extend(roll_up(rows))
    files = dict(recent)
    for week, rows in weeks.items():
        files[f"rollup/{week}.jsonl"] = render_rollup(week, rows)

    # One commit per run, as the pushes would leave them; only the tip carries the files.
    empty = git(seed, "hash-object", "-t", "tree", "-w", "--stdin", stdin="")
    parent = None
    for n in range(DAYS * RUNS_PER_DAY - 1):
        args = ["commit-tree", empty, "-m", f"run {n}"] + (["-p", parent] if parent else [])
        parent = git(seed, *args)
    index = {**ENV, "GIT_INDEX_FILE": str(root / "index")}
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
    tip = git(seed, "commit-tree", tree, "-p", parent or "", "-m", "today")
    git(seed, "push", "--quiet", "origin", f"{tip}:refs/heads/firewall-state")
    return origin


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evals", type=int, default=1000)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args(argv)
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
        f"| rows a job reads (2 weeks whole, 50 weeks rolled up) | {middle['rows']:,.0f} |  |  |\n"
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
