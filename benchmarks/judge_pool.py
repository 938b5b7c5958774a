"""Where an async eval's judge runs: in the async pool beside its generation, against a
baseline checkout of the firewall that calls every judge in the slot's own worker.

Usage (from the repository root, with the project's venv):

    .venv/bin/python benchmarks/judge_pool.py --baseline ../old-checkout   # 5 repetitions

A generated project: 8 ``async def`` evals x 8 trials at ``concurrency = 64``, each
generation and each judgement awaiting 50 ms (a model call), ``judge_repeats = 1``.
Each side runs the probe phase alone (the runner, as `benchmarks/pool_size.py` does) in
a fresh interpreter importing the firewall from its checkout, alternating, so that a
loaded machine moves both alike. Printed: the median wall time, the median CPU seconds
of the process tree (user + sys, the interpreter and its reaped workers), and how many
interpreters the judgements ran in; then this checkout's / the baseline's ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
EVALS, K, CONCURRENCY, WAIT = 8, 8, 64, 0.05

MODULE = f"""
import asyncio, os, pathlib

ROOM = pathlib.Path(__file__).parent / "room"

async def generate(seed):
    await asyncio.sleep({WAIT})
    return "reply %d" % seed

async def judge(output, seed):
    ROOM.mkdir(exist_ok=True)
    (ROOM / str(os.getpid())).touch()
    await asyncio.sleep({WAIT})
    return 0.9
"""

PROBE = """
import json, sys, time
from pathlib import Path
from firewall.pipeline import context
from firewall.pipeline.stages import plan
from firewall.runner import Runner

folder = Path(sys.argv[1])
ctx = context.load(cwd=folder)
schedule = plan(ctx.specs, 20261129, None)
started = time.perf_counter()
Runner(concurrency=ctx.settings.concurrency, cwd=ctx.cwd).run_schedule(schedule)
print(json.dumps({"wall": time.perf_counter() - started}))
"""


def project(root: Path) -> Path:
    folder = root / "judged"
    folder.mkdir()
    (folder / "judged_evals.py").write_text(MODULE)
    lines = [f"k = {K}", "seed = 20261129", f"concurrency = {CONCURRENCY}", "adaptive = false"]
    for i in range(EVALS):
        lines += [
            "",
            "[[evals]]",
            f'id = "judged-{i}"',
            'python = "judged_evals:generate"',
            'judge = "judged_evals:judge"',
        ]
    (folder / "firewall.toml").write_text("\n".join(lines) + "\n")
    return folder


def measure(folder: Path, code: Path) -> dict[str, float]:
    shutil.rmtree(folder / "room", ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(code)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(folder)],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    outer = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "probe_s": json.loads(proc.stdout.strip().splitlines()[-1])["wall"],
        "wall_s": outer,
        "cpu_s": cpu,
        "judge_processes": float(len(list((folder / "room").iterdir()))),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="an older checkout")
    parser.add_argument("--repetitions", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="firewall-judge-pool-"))
    try:
        folder = project(root)
        sides = {"this": HERE, "baseline": args.baseline.resolve()}
        samples: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for _ in range(args.repetitions):
            for side, code in sides.items():
                samples[side].append(measure(folder, code))
        medians = {
            side: {key: statistics.median(s[key] for s in runs) for key in runs[0]}
            for side, runs in samples.items()
        }
        print(f"{EVALS} async evals x {K} trials, concurrency {CONCURRENCY}, a judge each")
        print("| side | probe s | process s | CPU s | judge interpreters |")
        print("|---|---:|---:|---:|---:|")
        for side, m in medians.items():
            print(
                f"| {side} | {m['probe_s']:.2f} | {m['wall_s']:.2f} | {m['cpu_s']:.2f} | "
                f"{m['judge_processes']:.0f} |"
            )
        this, base = medians["this"], medians["baseline"]
        print(
            f"this / baseline: probe {this['probe_s'] / base['probe_s']:.2f}, "
            f"CPU {this['cpu_s'] / base['cpu_s']:.2f}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
