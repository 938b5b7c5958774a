"""Whether a run's cost grows with the age of its history (issue 11: 1 GB took 18-22 s).

Builds one project three times over, differing only in `.firewall/history.jsonl`:

- empty: no history at all (the issue's baseline);
- young: the last 15 days only (the 14-day trend window and a day before it),
  200 evals at 6 runs a day, about 5 MB;
- old: --mb megabytes of older runs of the same 200 evals, then the young rows.

The project defines 20 of the 200 evals (trivial Python functions, k = 3) and
quarantines 5 of them. In each copy it times, as separate processes from spawn
to exit with their peak RSS from ``wait4``:

- `firewall run` as a GitHub Actions job would run it (``GITHUB_ACTIONS=true``,
  a step summary and an output file in the scratch directory, no token): the
  job summary carries the trends;
- `firewall status`;

and the trends step alone (``Context.trends``, what a run calls for its summary
and its issues), timed inside a process of its own. A repetition measures every
copy back to back; a ratio is the median of the per-repetition ratios. Target:
old within 2x of empty, end to end.

    python benchmarks/history_scale.py              # a 200 MB history, 3 repetitions
    python benchmarks/history_scale.py --mb 1000    # the issue's 1 GB (2.7 M rows here)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from firewall.store.history import HistoryRow
from firewall.timeutil import now, to_text

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
EVALS = 200  # in the history
DEFINED = 20  # of them in the project's config
QUARANTINED = 5  # of the defined ones
RUNS_PER_DAY = 6
YOUNG_DAYS = 15
RUN_ID, STAMP = "RUNID0000000", "1999-01-01T00:00:00Z"  # placeholders in a run's template


def run_template() -> str:
    """One run's rows as the firewall writes them, with placeholders for its id and time."""
    rows = [
        HistoryRow(
            eval_id=f"eval-{n:04d}",
            run_id=RUN_ID,
            mode="run",
            status="pass",
            k=7,
            build_ts=STAMP,
            median=0.8 + n % 17 / 100,
            iqr=n % 9 / 100,
            mean=0.8 + n % 13 / 100,
            sd=0.012,
            n=7,
            pass_rate=1.0,
            drift={"category": 0.0},
            model_ids=("gpt-4o-mini-2024-07-18",),
            prompt_versions=("v3",),
            git_sha="0123456789abcdef0123456789abcdef01234567",
            git_ref="refs/heads/main",
        )
        for n in range(EVALS)
    ]
    return "".join(row.to_json() + "\n" for row in rows)


def write_history(path: Path, *, old_bytes: int, at: dt.datetime) -> int:
    """Old runs worth ``old_bytes``, then the young window's; returns the rows written."""
    template = run_template()
    step = dt.timedelta(days=1) / RUNS_PER_DAY
    young = YOUNG_DAYS * RUNS_PER_DAY
    old = old_bytes // len(template)
    first = at - step * (old + young)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for run in range(old + young):
            stamp = to_text(first + step * run)
            handle.write(template.replace(RUN_ID, f"{run:012x}").replace(STAMP, stamp))
    return (old + young) * EVALS


def make_project(root: Path, name: str, *, old_bytes: int | None, at: dt.datetime) -> Path:
    project = root / name
    project.mkdir()
    (project / "scale_evals.py").write_text("def fn(seed):\n    return 1.0\n")
    evals = "".join(
        f'\n[[evals]]\nid = "eval-{n:04d}"\npython = "scale_evals:fn"\n' for n in range(DEFINED)
    )
    (project / "firewall.toml").write_text(f"k = 3\nconcurrency = 2\nseed = 1\n{evals}")
    since = to_text(at - dt.timedelta(days=30))
    entries = {
        f"eval-{n:04d}": {"since": since, "source": "manual", "reason": "benchmark"}
        for n in range(DEFINED - QUARANTINED, DEFINED)
    }
    (project / "quarantine.json").write_text(json.dumps({"schema_version": 1, "evals": entries}))
    if old_bytes is not None:
        write_history(project / ".firewall" / "history.jsonl", old_bytes=old_bytes, at=at)
    return project


def history_size(project: Path) -> int | None:
    path = project / ".firewall" / "history.jsonl"
    return path.stat().st_size if path.exists() else None


def restore(project: Path, size: int | None) -> None:
    path = project / ".firewall" / "history.jsonl"
    if size is None:
        path.unlink(missing_ok=True)
    else:
        os.truncate(path, size)


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "FIREWALL_"))}
    env.pop("CI", None)
    return env


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one command, which must succeed."""
    began = time.perf_counter()
    proc = subprocess.Popen(
        [FIREWALL, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    errors = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"firewall {' '.join(args)} failed in {cwd}:\n{errors.decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def in_actions(project: Path) -> dict[str, str]:
    summary, outputs = project / "step-summary.md", project / "step-output.txt"
    summary.write_text("")
    outputs.write_text("")
    return {
        **clean_env(),
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(outputs),
    }


# In a process of its own, so that this one stays small: on Linux a child's peak RSS
# is never below its parent's at the fork.
TRENDS_STEP = """
import sys, time
from pathlib import Path
from firewall.pipeline import context
ctx = context.load(cwd=Path(sys.argv[1]), env={"GITHUB_ACTIONS": "true"})
began = time.perf_counter()
ctx.trends(spec.id for spec in ctx.specs)
print(time.perf_counter() - began)
"""


def trends_step(project: Path) -> float:
    """Seconds of ``Context.trends`` (the run's trends step) on a freshly loaded context."""
    done = subprocess.run(
        [sys.executable, "-c", TRENDS_STEP, str(project)],
        env=clean_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200, help="size of the old history (MB)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    at = now()
    names = ("empty", "young", "old")
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    with tempfile.TemporaryDirectory(prefix="firewall-history-scale-") as scratch:
        root = Path(scratch)
        projects = {
            "empty": make_project(root, "empty", old_bytes=None, at=at),
            "young": make_project(root, "young", old_bytes=0, at=at),
            "old": make_project(root, "old", old_bytes=int(args.mb * 1e6), at=at),
        }
        sizes = {name: history_size(project) for name, project in projects.items()}
        history = projects["old"] / ".firewall" / "history.jsonl"
        with history.open("rb") as handle:
            size, rows = history.stat().st_size, sum(1 for _ in handle)
        for project in projects.values():  # warm the byte-code caches and the page cache
            timed(["status"], project, clean_env())
        for _ in range(args.repeat):
            for name, project in projects.items():
                measured = samples[name]
                run_s, run_mb = timed(["run"], project, in_actions(project))
                restore(project, sizes[name])  # the run appended its rows: take them back
                status_s, status_mb = timed(["status"], project, clean_env())
                for key, value in (
                    ("run_s", run_s),
                    ("run_mb", run_mb),
                    ("status_s", status_s),
                    ("status_mb", status_mb),
                    ("trends_ms", trends_step(project) * 1000),
                ):
                    measured.setdefault(key, []).append(value)

    def med(name: str, key: str) -> float:
        return statistics.median(samples[name][key])

    def ratio(key: str, against: str) -> float:
        pairs = zip(samples["old"][key], samples[against][key], strict=True)
        return statistics.median(a / b for a, b in pairs)

    print(f"old history: {size / 1e6:,.0f} MB, {rows:,} rows; {args.repeat} repetitions, medians")
    print(f"{'':28}{'empty':>10}{'young':>10}{'old':>10}{'old/empty':>11}{'old/young':>11}")
    for key, label, unit in (
        ("run_s", "firewall run (Actions)", "s"),
        ("run_mb", "  peak RSS", "MB"),
        ("status_s", "firewall status", "s"),
        ("status_mb", "  peak RSS", "MB"),
        ("trends_ms", "trends step (in process)", "ms"),
    ):
        cells = "".join(f"{med(name, key):>7.2f} {unit:<2}" for name in names)
        # The trends step has nothing to read in an empty history: no baseline there.
        empty = "-" if key == "trends_ms" else f"{ratio(key, 'empty'):.2f}x"
        print(f"{label:28}{cells}{empty:>11}{ratio(key, 'young'):>10.2f}x")
    met = ratio("run_s", "empty") <= 2 and ratio("status_s", "empty") <= 2
    print(f"target old within 2x of empty (run and status): {'met' if met else 'MISSED'}")


if __name__ == "__main__":
    main()
