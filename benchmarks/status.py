"""How fast `firewall status` reads a long history (issue target: under 1 s at 100,000 rows).

Builds a throwaway project with a synthetic history of N rows (500 evals,
200 runs, the last 40 quarantined) and times the installed `firewall status`
end to end, next to `firewall --version` as the start-up baseline measured in
the same run. Median of --repeat runs.

    python benchmarks/status.py [--rows 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"


def build(root: Path, rows: int, evals: int = 500, quarantined: int = 40) -> None:
    (root / "firewall.toml").write_text("")
    start = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc) - dt.timedelta(days=60)
    runs = max(1, rows // evals)
    lines = []
    for run in range(runs):
        stamp = (start + dt.timedelta(hours=run * 60 * 24 / runs)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for n in range(evals):
            lines.append(
                json.dumps(
                    {
                        "eval_id": f"eval-{n:04d}",
                        "run_id": f"run-{run:05d}",
                        "mode": "run",
                        "status": "pass",
                        "k": 7,
                        "median": 0.8 + (run * n % 17) / 100,
                        "iqr": (run + n) % 9 / 100,
                        "pass_rate": 1.0,
                        "drift": {"category": 0.0},
                        "model_ids": ["m"],
                        "prompt_versions": ["v1"],
                        "git_sha": "abc",
                        "build_ts": stamp,
                    }
                )
            )
    history = root / ".firewall" / "history.jsonl"
    history.parent.mkdir()
    history.write_text("\n".join(lines[:rows]) + "\n")
    entries = {
        f"eval-{n:04d}": {
            "since": "2026-11-01T00:00:00Z",
            "source": "auto",
            "reason": "iqr",
            "median": 0.7,
            "iqr": 0.1,
            "k": 7,
            "git_sha": None,
            "issue": n,
            "stable_streak": 1,
            "last_probe": None,
            "review_by": "2026-12-01T00:00:00Z",
            "owner": None,
        }
        for n in range(evals - quarantined, evals)
    }
    (root / "quarantine.json").write_text(json.dumps({"schema_version": 1, "evals": entries}))


def timed(args: list[str], cwd: Path, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        subprocess.run([FIREWALL, *args], cwd=cwd, check=True, capture_output=True)
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        build(root, args.rows)
        startup = timed(["--version"], root, args.repeat)
        status = timed(["status"], root, args.repeat)
        as_json = timed(["status", "--json"], root, args.repeat)
    print(f"history rows:            {args.rows:,}")
    print(f"firewall --version:      {startup:.3f} s (start-up baseline)")
    print(f"firewall status:         {status:.3f} s  ({status / startup:.1f}x start-up)")
    print(f"firewall status --json:  {as_json:.3f} s")
    print(f"target under 1 s:        {'met' if status < 1 else 'MISSED'}")


if __name__ == "__main__":
    main()
