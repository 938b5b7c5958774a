"""How many pool workers serve async trials best: the runner alone, at 1, 2 and 4 workers.

Usage (from the repository root, with the project's venv):

    .venv/bin/python benchmarks/pool_size.py            # 5 repetitions per size

Two generated projects, each run in process through the runner (the probe phase of
`firewall run`, without its start-up): 200 `async def` evals x 7 trials awaiting
50 ms at `concurrency = 64` (waiting), and 1,000 x 7 trivial ones (the runner's own
cost per trial). The runner sizes its pool at one worker per CPU; this is the
measurement behind that choice. It prints the median time of each size.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from firewall.pipeline import context
from firewall.pipeline.stages import plan
from firewall.runner import Runner

SIZES = (1, 2, 4)


def project(root: Path, name: str, evals: int, body: str) -> Path:
    folder = root / name
    folder.mkdir()
    names = [f"fn_{i:04d}" for i in range(evals)]
    (folder / f"{name}_evals.py").write_text(
        "import asyncio\n\n" + "".join(f"async def {n}(seed):\n{body}\n\n" for n in names)
    )
    lines = ["k = 7", "seed = 20261129", "concurrency = 64", "timeout = 60", "adaptive = false"]
    for i, n in enumerate(names):
        lines += ["", "[[evals]]", f'id = "{name}-{i:04d}"', f'python = "{name}_evals:{n}"']
    (folder / "firewall.toml").write_text("\n".join(lines) + "\n")
    return folder


def runner_seconds(folder: Path, workers: int) -> float:
    ctx = context.load(cwd=folder)
    schedule = plan(ctx.specs, 20261129, None)
    started = time.perf_counter()
    runner = Runner(concurrency=ctx.settings.concurrency, cwd=ctx.cwd, pool_workers=workers)
    runner.run_schedule(schedule)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="firewall-pool-size-"))
    try:
        cases = {
            "async64 (200 x 7 awaiting 50 ms)": project(
                root, "waiting", 200, "    await asyncio.sleep(0.05)\n    return 1.0"
            ),
            "trivial (1,000 x 7)": project(root, "trivial", 1000, "    return 1.0"),
        }
        for label, folder in cases.items():
            for workers in SIZES:
                times = [runner_seconds(folder, workers) for _ in range(args.repetitions)]
                print(f"{label}: {workers} worker(s): {statistics.median(times):.3f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
