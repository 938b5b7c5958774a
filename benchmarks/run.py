"""Reproducible performance benchmark of the firewall runner, against baselines in the same run.

Usage (from the repository root, with the project's venv):

    .venv/bin/python benchmarks/run.py            # 5 repetitions, about 3 minutes
    .venv/bin/python benchmarks/run.py --quick    # 1 repetition, a smoke check
    .venv/bin/python benchmarks/run.py --quick --only async   # the in-flight cases alone

Every measurement is a separate process started from here and timed from spawn
to exit (start-up included), with its peak RSS taken from ``wait4``; for the
in-flight cases a thread also samples the RSS summed over the whole process
tree from ``/proc`` (``TreeSampler``). The
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
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
BIN = Path(sys.executable).parent
# --code DIR puts DIR first on the measured processes' import path (a before/after pair
# of the same run: the old tree exported with `git archive`, the worktree itself).
CODE: str | None = None

# Scenario sizes (the brief's shapes).
TRIVIAL_EVALS, K = 1000, 7
COMMAND_EVALS = 1000
SLEEP_EVALS, SLEEP_S, SLEEP_CONCURRENCY = 200, 0.05, 16
# The in-flight cases: the same 200 x 7 trials of 50 ms, as `async def` evals at these
# concurrencies (and the sync sleepy project of scenario 3 as the 16-in-flight sync case).
ASYNC_CONCURRENCIES = (64, 16)
SAMPLE_INTERVAL_S = 0.02  # the process-tree RSS sampler's period

TARGETS = {
    "overhead_ms": 0.25,  # (firewall - bare loop) / trials
    "vs_pytest": 1.0,  # firewall wall / pytest-repeat wall
    "vs_bare_spawn": 1.2,  # firewall wall / bare /bin/sh -c spawner wall
    "vs_ideal_io": 1.10,  # firewall wall / (evals * k * sleep / concurrency), sync, 16
    "vs_bare_asyncio": 1.3,  # firewall wall / bare asyncio wall, async, 64 in flight
    "vs_ideal_16": 1.16,  # firewall wall / (evals * k * sleep / 16), async, 16 in flight
    "tree_rss_mb": 250.0,  # RSS summed over the firewall process tree, async, 64 in flight
    "peak_rss_mb": 150.0,  # orchestrator peak RSS, 7,000-trial run
    "artefact_mb": 5.0,  # firewall-report.json of the 7,000-trial run
    # (CPU of the 7,000-trial run - CPU of the same project's 4-trial run) / 6,996: half of
    # the 0.19 ms the issue (#22) measured, for config-declared and decorated evals alike.
    "marginal_cpu_ms": 0.095,
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


def make_marginal(root: Path, concurrency: int) -> dict[str, Path]:
    """Scenario 1's trivial evals again, decorated (``@firewall.eval`` under ``paths``),
    and a small project of each kind with the same settings, one eval of ``concurrency``
    trials: as many slots, so as many workers boot as in the big run. The difference of
    two runs' CPU is what the more trials cost, start-up and worker boots apart (a 3-trial
    run at concurrency 4 booted one worker fewer, whose boot the difference counted)."""
    projects: dict[str, Path] = {}
    settings = {"k": K, "seed": 20261129, "concurrency": concurrency, "timeout": 60}
    small = max(3, concurrency)
    for name, n, k in (("decorated", TRIVIAL_EVALS, K), ("decorated_tiny", 1, small)):
        project = projects[name] = root / name
        (project / "evals").mkdir(parents=True)
        (project / "evals" / "bench_evals.py").write_text(
            "import firewall\n\n\n"
            + "".join(
                f"@firewall.eval(k={k})\ndef fn_{i:04d}(seed):\n    return 1.0\n\n\n"
                for i in range(n)
            )
        )
        (project / "firewall.toml").write_text(_toml({**settings, "k": k, "paths": ["evals"]}, []))
    project = projects["config_tiny"] = root / "config_tiny"
    project.mkdir()
    (project / "bench_evals.py").write_text("def fn_0000(seed):\n    return 1.0\n")
    (project / "firewall.toml").write_text(
        _toml({**settings, "k": small}, [("trivial-0000", "python", "bench_evals:fn_0000")])
    )
    return projects


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
    """n Python evals that each sleep SLEEP_S seconds: pure waiting, no CPU (sync16)."""
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
            {
                "k": K,
                "seed": 20261129,
                "concurrency": SLEEP_CONCURRENCY,
                "timeout": 60,
                "adaptive": False,  # exactly k trials each, like the async cases
            },
            [(f"sleep-{i:03d}", "python", f"sleep_evals:{name}") for i, name in enumerate(names)],
        )
    )
    return project


def make_async(root: Path, n: int, concurrency: int) -> Path:
    """n `async def` evals that each await a SLEEP_S sleep, and a bare asyncio runner of them.

    ``bare_asyncio.py`` imports the same module and awaits the same n x K calls, at most
    ``concurrency`` at a time (an ``asyncio.Semaphore``), in one process.
    """
    project = root / f"async{concurrency}"
    project.mkdir()
    names = [f"fn_{i:03d}" for i in range(n)]
    (project / "async_evals.py").write_text(
        "import asyncio\n\n\n"
        + "".join(
            f"async def {name}(seed):\n    await asyncio.sleep({SLEEP_S})\n    return 1.0\n\n\n"
            for name in names
        )
    )
    (project / "firewall.toml").write_text(
        _toml(
            {
                "k": K,
                "seed": 20261129,
                "concurrency": concurrency,
                "timeout": 60,
                "adaptive": False,  # exactly k trials each
            },
            [(f"async-{i:03d}", "python", f"async_evals:{name}") for i, name in enumerate(names)],
        )
    )
    (project / "bare_asyncio.py").write_text(f"""\
import asyncio, json, sys, time
sys.path.insert(0, "")
import async_evals
fns = [getattr(async_evals, "fn_%03d" % i) for i in range({n})]

async def main():
    slots = asyncio.Semaphore({concurrency})

    async def one(fn, trial):
        async with slots:
            return await fn(seed=trial)

    return await asyncio.gather(*(one(fn, trial) for fn in fns for trial in range({K})))

start = time.perf_counter()
total = sum(asyncio.run(main()))
elapsed = time.perf_counter() - start
assert total == {n * K}
print(json.dumps({{"loop_s": elapsed}}))
""")
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
    if CODE is not None:
        # --code: measure that checkout's firewall package instead of the installed one.
        env["PYTHONPATH"] = CODE
    # Byte-code caches on (the warm-up run writes them), as in a CI job with an installed
    # package: otherwise every process recompiles every module it imports at each start.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


class Measured(dict[str, Any]):
    """wall_s, cpu_s, peak_rss_mb of one process (and anything a check adds)."""


# The process tree is walked here as firewall/runner/_supervisor.py walks it, on purpose
# not by importing that module: what measures the firewall stays apart from the code it
# measures (a bug there would otherwise hide the processes it misses from both).
PROC = Path("/proc")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# Each thread's list of its children (Linux >= 3.5 with CONFIG_PROC_CHILDREN); without
# it the tree is found from every process's parent pid in /proc/<pid>/stat.
HAS_CHILDREN = (PROC / str(os.getpid()) / "task" / str(os.getpid()) / "children").exists()


def _children_lists(root: int) -> list[int]:
    found, parents = [], [root]
    while parents:
        parent = parents.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                with open(f"/proc/{parent}/task/{thread}/children", "rb") as file:
                    below = [int(child) for child in file.read().split()]
            except (OSError, ValueError):
                continue
            found += below
            parents += below
    return found


def _parent_pids(root: int) -> list[int]:
    below: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
                ppid = int(file.read().rpartition(b")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        below.setdefault(ppid, []).append(int(entry))
    found, parents = [], [root]
    while parents:
        children = below.get(parents.pop(), [])
        found += children
        parents += children
    return found


def descendants(root: int) -> list[int]:
    """The processes below ``root`` now (a snapshot: some may be gone by the time they are read)."""
    return _children_lists(root) if HAS_CHILDREN else _parent_pids(root)


def resident_bytes(pid: int) -> int:
    """The resident set of one process from /proc/<pid>/statm; 0 if gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as file:
            return int(file.read().split()[1]) * PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return 0


class TreeSampler(threading.Thread):
    """Polls a process and all its descendants every ``interval`` seconds while it runs.

    Keeps the peak of the RSS summed over the tree, and the peak number of live
    processes in it (a zombie, resident 0, does not count). Summed RSS counts a page
    shared by several processes (the interpreter, libraries) once per process: it is
    an upper bound on what the tree holds, and what a runner's memory limit sees
    add up. The thread's own CPU time is kept too: it runs beside the measured process.
    """

    def __init__(self, root: int, interval: float = SAMPLE_INTERVAL_S) -> None:
        super().__init__(name=f"tree-sampler-{root}", daemon=True)
        self.root, self.interval = root, interval
        self.peak_bytes = self.peak_procs = self.samples = 0
        self.cpu_s = 0.0
        self._done = threading.Event()

    def sample(self) -> None:
        sizes = [resident_bytes(pid) for pid in (self.root, *descendants(self.root))]
        self.peak_bytes = max(self.peak_bytes, sum(sizes))
        self.peak_procs = max(self.peak_procs, sum(size > 0 for size in sizes))
        self.samples += 1

    def run(self) -> None:
        start = time.thread_time()
        while True:
            self.sample()
            if self._done.wait(self.interval):
                break
        self.cpu_s = time.thread_time() - start

    def stop(self) -> None:
        self._done.set()
        self.join()


def timed(argv: Sequence[str], cwd: Path, log: Path, sample_tree: bool = False) -> Measured:
    """Run argv to completion; wall clock from spawn to reaping, and the child's rusage.

    With ``sample_tree`` (and a /proc), a ``TreeSampler`` watches the process tree
    meanwhile: ``tree_rss_mb``, ``tree_procs``, ``tree_samples`` and ``sampler_cpu_s``.
    """
    sampler: TreeSampler | None = None
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
        if sample_tree and PROC.is_dir():
            sampler = TreeSampler(proc.pid)
            sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    if sampler is not None:
        sampler.stop()
    proc.returncode = os.waitstatus_to_exitcode(status)
    # Linux: ru_maxrss (KiB) of a reaped child is the larger of its own peak and its
    # reaped descendants' peaks: for firewall that is the orchestrator (workers are small).
    result = Measured(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,
        returncode=proc.returncode,
    )
    if sample_tree:
        result.update(
            tree_rss_mb=None if sampler is None else sampler.peak_bytes / 2**20,
            tree_procs=None if sampler is None else sampler.peak_procs,
            tree_samples=0 if sampler is None else sampler.samples,
            sampler_cpu_s=0.0 if sampler is None else sampler.cpu_s,
        )
    return result


def reset(project: Path) -> None:
    """Remove what a previous `firewall run` wrote, so every repetition does the same work."""
    for name in ("firewall-report.json", "quarantine.json"):
        (project / name).unlink(missing_ok=True)
    shutil.rmtree(project / ".firewall", ignore_errors=True)


def firewall_run(project: Path, expect_trials: int, sample_tree: bool = False) -> Measured:
    reset(project)
    result = timed([str(BIN / "firewall"), "run"], project, project / "firewall.log", sample_tree)
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
    result["trials"] = expect_trials
    return result


def checked(
    argv: Sequence[str], project: Path, log_name: str, sample_tree: bool = False
) -> Measured:
    result = timed(argv, project, project / log_name, sample_tree)
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


def bare_asyncio(project: Path) -> Measured:
    """The same coroutine calls as the project's `firewall run`, on one event loop."""
    result = checked(
        [sys.executable, "bare_asyncio.py"], project, "bare_asyncio.log", sample_tree=True
    )
    last = (project / "bare_asyncio.log").read_text().splitlines()[-1]
    result["loop_s"] = json.loads(last)["loop_s"]
    return result


# --------------------------------------------------------------------------- reporting


def median(samples: list[Measured], key: str) -> float:
    return float(statistics.median(sample[key] for sample in samples))


def ratio(numerators: list[Measured], denominators: list[Measured], key: str = "wall_s") -> float:
    """The median of the per-repetition ratios: each compares two runs made seconds apart."""
    pairs = zip(numerators, denominators, strict=True)
    return float(statistics.median(a[key] / b["wall_s"] for a, b in pairs))


def cpu_ratio(numerators: list[Measured], denominators: list[Measured]) -> float:
    """The median of the per-repetition ratios of CPU seconds."""
    pairs = zip(numerators, denominators, strict=True)
    return float(statistics.median(a["cpu_s"] / b["cpu_s"] for a, b in pairs))


def peak(samples: list[Measured], key: str) -> float | None:
    """The largest over the repetitions (a footprint's worst case); None if not measured."""
    values = [sample.get(key) for sample in samples]
    if not values or any(value is None for value in values):
        return None
    return float(max(value for value in values if value is not None))


def ideal(concurrency: int) -> float:
    """The wall of the 50 ms trials at perfect packing and zero start-up."""
    return SLEEP_EVALS * K * SLEEP_S / concurrency


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


def tree_rows(
    scenario: str, who: str, samples: list[Measured], target: tuple[str, float] | None = None
) -> list[dict[str, Any]]:
    """Peak RSS summed over a process tree, and the peak number of processes in it."""
    return [
        row(
            scenario,
            f"peak RSS summed over the {who} process tree",
            peak(samples, "tree_rss_mb"),
            "MB",
            target,
        ),
        row(
            scenario,
            f"peak number of processes in the {who} tree",
            peak(samples, "tree_procs"),
            "n",
        ),
    ]


def summarise(raw: dict[str, list[Measured]]) -> list[dict[str, Any]]:
    """The table's rows, for the scenarios whose variants ran (see GROUPS)."""

    def have(*names: str) -> bool:
        return all(raw.get(name) for name in names)

    trivial_trials, command_trials, sleep_trials = (
        TRIVIAL_EVALS * K,
        COMMAND_EVALS * K,
        SLEEP_EVALS * K,
    )
    sleep_ideal = ideal(SLEEP_CONCURRENCY)
    rows: list[dict[str, Any]] = []
    if have("firewall_trivial", "pytest_repeat", "bare_loop"):
        fw1, pyt, loop = raw["firewall_trivial"], raw["pytest_repeat"], raw["bare_loop"]
        loop_s, fw1_wall = median(loop, "loop_s"), median(fw1, "wall_s")
        rows += [
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
        ]
    if have("firewall_commands", "bare_spawn"):
        fw2, spawn = raw["firewall_commands"], raw["bare_spawn"]
        rows += [
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
        ]
    if have("firewall_sleepy"):
        fw3 = raw["firewall_sleepy"]
        fw3_wall = median(fw3, "wall_s")
        rows += [
            row(
                "3",
                f"I/O-bound, sync16: {sleep_trials:,} trials of `time.sleep({SLEEP_S:g})`, "
                f"{SLEEP_CONCURRENCY} in flight: `firewall run` wall",
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
        ]
        if have("bare_asyncio16"):
            rows.append(
                row(
                    "3",
                    f"firewall (sync) / bare asyncio at {SLEEP_CONCURRENCY} in flight (scenario 6)",
                    ratio(fw3, raw["bare_asyncio16"]),
                    "x",
                )
            )
        if "tree_rss_mb" in fw3[0]:
            rows += tree_rows("3", "`firewall run`", fw3)
    if have("firewall_trivial"):
        fw1 = raw["firewall_trivial"]
        rows += [
            row(
                "4",
                f"**peak RSS** of the largest process of the firewall tree (`ru_maxrss`), "
                f"{trivial_trials:,}-trial run",
                max(s["peak_rss_mb"] for s in fw1),
                "MB",
                ("<", TARGETS["peak_rss_mb"]),
            ),
            row(
                "4",
                f"**artefact size**, {trivial_trials:,}-trial run",
                max(s["artefact_mb"] for s in fw1),
                "MB",
                ("<", TARGETS["artefact_mb"]),
            ),
        ]
    for scenario, concurrency in zip(("5", "6"), ASYNC_CONCURRENCIES, strict=True):
        fw, bare = raw.get(f"firewall_async{concurrency}"), raw.get(f"bare_asyncio{concurrency}")
        if not fw or not bare:
            continue
        fw_wall, best = median(fw, "wall_s"), ideal(concurrency)
        vs_bare: tuple[str, float] | None = None
        vs_ideal: tuple[str, float] | None = None
        if concurrency == 64:
            vs_bare = ("<=", TARGETS["vs_bare_asyncio"])
        else:
            vs_ideal = ("<=", TARGETS["vs_ideal_16"])
        rows += [
            row(
                scenario,
                f"async{concurrency}: {sleep_trials:,} trials of `await asyncio.sleep"
                f"({SLEEP_S:g})`, {concurrency} in flight: `firewall run` wall",
                fw_wall,
                "s",
            ),
            row(
                scenario,
                f"same coroutine calls, bare `asyncio` script, `Semaphore({concurrency})` wall",
                median(bare, "wall_s"),
                "s",
            ),
            row(scenario, "ideal wall: evals x k x sleep / concurrency", best, "s"),
            row(
                scenario,
                f"{'**' if vs_bare else ''}firewall / bare asyncio{'**' if vs_bare else ''} wall",
                ratio(fw, bare),
                "x",
                vs_bare,
            ),
            row(
                scenario,
                "firewall / bare asyncio, CPU seconds (user+sys, workers included): the "
                "figure that holds on a loaded machine",
                cpu_ratio(fw, bare),
                "x",
            ),
            row(
                scenario,
                f"{'**' if vs_ideal else ''}firewall / ideal{'**' if vs_ideal else ''} "
                "(end to end)",
                fw_wall / best,
                "x",
                vs_ideal,
            ),
            *tree_rows(
                scenario,
                "`firewall run`",
                fw,
                ("<", TARGETS["tree_rss_mb"]) if concurrency == 64 else None,
            ),
            *tree_rows(scenario, "bare asyncio", bare),
        ]
    if have("firewall_tiny"):
        rows.append(
            row(
                "d",
                "fixed cost: `firewall run` of 1 trivial eval x 3 trials, wall",
                median(raw["firewall_tiny"], "wall_s"),
                "s",
            )
        )
    for kind, big, small in (
        ("config-declared", "firewall_trivial", "firewall_config_tiny"),
        ("decorated", "firewall_decorated", "firewall_decorated_tiny"),
    ):
        if have(big, small):
            pairs = list(zip(raw[big], raw[small], strict=True))
            few = pairs[0][1].get("trials", 3)  # as many as the slots: as many workers boot
            extra = trivial_trials - few
            rows.append(
                row(
                    "7",
                    f"marginal CPU per trial, {kind} trivial evals: (CPU of the "
                    f"{trivial_trials:,}-trial run - CPU of a {few}-trial run) / {extra:,}",
                    float(
                        statistics.median((a["cpu_s"] - b["cpu_s"]) / extra * 1e3 for a, b in pairs)
                    ),
                    "ms",
                    ("<=", TARGETS["marginal_cpu_ms"]),
                )
            )
    if have("firewall_trivial"):
        rows.append(
            row(
                "d",
                "CPU (user+sys) of `firewall run` and its workers per trial, scenario 1",
                median(raw["firewall_trivial"], "cpu_s") / trivial_trials * 1e3,
                "ms",
            )
        )

    def probed(name: str) -> bool:
        return have(name) and all(s.get("runner_s") is not None for s in raw[name])

    if probed("probe_trivial"):
        rows.append(
            row(
                "d",
                "probe phase alone (Runner.run), scenario 1: per-trial time",
                median(raw["probe_trivial"], "runner_s") / trivial_trials * 1e3,
                "ms",
            )
        )
    if probed("probe_commands") and have("bare_spawn"):
        rows.append(
            row(
                "d",
                "probe phase alone, scenario 2: Runner.run / bare spawn wall",
                ratio(raw["probe_commands"], raw["bare_spawn"], "runner_s"),
                "x",
            )
        )
    if probed("probe_async64") and have("bare_asyncio64"):
        rows.append(
            row(
                "d",
                "probe phase alone, scenario 5: Runner.run / bare asyncio wall (its whole run)",
                ratio(raw["probe_async64"], raw["bare_asyncio64"], "runner_s"),
                "x",
            )
        )
    if probed("probe_sleepy"):
        rows.append(
            row(
                "d",
                "probe phase alone, scenario 3: Runner.run / ideal",
                median(raw["probe_sleepy"], "runner_s") / sleep_ideal,
                "x",
            )
        )
    sampled = [s for samples in raw.values() for s in samples if s.get("tree_samples")]
    if sampled:
        rows.append(
            row(
                "d",
                f"tree sampler's own CPU (every {SAMPLE_INTERVAL_S * 1e3:g} ms), "
                "share of the sampled runs' wall",
                100 * sum(s["sampler_cpu_s"] for s in sampled) / sum(s["wall_s"] for s in sampled),
                "%",
            )
        )
    return rows


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "ms":
        return f"{value:.3f} ms"
    if unit == "MB":
        return f"{value:.1f} MB"
    if unit == "n":
        return f"{value:g}"
    if unit == "%":
        return f"{value:.1f} %"
    return f"{value:.3f} s"


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    out = [
        f"Benchmark of flakiness-firewall {meta['git']} on {meta['machine']} "
        f"({meta['cpus']} CPUs, Python {meta['python']}), {meta['started']}; "
        f"median of {meta['repetitions']} repetition(s); load average at start "
        f"{meta['loadavg_start']}, at end {meta['loadavg_end']}; "
        f"scenario groups: {', '.join(meta['groups'])}.",
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

# The variants each scenario group runs (`--only`); a variant in two groups runs once.
GROUPS: dict[str, tuple[str, ...]] = {
    "trivial": ("firewall_trivial", "pytest_repeat", "bare_loop", "probe_trivial"),  # 1, 4
    "commands": ("firewall_commands", "bare_spawn", "probe_commands"),  # 2
    "sleepy": ("firewall_sleepy", "probe_sleepy"),  # 3: sync, 16 in flight
    "tiny": ("firewall_tiny",),  # the fixed cost
    # 7: what a trial costs beyond the fixed cost, config-declared and decorated evals
    "marginal": (
        "firewall_trivial",
        "firewall_config_tiny",
        "firewall_decorated",
        "firewall_decorated_tiny",
    ),
    # 5, 6 and the memory of 3: async at 64 and 16 in flight, sync at 16, bare asyncio.
    "async": (
        "firewall_async64",
        "bare_asyncio64",
        "probe_async64",
        "firewall_async16",
        "bare_asyncio16",
        "firewall_sleepy",
    ),
}


def _groups(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in GROUPS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown group {', '.join(unknown) or '(none)'}: choose from {', '.join(GROUPS)}"
        )
    return names


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
    parser.add_argument(
        "--only",
        type=_groups,
        default=None,
        metavar="GROUP[,GROUP...]",
        help=f"run only these scenario groups, of: {', '.join(GROUPS)} (default: all)",
    )
    parser.add_argument(
        "--code",
        default=None,
        metavar="DIR",
        help="import firewall from this checkout (PYTHONPATH of the measured processes)",
    )
    args = parser.parse_args(argv)
    global CODE
    CODE = str(Path(args.code).resolve()) if args.code else None
    reps = args.repetitions or (1 if args.quick else 5)
    groups: list[str] = args.only or list(GROUPS)
    selected = {name for group in groups for name in GROUPS[group]}
    tools = ("firewall", "pytest") if "pytest_repeat" in selected else ("firewall",)
    for tool in tools:
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
        "groups": groups,
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
            "async_concurrencies": list(ASYNC_CONCURRENCIES),
            "sample_interval_s": SAMPLE_INTERVAL_S,
        },
        "tree_walk": "task/*/children" if HAS_CHILDREN else "stat ppid",
    }
    root = Path(tempfile.mkdtemp(prefix="firewall-bench-"))
    try:
        trivial = make_trivial(root, TRIVIAL_EVALS, args.concurrency)
        commands = make_commands(root, COMMAND_EVALS, args.concurrency)
        sleepy = make_sleepy(root, SLEEP_EVALS)
        tiny = make_tiny(root)
        async64, async16 = (make_async(root, SLEEP_EVALS, c) for c in ASYNC_CONCURRENCIES)
        marginal = make_marginal(root, args.concurrency)
        few = max(3, args.concurrency)  # the small marginal projects' trials (make_marginal)
        trivial_trials, command_trials = TRIVIAL_EVALS * K, COMMAND_EVALS * K
        sleep_trials = SLEEP_EVALS * K
        # The in-flight cases (sync16 too) also sample the memory of their process tree.
        every: dict[str, Callable[[], Measured]] = {
            "firewall_trivial": lambda: firewall_run(trivial, trivial_trials),
            "pytest_repeat": lambda: pytest_repeat(trivial),
            "bare_loop": lambda: bare_loop(trivial),
            "firewall_commands": lambda: firewall_run(commands, command_trials),
            "bare_spawn": lambda: bare_spawn(commands),
            "firewall_sleepy": lambda: firewall_run(sleepy, sleep_trials, sample_tree=True),
            "firewall_tiny": lambda: firewall_run(tiny, 3),
            "firewall_config_tiny": lambda: firewall_run(marginal["config_tiny"], few),
            "firewall_decorated": lambda: firewall_run(marginal["decorated"], trivial_trials),
            "firewall_decorated_tiny": lambda: firewall_run(marginal["decorated_tiny"], few),
            "probe_trivial": lambda: probe_only(trivial),
            "probe_commands": lambda: probe_only(commands),
            "probe_sleepy": lambda: probe_only(sleepy),
            "firewall_async64": lambda: firewall_run(async64, sleep_trials, sample_tree=True),
            "bare_asyncio64": lambda: bare_asyncio(async64),
            "probe_async64": lambda: probe_only(async64),
            "firewall_async16": lambda: firewall_run(async16, sleep_trials, sample_tree=True),
            "bare_asyncio16": lambda: bare_asyncio(async16),
        }
        variants = {name: run for name, run in every.items() if name in selected}
        print(f"warming up (byte-code caches, page cache) in {root} ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(root)], env=clean_env(), check=True
        )
        # firewall_tiny writes firewall's own byte-code caches, whatever else is selected.
        for name in ("firewall_tiny", "firewall_trivial", "pytest_repeat", "bare_loop"):
            if name == "firewall_tiny" or name in variants:
                every[name]()
        raw: dict[str, list[Measured]] = {name: [] for name in variants}
        for rep in range(reps):
            for name, run in variants.items():
                sample = run()
                raw[name].append(sample)
                tree = ""
                if sample.get("tree_rss_mb") is not None:
                    tree = (
                        f"  tree {sample['tree_rss_mb']:6.1f} MB in {sample['tree_procs']:3d} "
                        f"procs ({sample['tree_samples']} samples)"
                    )
                print(
                    f"[{rep + 1}/{reps}] {name:18s} {sample['wall_s']:7.3f} s  "
                    f"cpu {sample['cpu_s']:6.3f} s  rss {sample['peak_rss_mb']:6.1f} MB{tree}",
                    file=sys.stderr,
                )
        meta["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        rows = summarise(raw)
    finally:
        if args.keep:
            print(f"projects kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)

    table = markdown(rows, meta)
    RESULTS.mkdir(exist_ok=True)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    document = {"meta": meta, "targets": TARGETS, "rows": rows, "raw": raw}
    # A partial run (--only) does not replace the full suite's latest.{json,md}.
    suffix = "" if args.only is None else "-only-" + "-".join(groups)
    for name in (f"results-{stamp}{suffix}", f"latest{suffix}"):
        (RESULTS / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
        (RESULTS / f"{name}.md").write_text(table)
    print(table)
    print(f"written: {RESULTS / f'results-{stamp}{suffix}.json'} and .md", file=sys.stderr)
    return 0 if all(row.get("met", True) for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
