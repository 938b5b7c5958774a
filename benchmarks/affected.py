"""What an affected-only pull request costs against probing every eval, in the same run.

A project of 40 Python evals laid out as real ones are: 10 families of 4 evals, one
module per family, a shared helper package every eval imports, one prompt file per
family (`prompts/FAMILY/system.txt`) and one data file per family
(`data/FAMILY.jsonl`). Each trial scores a seeded stand-in model after a short
sleep, as a paid call would take. The default branch is probed in full; a pull
request then changes one family's prompt, and is run twice on the same checkout:
affected-only (the default on a pull request) and with `--all`.

Reported: the trials each spent, the affected-only run's share (target: at most
10%), whether every probed eval's decision equals the full run's (same base
seed, so the same trial seeds), and the fingerprinting's own time (deciding what
to carry, and fingerprinting the probed evals) as a share of the full run's wall
time (target: under 5%).

    python benchmarks/affected.py
    python benchmarks/affected.py --families 8 --per-family 5 --sleep 0.1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from firewall.configfile import load_config
from firewall.discovery import discover
from firewall.fingerprint import files_in
from firewall.pipeline.affected import choose, hashed, latest_probes
from firewall.store.history import LocalHistory

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
FAMILIES = [
    "triage",
    "summary",
    "refund",
    "tone",
    "search",
    "extract",
    "route",
    "safety",
    "translate",
    "classify",
]
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_SYSTEM": os.devnull,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}
HELPERS = '''"""Shared by every eval: the prompt, the cases and a seeded stand-in model."""
import json
import random
import time
from pathlib import Path

SLEEP = {sleep}


def prompt(family):
    return Path("prompts", family, "system.txt").read_text()


def cases(family):
    with open(Path("data", family + ".jsonl")) as handle:
        return [json.loads(line) for line in handle]


def accuracy(family, variant, seed):
    time.sleep(SLEEP)  # a model call's latency
    rng = random.Random(f"{{seed}}:{{variant}}")
    text, items = prompt(family), cases(family)
    base = 0.86 + 0.01 * (len(text) % 5)
    hits = {{str(case["case"]): float(rng.random() < base) for case in items}}
    return {{"score": sum(hits.values()) / len(hits), "items": hits}}
'''
FAMILY = """from evals.common.helpers import accuracy

{functions}
"""


def sh(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: {done.stdout}{done.stderr}")
    return done.stdout


def build(root: Path, families: list[str], per_family: int, sleep: float) -> Path:
    """A bare origin holding the project on `main`, and a clone of it to work in."""
    origin, work = root / "origin.git", root / "work"
    sh(root, "git", "init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    sh(root, "git", "clone", "--quiet", str(origin), str(work))
    config = ["k = 7", "seed = 20261129", "adaptive = false", "concurrency = 4", ""]
    (work / "evals" / "common").mkdir(parents=True)
    (work / "evals" / "__init__.py").write_text("")
    (work / "evals" / "common" / "__init__.py").write_text("")
    (work / "evals" / "common" / "helpers.py").write_text(HELPERS.format(sleep=sleep))
    for family in families:
        (work / "prompts" / family).mkdir(parents=True)
        (work / "prompts" / family / "system.txt").write_text(f"You handle {family}.\n")
        (work / "data").mkdir(exist_ok=True)
        lines = "".join(json.dumps({"case": i}) + "\n" for i in range(40))
        (work / "data" / f"{family}.jsonl").write_text(lines)
        functions = "\n\n".join(
            f"def variant_{i}(seed):\n    return accuracy({family!r}, {i}, seed)\n"
            for i in range(per_family)
        )
        (work / "evals" / f"{family}.py").write_text(FAMILY.format(functions=functions))
        for i in range(per_family):
            config += [
                "[[evals]]",
                f'id = "{family}-{i}"',
                f'python = "evals.{family}:variant_{i}"',
                "threshold = 0.75",
                "",
            ]
    (work / "firewall.toml").write_text("\n".join(config))
    (work / ".gitignore").write_text(".firewall/\nfirewall-report.json\n")
    sh(work, "git", "add", "--all")
    sh(work, "git", "commit", "--quiet", "-m", "the project")
    sh(work, "git", "push", "--quiet", "origin", "HEAD:main")
    sh(work, "git", "remote", "set-head", "origin", "main")
    return work


def firewall(work: Path, *args: str) -> tuple[dict[str, Any], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_") and k != "CI"}
    started = time.perf_counter()
    done = subprocess.run(
        [FIREWALL, "run", "--no-issues", "--format", "json", *args],
        cwd=work,
        env={**env, **GIT_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"firewall run {' '.join(args)}: {done.stdout}{done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report, took


def trials(artefact: dict[str, Any]) -> int:
    return sum(len(e["trials"]) for e in artefact["evals"])


def fingerprinting_seconds(work: Path, full: dict[str, Any]) -> float:
    """What the fingerprint costs a run: the carry decision over every eval (the history
    read and each eval's inputs hashed) and the fingerprints of the probed evals."""
    loaded = load_config(None, work)
    specs = discover(loaded, work)
    started = time.perf_counter()
    import datetime as dt

    since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=7)
    history = LocalHistory(work / loaded.settings.history)
    latest = latest_probes(history, [s.id for s in specs], branch="main", since=since)
    choose(specs, latest, branch="main", max_age_days=7, root=work, env=dict(os.environ))
    by_id = {s.id: s for s in specs}
    for report in full["evals"]:
        hashed(by_id[report["id"]], files_in(report["inputs"]), work, dict(os.environ))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", type=int, default=10)
    parser.add_argument("--per-family", type=int, default=4)
    parser.add_argument("--sleep", type=float, default=0.05, help="seconds per trial")
    options = parser.parse_args()
    families = FAMILIES[: options.families]
    with tempfile.TemporaryDirectory(prefix="firewall-affected-") as scratch:
        work = build(Path(scratch), families, options.per_family, options.sleep)
        main_run, _ = firewall(work, "--all")  # the default branch, probed in full
        sh(work, "git", "checkout", "--quiet", "-b", "pull-request")
        prompt = work / "prompts" / families[0] / "system.txt"
        prompt.write_text(prompt.read_text() + "Be brief.\n")
        sh(work, "git", "commit", "--quiet", "-am", "a clearer prompt")
        pull, _ = firewall(work, "--affected")
        full, full_s = firewall(work, "--all")
        fingerprint_s = fingerprinting_seconds(work, main_run)
    probed = {e["id"]: e for e in pull["evals"] if e.get("affected")}
    carried = sum(1 for e in pull["evals"] if e.get("carried"))
    decided = {e["id"]: (e["status"], e["stats"]["median"]) for e in full["evals"]}
    same = all((e["status"], e["stats"]["median"]) == decided[i] for i, e in probed.items())
    total = len(full["evals"])
    share = trials(pull) / trials(full)
    print(
        f"{total} evals in {len(families)} families ({total - len(probed) - carried} in "
        "quarantine after the default branch's run); the pull request changes one prompt"
    )
    print(f"  --all:          {trials(full):5d} trials  {full_s:6.1f} s wall")
    print(
        f"  affected-only:  {trials(pull):5d} trials  ({share:.1%} of --all; target <= 10%), "
        f"{len(probed)} evals probed, {carried} carried"
    )
    print(f"  probed evals' decisions equal the full run's (same seeds): {same}")
    print(
        f"  fingerprinting: {fingerprint_s * 1000:.0f} ms "
        f"({fingerprint_s / full_s:.2%} of the full run's wall time; target < 5%)"
    )


if __name__ == "__main__":
    main()
