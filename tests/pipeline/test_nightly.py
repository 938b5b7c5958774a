"""The whole lifecycle with the installed command: quarantine, nightly streaks, release."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"

# An eval whose behaviour the test switches through a file: `unstable` alternates
# between 0.1 and 0.9 by trial index (IQR 0.8 whatever the nightly's random base
# seed), `stable` scores 0.9 +- 0.001, `low` is stable at 0.5.
EVAL = """
import sys
from pathlib import Path
seed, trial = int(sys.argv[1]), int(sys.argv[2])
mode = Path("mode.txt").read_text().strip()
if mode == "unstable":
    score = 0.1 if trial % 2 else 0.9
elif mode == "broken":
    raise SystemExit(4)
else:
    score = (0.9 if mode == "stable" else 0.5) + (seed % 3) / 1000
print('{"score": %s}' % score)
"""


def firewall(root: Path, *args: str, code: int = 0) -> str:
    proc = subprocess.run(
        [FIREWALL, *args], cwd=root, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == code, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


@pytest.fixture
def lifecycle(tmp_path: Path) -> Path:
    (tmp_path / "tone.py").write_text(EVAL)
    (tmp_path / "mode.txt").write_text("unstable")
    (tmp_path / "firewall.toml").write_text(
        "k = 5\nseed = 3\n[nightly]\nk = 20\nrelease_after = 3\n"
        '[[evals]]\nid = "tone"\ncommand = "python3 tone.py {seed} {trial}"\nowner = "alice"\n'
        '[[evals]]\nid = "steady"\ncommand = "echo \'{\\"score\\": 0.95}\'"\n'
    )
    return tmp_path


def registry(root: Path) -> dict[str, Any]:
    path = root / "quarantine.json"
    evals: dict[str, Any] = json.loads(path.read_text())["evals"] if path.exists() else {}
    return evals


def set_mode(root: Path, mode: str) -> None:
    (root / "mode.txt").write_text(mode)


def test_released_after_exactly_release_after_stable_nights(lifecycle: Path) -> None:
    firewall(lifecycle, "run")
    assert registry(lifecycle)["tone"]["owner"] == "alice"

    # Still unstable: the streak stays at 0.
    firewall(lifecycle, "nightly")
    assert registry(lifecycle)["tone"]["stable_streak"] == 0

    set_mode(lifecycle, "stable")
    firewall(lifecycle, "nightly")
    firewall(lifecycle, "nightly")
    assert registry(lifecycle)["tone"]["stable_streak"] == 2

    # An unstable night resets the streak...
    set_mode(lifecycle, "unstable")
    assert "streak reset" in firewall(lifecycle, "nightly")
    assert registry(lifecycle)["tone"]["stable_streak"] == 0

    # ...an erroring night leaves it as it is...
    set_mode(lifecycle, "stable")
    firewall(lifecycle, "nightly")
    set_mode(lifecycle, "broken")
    firewall(lifecycle, "nightly")
    assert registry(lifecycle)["tone"]["stable_streak"] == 1

    # ...and release comes after exactly three stable nights in a row.
    set_mode(lifecycle, "stable")
    firewall(lifecycle, "nightly")
    assert registry(lifecycle)["tone"]["stable_streak"] == 2
    out = firewall(lifecycle, "nightly")
    assert "tone" not in registry(lifecycle)
    assert "released after 3 stable nightly probes" in out

    artefact = json.loads((lifecycle / "firewall-report.json").read_text())
    assert artefact["run"]["mode"] == "nightly" and artefact["summary"]["exit_code"] == 0
    modes = [
        json.loads(line)["mode"]
        for line in (lifecycle / ".firewall/history.jsonl").read_text().splitlines()
    ]
    assert modes.count("nightly") == 8 and modes.count("run") == 2

    # Released and gated again.
    firewall(lifecycle, "run")


def test_release_below_threshold_warns_it_will_fail(lifecycle: Path) -> None:
    firewall(lifecycle, "run")
    set_mode(lifecycle, "low")
    # Three stable nights, and the collapse test's 73 clean trials: four nights of 20.
    for _ in range(3):
        firewall(lifecycle, "nightly")
    out = firewall(lifecycle, "nightly")
    assert "will now FAIL the gate" in out
    firewall(lifecycle, "run", code=1)


def test_nightly_records_a_fresh_base_seed_each_night(lifecycle: Path) -> None:
    firewall(lifecycle, "run")
    seeds = set()
    for _ in range(2):
        firewall(lifecycle, "nightly")
        seeds.add(json.loads((lifecycle / "firewall-report.json").read_text())["run"]["base_seed"])
    assert len(seeds) == 2


def test_nightly_all_quarantines_newly_unstable_evals(lifecycle: Path) -> None:
    firewall(lifecycle, "nightly", "--all")
    assert set(registry(lifecycle)) == {"tone"}
    assert registry(lifecycle)["tone"]["source"] == "auto"


def test_nightly_exits_zero_whatever_it_finds(lifecycle: Path) -> None:
    (lifecycle / "firewall.toml").write_text(
        (lifecycle / "firewall.toml").read_text()
        + '[[evals]]\nid = "crashy"\ncommand = "exit 9"\n'
        + '[[evals]]\nid = "low"\ncommand = "echo \'{\\"score\\": 0.1}\'"\n'
    )
    firewall(lifecycle, "nightly", "--all")


def test_nightly_on_a_broken_config_exits_two(lifecycle: Path) -> None:
    (lifecycle / "firewall.toml").write_text("k = 1\n")
    firewall(lifecycle, "nightly", code=2)


def test_manual_quarantine_round_trip(lifecycle: Path) -> None:
    out = firewall(
        lifecycle, "quarantine", "add", "steady", "--reason", "vendor outage", "--owner", "@bob"
    )
    assert "quarantined steady" in out
    assert registry(lifecycle)["steady"]["source"] == "manual"
    assert registry(lifecycle)["steady"]["owner"] == "bob"
    assert "vendor outage" in firewall(lifecycle, "quarantine", "list")
    assert "steady" in firewall(lifecycle, "status")
    firewall(lifecycle, "quarantine", "add", "steady", "--reason", "again", code=2)
    assert "did you mean 'steady'" in firewall(
        lifecycle, "quarantine", "add", "stedy", "--reason", "x", code=2
    )
    firewall(lifecycle, "quarantine", "release", "steady", "--reason", "vendor is back")
    assert "steady" not in registry(lifecycle)
