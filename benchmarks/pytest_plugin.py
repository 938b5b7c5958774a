"""What `pytest --firewall-k 7` costs against pytest-repeat's `--count 7`, measured in one run.

Usage (from the repository root, with the project's venv):

    .venv/bin/python benchmarks/pytest_plugin.py                 # 5 repetitions, about a minute
    .venv/bin/python benchmarks/pytest_plugin.py --repetitions 1 # a smoke check, not a result

A generated suite of 500 trivial tests is run, back to back in each repetition:

- ``firewall``: `pytest --firewall-k 7 --firewall-out part.json`, 3,500 trials in one
  process, seeds, `random` seeded per trial, and the probe part written at the end;
- ``repeat``: `pytest --count 7` (pytest-repeat), the same 3,500 runs, the baseline;
- ``off``: `pytest --count 7 -p no:firewall`, the baseline without the plugin installed,
  so that ``repeat / off`` is what the plugin costs a session that does not ask for it;
- ``one``: `pytest test_bench.py::test_0000`, one start-up, sampled so that 3,500 of
  them (a probe that starts pytest once per trial) can be estimated.

Every variant is a separate process timed from spawn to exit (start-up included),
with the environment that ``run.py`` gives its processes. A ratio is the median of
the per-repetition ratios; each compares two runs made seconds apart. The exit
status is 0 when the plugin is within ``TARGET`` of pytest-repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import run as bench
from run import BIN, Measured, clean_env, timed

TESTS, K = 500, 7
TARGET = 1.25  # firewall wall / pytest-repeat wall: "about what pytest-repeat costs"
STARTUP_SAMPLES = 5  # start-ups timed per repetition, to estimate 3,500 of them


def make_suite(root: Path) -> Path:
    project = root / "suite"
    project.mkdir()
    (project / "test_bench.py").write_text(
        "".join(f"def test_{i:04d}():\n    assert {i} + 1 == {i + 1}\n\n\n" for i in range(TESTS))
    )
    (project / "pytest.ini").write_text("[pytest]\n")  # stop rootdir discovery here
    return project


def pytest_run(project: Path, name: str, *args: str) -> Measured:
    argv = [str(BIN / "pytest"), "-q", "-p", "no:cacheprovider", *args]
    result = timed(argv, project, project / f"{name}.log")
    if result["returncode"] != 0:
        sys.exit(
            f"{' '.join(argv)} failed (exit {result['returncode']}):\n"
            f"{(project / f'{name}.log').read_text()[-2000:]}"
        )
    return result


def firewall(project: Path) -> Measured:
    part = project / "part.json"
    part.unlink(missing_ok=True)
    result = pytest_run(project, "firewall", f"--firewall-k={K}", f"--firewall-out={part}")
    trials = [t for ts in json.loads(part.read_text())["trials"].values() for t in ts]
    if len(trials) != TESTS * K or any(t["score"] != 1.0 for t in trials):
        sys.exit(f"{part}: expected {TESTS * K} passing trials, got {len(trials)}")
    return result


def probe_and_gate(project: Path) -> Measured:
    """The decision's whole cost: the probe above, then `firewall gate` of its part, on a
    project with no history yet (each repetition's gate decides on the same state, not on
    the rows every earlier gate of the benchmark appended)."""
    probed = firewall(project)
    bench.reset(project)
    argv = [str(BIN / "firewall"), "gate", "part.json", "--no-issues"]
    gated = timed(argv, project, project / "gate.log")
    if gated["returncode"] != 0:
        sys.exit(f"firewall gate failed:\n{(project / 'gate.log').read_text()[-2000:]}")
    return Measured(
        wall_s=probed["wall_s"] + gated["wall_s"],
        cpu_s=probed["cpu_s"] + gated["cpu_s"],
        gate_cpu_s=gated["cpu_s"],
    )


def repeat(project: Path, *extra: str) -> Measured:
    result = pytest_run(project, "repeat", f"--count={K}", *extra)
    if f"{TESTS * K} passed" not in (project / "repeat.log").read_text():
        sys.exit(f"pytest --count={K} did not run {TESTS * K} tests")
    return result


def one_startup(project: Path) -> Measured:
    samples = [
        pytest_run(project, "one", "test_bench.py::test_0000") for _ in range(STARTUP_SAMPLES)
    ]
    return Measured(wall_s=statistics.median(s["wall_s"] for s in samples))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--code", default=None, metavar="DIR", help="import firewall from DIR")
    args = parser.parse_args()
    bench.CODE = str(Path(args.code).resolve()) if args.code else None
    root = Path(tempfile.mkdtemp(prefix="firewall-pytest-bench-"))
    raw: dict[str, list[Measured]] = {
        "firewall": [],
        "gate": [],
        "repeat": [],
        "off": [],
        "one": [],
    }
    try:
        project = make_suite(root)
        # Byte-code caches first, as in a CI job with an installed package; one warm run each.
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(project)], env=clean_env(), check=True
        )
        firewall(project)
        repeat(project)
        variants: dict[str, Callable[[], Measured]] = {
            "firewall": lambda: firewall(project),
            "gate": lambda: probe_and_gate(project),
            "repeat": lambda: repeat(project),
            "off": lambda: repeat(project, "-p", "no:firewall"),
            "one": lambda: one_startup(project),
        }
        for rep in range(args.repetitions):
            for name, run in variants.items():
                sample = run()
                raw[name].append(sample)
                spent = f"  cpu {sample['cpu_s']:6.3f} s" if "cpu_s" in sample else ""
                print(
                    f"[{rep + 1}/{args.repetitions}] {name:8s} {sample['wall_s']:7.3f} s{spent}",
                    file=sys.stderr,
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def ratio(a: str, b: str, key: str = "wall_s") -> float:
        pairs = zip(raw[a], raw[b], strict=True)
        return float(statistics.median(x[key] / y[key] for x, y in pairs))

    def wall(name: str) -> float:
        return float(statistics.median(sample["wall_s"] for sample in raw[name]))

    def cpu(name: str, key: str = "cpu_s") -> float:
        return float(statistics.median(sample[key] for sample in raw[name]))

    trials = TESTS * K
    vs_repeat = ratio("firewall", "repeat")
    startups = wall("one") * trials
    lines = [
        f"{TESTS} trivial tests x k={K} ({trials} runs), {args.repetitions} repetitions, medians; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        "",
        "| what | wall |",
        "|---|---|",
        f"| `pytest --firewall-k {K}` (one process, part written) | {wall('firewall'):.2f} s |",
        f"| `pytest --count {K}` (pytest-repeat) | {wall('repeat'):.2f} s |",
        f"| `pytest --count {K} -p no:firewall` (plugin not loaded) | {wall('off'):.2f} s |",
        f"| {trials} start-ups of `pytest test_bench.py::test_0000`, estimated from "
        f"{STARTUP_SAMPLES} per repetition | {startups:.0f} s ({wall('one'):.3f} s each) |",
        "",
        f"firewall / pytest-repeat: **{vs_repeat:.2f}x** (target <= {TARGET:g}); "
        f"in CPU time {ratio('firewall', 'repeat', 'cpu_s'):.2f}x",
        f"probe and `firewall gate` together / pytest-repeat: **{ratio('gate', 'repeat'):.2f}x**"
        f" wall, {ratio('gate', 'repeat', 'cpu_s'):.2f}x CPU",
        f"CPU seconds, medians: probe {cpu('firewall'):.2f}, `firewall gate` alone "
        f"{cpu('gate', 'gate_cpu_s'):.2f}, pytest-repeat {cpu('repeat'):.2f}",
        f"plugin installed but off (repeat / no plugin): {ratio('repeat', 'off'):.2f}x",
        f"firewall / {trials} start-ups: {wall('firewall') / startups:.4f}x",
    ]
    print("\n".join(lines))
    return 0 if vs_repeat <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
