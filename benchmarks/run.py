"""Reproducible performance benchmark of the firewall runner, against baselines in the same run.

Usage (from the repository root, with the project's venv):

    .venv/bin/python benchmarks/run.py            # 5 repetitions, about 3 minutes
    .venv/bin/python benchmarks/run.py --quick    # 1 repetition, a smoke check

Every measurement is a separate process started from here and timed from spawn
to exit (start-up included), with its peak RSS taken from ``wait4``. The
variants of one repetition run back to back, interleaved, so a noisy neighbour
hits them alike; each number in the table is the median over the repetitions.
Results go to ``benchmarks/results/`` (gitignored) as JSON and Markdown, and
the Markdown table is printed. See ``benchmarks/README.md`` for what each row
means.

Only the standard library is used here; ``firewall`` and ``pytest`` are run as
the installed commands next to the interpreter that runs this script.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
BIN = Path(sys.executable).parent

# Scenario sizes (the brief's shapes).
TRIVIAL_EVALS, K = 1000, 7
COMMAND_EVALS = 1000
SLEEP_EVALS, SLEEP_S, SLEEP_CONCURRENCY = 200, 0.05, 16

TARGETS = {
    "overhead_ms": 0.25,  # (firewall - bare loop) / trials
    "vs_pytest": 1.0,  # firewall wall / pytest-repeat wall
    "vs_bare_spawn": 1.2,  # firewall wall / bare /bin/sh -c spawner wall
    "vs_ideal_io": 1.10,  # firewall wall / (evals * k * sleep / concurrency)
    "peak_rss_mb": 150.0,  # orchestrator peak RSS, 7,000-trial run
    "artefact_mb": 5.0,  # firewall-report.json of the 7,000-trial run
}


# --------------------------------------------------------------------------- projects


def _toml(settings: dict[str, Any], evals: list[tuple[str, str, str]]) -> str:
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    for eval_id, kind, target in evals:
        lines += ["", "[[evals]]", f"id = {json.dumps(eval_id)}", f"{kind} = {json.dumps(target)}"]
    return "\n".join(lines) + "\n"


def make_trivial(root: Path, n: int, concurrency: int) -> Path:
    """n Python evals returning a constant, the same functions as pytest tests, a bare loop."""
    project = root / "trivial"
    project.mkdir()
    names = [f"fn_{i:04d}" for i in range(n)]
    (project / "bench_evals.py").write_text(
        "".join(f"def {name}(seed):\n    return 1.0\n\n\n" for name in names)
    )
    (project / "firewall.toml").write_text(
        _toml(
            {"k": K, "seed": 20261129, "concurrency": concurrency, "timeout": 60},
            [(f"trivial-{i:04d}", "python", f"bench_evals:{name}") for i, name in enumerate(names)],
        )
    )
    (project / "test_bench.py").write_text(
        "from bench_evals import *  # noqa: F403\n\n\n"
        + "".join(
            f"def test_{i:04d}():\n    assert {name}(seed=0) == 1.0\n\n\n"
            for i, name in enumerate(names)
        )
    )
    (project / "pytest.ini").write_text("[pytest]\n")  # stop rootdir discovery here
    (project / "bare_loop.py").write_text(f"""\
import json, sys, time
sys.path.insert(0, "")
import bench_evals
fns = [getattr(bench_evals, "fn_%04d" % i) for i in range({n})]
start = time.perf_counter()
total = 0.0
for fn in fns:
    for trial in range({K}):
        total += fn(seed=trial)
elapsed = time.perf_counter() - start
assert total == {n * K}
print(json.dumps({{"loop_s": elapsed}}))
""")
    return project


COMMAND = "echo '{\"score\": 1}'"


def make_commands(root: Path, n: int, concurrency: int) -> Path:
    """n command evals printing a constant result, and a bare threaded spawner of the same."""
    project = root / "commands"
    project.mkdir()
    (project / "firewall.toml").write_text(
        _toml(
            {"k": K, "seed": 20261129, "concurrency": concurrency, "timeout": 60},
            [(f"cmd-{i:04d}", "command", COMMAND) for i in range(n)],
        )
    )
    (project / "bare_spawn.py").write_text(f"""\
import json, subprocess
from concurrent.futures import ThreadPoolExecutor

def one(_):
    proc = subprocess.run(["/bin/sh", "-c", {COMMAND!r}], stdin=subprocess.DEVNULL,
                          capture_output=True, check=False)
    return json.loads(proc.stdout.splitlines()[-1])["score"]

with ThreadPoolExecutor(max_workers={concurrency}) as pool:
    assert sum(pool.map(one, range({n * K}))) == {n * K}
""")
    return project


def make_sleepy(root: Path, n: int) -> Path:
    """n Python evals that each sleep SLEEP_S seconds: pure waiting, no CPU."""
    project = root / "sleepy"
    project.mkdir()
    names = [f"fn_{i:03d}" for i in range(n)]
    (project / "sleep_evals.py").write_text(
        "import time\n\n\n"
        + "".join(
            f"def {name}(seed):\n    time.sleep({SLEEP_S})\n    return 1.0\n\n\n" for name in names
        )
    )
    (project / "firewall.toml").write_text(
        _toml(
            {"k": K, "seed": 20261129, "concurrency": SLEEP_CONCURRENCY, "timeout": 60},
            [(f"sleep-{i:03d}", "python", f"sleep_evals:{name}") for i, name in enumerate(names)],
        )
    )
    return project


PROBE_ONLY = """\
# The probe phase alone, in process: load the project, plan, run the schedule (the runner's own
# share of a `firewall run`, without the CLI's start-up and the judging and writing after).
import json, sys, time
start = time.perf_counter()
from firewall.pipeline import context
from firewall.pipeline.stages import plan
from firewall.runner import Runner
ctx = context.load()
schedule = plan(ctx.specs, 20261129, None)
ready = time.perf_counter()
Runner(concurrency=ctx.settings.concurrency, cwd=ctx.cwd).run_schedule(schedule)
done = time.perf_counter()
records = [record for trials in schedule.results().values() for record in trials]
assert len(records) == schedule.planned and all(r.error is None for r in records)
print(json.dumps({"runner_s": done - ready, "setup_s": ready - start, "trials": len(records)}))
"""


def make_tiny(root: Path) -> Path:
    """One trivial Python eval, k=3: the fixed cost of a `firewall run` (start-up, one worker)."""
    project = root / "tiny"
    project.mkdir()
    (project / "tiny_evals.py").write_text("def fn(seed):\n    return 1.0\n")
    (project / "firewall.toml").write_text(
        _toml(
            {"k": 3, "seed": 20261129, "concurrency": 1, "timeout": 60},
            [("tiny", "python", "tiny_evals:fn")],
        )
    )
    return project


# --------------------------------------------------------------------------- measuring


def clean_env() -> dict[str, str]:
    """The caller's environment without what would make firewall or pytest act differently."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GITHUB_", "PYTEST_", "FIREWALL_"))
    }
    env.pop("CI", None)
    env.pop("PYTHONPATH", None)
    # Byte-code caches on (the warm-up run writes them), as in a CI job with an installed
    # package: otherwise every process recompiles every module it imports at each start.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


class Measured(dict):  # type: ignore[type-arg]
    """wall_s, cpu_s, peak_rss_mb of one process (and anything a check adds)."""


def timed(argv: Sequence[str], cwd: Path, log: Path) -> Measured:
    """Run argv to completion; wall clock from spawn to reaping, and the child's rusage."""
    with log.open("wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    # Linux: ru_maxrss (KiB) of a reaped child is the larger of its own peak and its
    # reaped descendants' peaks: for firewall that is the orchestrator (workers are small).
    return Measured(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,
        returncode=proc.returncode,
    )


def reset(project: Path) -> None:
    """Remove what a previous `firewall run` wrote, so every repetition does the same work."""
    for name in ("firewall-report.json", "quarantine.json"):
        (project / name).unlink(missing_ok=True)
    shutil.rmtree(project / ".firewall", ignore_errors=True)


def firewall_run(project: Path, expect_trials: int) -> Measured:
    reset(project)
    result = timed([str(BIN / "firewall"), "run"], project, project / "firewall.log")
    report = project / "firewall-report.json"
    if result["returncode"] != 0 or not report.exists():
        sys.exit(
            f"firewall run failed in {project} (exit {result['returncode']}):\n"
            f"{(project / 'firewall.log').read_text()[-2000:]}"
        )
    artefact = json.loads(report.read_text())
    trials = [t for e in artefact["evals"] for t in e["trials"]]
    bad = [t for t in trials if t["error"] is not None or t["score"] != 1.0]
    if len(trials) != expect_trials or bad:
        sys.exit(
            f"{project}: expected {expect_trials} passing trials, got {len(trials)} "
            f"({len(bad)} bad, e.g. {bad[:1]})"
        )
    result["artefact_mb"] = report.stat().st_size / 1e6
    return result


def checked(argv: Sequence[str], project: Path, log_name: str) -> Measured:
    result = timed(argv, project, project / log_name)
    if result["returncode"] != 0:
        sys.exit(
            f"{' '.join(argv)} failed in {project} (exit {result['returncode']}):\n"
            f"{(project / log_name).read_text()[-2000:]}"
        )
    return result


def pytest_repeat(project: Path) -> Measured:
    return checked(
        [str(BIN / "pytest"), "-q", "-p", "no:cacheprovider", f"--count={K}", "test_bench.py"],
        project,
        "pytest.log",
    )


def bare_loop(project: Path) -> Measured:
    result = checked([sys.executable, "bare_loop.py"], project, "bare_loop.log")
    last = (project / "bare_loop.log").read_text().splitlines()[-1]
    result["loop_s"] = json.loads(last)["loop_s"]
    return result


def probe_only(project: Path) -> Measured:
    """The probe phase alone (diagnostic); None where the internal API is not as expected."""
    script = project / "probe_only.py"
    script.write_text(PROBE_ONLY)
    result = timed([sys.executable, str(script)], project, project / "probe_only.log")
    try:
        result.update(json.loads((project / "probe_only.log").read_text().splitlines()[-1]))
    except (ValueError, IndexError):
        result["runner_s"] = None
    return result


def bare_spawn(project: Path) -> Measured:
    return checked([sys.executable, "bare_spawn.py"], project, "bare_spawn.log")


# --------------------------------------------------------------------------- reporting


def median(samples: list[Measured], key: str) -> float:
    return statistics.median(sample[key] for sample in samples)


def ratio(numerators: list[Measured], denominators: list[Measured], key: str = "wall_s") -> float:
    """The median of the per-repetition ratios: each compares two runs made seconds apart."""
    pairs = zip(numerators, denominators, strict=True)
    return statistics.median(a[key] / b["wall_s"] for a, b in pairs)


def row(
    scenario: str,
    what: str,
    value: float | None,
    unit: str,
    target: tuple[str, float] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"id": scenario, "what": what, "value": value, "unit": unit}
    if target is not None and value is not None:
        op, bound = target
        out["target"] = f"{op} {bound:g}"
        out["met"] = value <= bound if op == "<=" else value < bound
    return out


def summarise(
    raw: dict[str, list[Measured]], trivial_trials: int, command_trials: int, sleep_ideal: float
) -> list[dict[str, Any]]:
    fw1, pyt, loop = raw["firewall_trivial"], raw["pytest_repeat"], raw["bare_loop"]
    fw2, spawn = raw["firewall_commands"], raw["bare_spawn"]
    fw3, tiny = raw["firewall_sleepy"], raw["firewall_tiny"]
    probe1, probe2, probe3 = raw["probe_trivial"], raw["probe_commands"], raw["probe_sleepy"]
    probed = all(s.get("runner_s") is not None for s in probe1 + probe2 + probe3)
    loop_s = median(loop, "loop_s")
    fw1_wall, fw3_wall = median(fw1, "wall_s"), median(fw3, "wall_s")
    rss = max(s["peak_rss_mb"] for s in fw1)
    artefact = max(s["artefact_mb"] for s in fw1)
    rows = [
        row(
            "1",
            f"trivial Python evals, {trivial_trials:,} trials: `firewall run` wall",
            fw1_wall,
            "s",
        ),
        row(
            "1",
            f"same calls as {trivial_trials // K:,} tests, `pytest --count={K}` wall",
            median(pyt, "wall_s"),
            "s",
        ),
        row("1", "same calls, bare in-process loop (the loop alone)", loop_s, "s"),
        row(
            "1",
            "**firewall per-trial overhead**: (firewall wall - bare loop) / trials",
            (fw1_wall - loop_s) / trivial_trials * 1e3,
            "ms",
            ("<=", TARGETS["overhead_ms"]),
        ),
        row(
            "1",
            "pytest-repeat per-trial overhead, same formula (context)",
            (median(pyt, "wall_s") - loop_s) / trivial_trials * 1e3,
            "ms",
        ),
        row(
            "1",
            "**firewall / pytest-repeat** wall",
            ratio(fw1, pyt),
            "x",
            ("<=", TARGETS["vs_pytest"]),
        ),
        row(
            "2",
            f"trivial command evals, {command_trials:,} trials: `firewall run` wall",
            median(fw2, "wall_s"),
            "s",
        ),
        row(
            "2",
            "bare threaded `/bin/sh -c` spawner, same commands, same concurrency",
            median(spawn, "wall_s"),
            "s",
        ),
        row(
            "2",
            "**firewall / bare spawn** wall",
            ratio(fw2, spawn),
            "x",
            ("<=", TARGETS["vs_bare_spawn"]),
        ),
        row(
            "3",
            f"I/O-bound: {SLEEP_EVALS * K:,} trials of {SLEEP_S * 1e3:g} ms at concurrency "
            f"{SLEEP_CONCURRENCY}: `firewall run` wall",
            fw3_wall,
            "s",
        ),
        row("3", "ideal wall: evals x k x sleep / concurrency", sleep_ideal, "s"),
        row(
            "3",
            "**firewall / ideal** (end to end)",
            fw3_wall / sleep_ideal,
            "x",
            ("<=", TARGETS["vs_ideal_io"]),
        ),
        row(
            "4",
            f"**peak RSS** of the firewall process tree, {trivial_trials:,}-trial run",
            rss,
            "MB",
            ("<", TARGETS["peak_rss_mb"]),
        ),
        row(
            "4",
            f"**artefact size**, {trivial_trials:,}-trial run",
            artefact,
            "MB",
            ("<", TARGETS["artefact_mb"]),
        ),
        row(
            "d",
            "fixed cost: `firewall run` of 1 trivial eval x 3 trials, wall",
            median(tiny, "wall_s"),
            "s",
        ),
        row(
            "d",
            "CPU (user+sys) of `firewall run` and its workers per trial, scenario 1",
            median(fw1, "cpu_s") / trivial_trials * 1e3,
            "ms",
        ),
    ]
    if probed:
        rows += [
            row(
                "d",
                "probe phase alone (Runner.run), scenario 1: per-trial time",
                median(probe1, "runner_s") / trivial_trials * 1e3,
                "ms",
            ),
            row(
                "d",
                "probe phase alone, scenario 2: Runner.run / bare spawn wall",
                ratio(probe2, spawn, "runner_s"),
                "x",
            ),
            row(
                "d",
                "probe phase alone, scenario 3: Runner.run / ideal",
                median(probe3, "runner_s") / sleep_ideal,
                "x",
            ),
        ]
    return rows


def _fmt(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "ms":
        return f"{value:.3f} ms"
    if unit == "MB":
        return f"{value:.1f} MB"
    return f"{value:.3f} s"


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    out = [
        f"Benchmark of flakiness-firewall {meta['git']} on {meta['machine']} "
        f"({meta['cpus']} CPUs, Python {meta['python']}), {meta['started']}; "
        f"median of {meta['repetitions']} repetition(s); load average at start "
        f"{meta['loadavg_start']}, at end {meta['loadavg_end']}.",
        "",
        "| # | measurement | value | target | met |",
        "|---|---|---:|---|---|",
    ]
    for row in rows:
        met = "" if "met" not in row else ("yes" if row["met"] else "**NO**")
        out.append(
            f"| {row['id']} | {row['what']} | {_fmt(row['value'], row['unit'])} | "
            f"{row.get('target', '')} | {met} |"
        )
    out += ["", f"Command: `{meta['command']}`", ""]
    return "\n".join(out)


def _git_describe() -> str:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            text=True,
            capture_output=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "firewall"],
            cwd=REPO,
            text=True,
            capture_output=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repetition (a smoke check)")
    parser.add_argument(
        "--repetitions", type=int, default=None, help="default 5, or 1 with --quick"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=4,
        help="concurrency of scenarios 1 and 2 (default 4, the config default)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated projects")
    args = parser.parse_args(argv)
    reps = args.repetitions or (1 if args.quick else 5)
    for tool in ("firewall", "pytest"):
        if not (BIN / tool).exists():
            sys.exit(f"{BIN / tool} not found: run this with the project's venv interpreter")

    started = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    meta = {
        "started": started.isoformat().replace("+00:00", "Z"),
        "git": _git_describe(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "repetitions": reps,
        "concurrency": args.concurrency,
        "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "command": " ".join(
            ["python", "benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "sizes": {
            "trivial_evals": TRIVIAL_EVALS,
            "command_evals": COMMAND_EVALS,
            "sleep_evals": SLEEP_EVALS,
            "k": K,
            "sleep_s": SLEEP_S,
            "sleep_concurrency": SLEEP_CONCURRENCY,
        },
    }
    root = Path(tempfile.mkdtemp(prefix="firewall-bench-"))
    try:
        trivial = make_trivial(root, TRIVIAL_EVALS, args.concurrency)
        commands = make_commands(root, COMMAND_EVALS, args.concurrency)
        sleepy = make_sleepy(root, SLEEP_EVALS)
        tiny = make_tiny(root)
        trivial_trials, command_trials = TRIVIAL_EVALS * K, COMMAND_EVALS * K
        sleep_ideal = SLEEP_EVALS * K * SLEEP_S / SLEEP_CONCURRENCY
        variants: dict[str, Callable[[], Measured]] = {
            "firewall_trivial": lambda: firewall_run(trivial, trivial_trials),
            "pytest_repeat": lambda: pytest_repeat(trivial),
            "bare_loop": lambda: bare_loop(trivial),
            "firewall_commands": lambda: firewall_run(commands, command_trials),
            "bare_spawn": lambda: bare_spawn(commands),
            "firewall_sleepy": lambda: firewall_run(sleepy, SLEEP_EVALS * K),
            "firewall_tiny": lambda: firewall_run(tiny, 3),
            "probe_trivial": lambda: probe_only(trivial),
            "probe_commands": lambda: probe_only(commands),
            "probe_sleepy": lambda: probe_only(sleepy),
        }
        print(f"warming up (byte-code caches, page cache) in {root} ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(root)], env=clean_env(), check=True
        )
        for name in ("firewall_tiny", "firewall_trivial", "pytest_repeat", "bare_loop"):
            variants[name]()
        raw: dict[str, list[Measured]] = {name: [] for name in variants}
        for rep in range(reps):
            for name, run in variants.items():
                sample = run()
                raw[name].append(sample)
                print(
                    f"[{rep + 1}/{reps}] {name:18s} {sample['wall_s']:7.3f} s  "
                    f"cpu {sample['cpu_s']:6.3f} s  rss {sample['peak_rss_mb']:6.1f} MB",
                    file=sys.stderr,
                )
        meta["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        rows = summarise(raw, trivial_trials, command_trials, sleep_ideal)
    finally:
        if args.keep:
            print(f"projects kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)

    table = markdown(rows, meta)
    RESULTS.mkdir(exist_ok=True)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    document = {"meta": meta, "targets": TARGETS, "rows": rows, "raw": raw}
    for name in (f"results-{stamp}", "latest"):
        (RESULTS / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
        (RESULTS / f"{name}.md").write_text(table)
    print(table)
    print(f"written: {RESULTS / f'results-{stamp}.json'} and .md", file=sys.stderr)
    return 0 if all(row.get("met", True) for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
