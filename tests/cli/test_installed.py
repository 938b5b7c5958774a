"""End to end: the installed `firewall` command on temporary projects, as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
REPO = Path(__file__).resolve().parents[2]


def firewall(
    *args: str, cwd: Path, check_code: int | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [FIREWALL, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    if check_code is not None:
        assert proc.returncode == check_code, proc.stdout + proc.stderr
    return proc


def test_installed_command_reports_its_version(tmp_path: Path) -> None:
    proc = firewall("--version", cwd=tmp_path, check_code=0)
    assert "firewall" in proc.stdout


def test_shipped_example_suite_runs_and_exits_zero(tmp_path: Path) -> None:
    """The README's promise: install, then `firewall run` in the repository root works."""
    work = tmp_path / "repo"
    shutil.copytree(REPO / "examples", work / "examples")
    shutil.copy(REPO / "pyproject.toml", work / "pyproject.toml")
    proc = firewall("run", cwd=work, check_code=0)
    artefact = json.loads((work / "firewall-report.json").read_text())
    statuses = {e["status"] for e in artefact["evals"]}
    assert {"pass", "fail", "quarantine", "error"} <= statuses, proc.stdout
    kinds = {e["source"]["file"].endswith(".py") for e in artefact["evals"]}
    assert kinds == {True, False}, "both config-declared and decorated evals ship"
    assert (work / "quarantine.json").exists()
    # The second run skips what the first quarantined, and still exits 0.
    firewall("run", cwd=work, check_code=0)
    again = json.loads((work / "firewall-report.json").read_text())
    assert again["summary"]["quarantined"] == artefact["summary"]["quarantine"]


def _slow_project(root: Path) -> None:
    (root / "firewall.toml").write_text(
        "k = 3\nconcurrency = 4\n"
        '[[evals]]\nid = "fast"\ncommand = "echo \'{\\"score\\": 0.9}\'"\n'
        '[[evals]]\nid = "slow-command"\ncommand = "touch started-command; sleep 60"\n'
        '[[evals]]\nid = "slow-python"\npython = "slow:trial"\n'
    )
    (root / "slow.py").write_text(
        "import pathlib, time\n\n"
        "def trial(seed):\n"
        "    pathlib.Path('started-python').touch()\n"
        "    time.sleep(60)\n"
        "    return 1.0\n"
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_writes_an_incomplete_artefact_and_exits_130(
    tmp_path: Path, signum: signal.Signals
) -> None:
    _slow_project(tmp_path)
    proc = subprocess.Popen(
        [FIREWALL, "run"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A test run started in the background by a non-interactive shell inherits an
        # ignored SIGINT, which the firewall (like any program) would keep ignoring.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # Wait until both kinds of slow trial are running, then interrupt them.
    deadline = time.monotonic() + 60
    started = [tmp_path / "started-command", tmp_path / "started-python"]
    while time.monotonic() < deadline and not all(path.exists() for path in started):
        time.sleep(0.05)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    artefact = json.loads((tmp_path / "firewall-report.json").read_text())
    assert artefact["run"]["complete"] is False
    assert artefact["summary"]["exit_code"] == 130
    assert "INTERRUPTED" in stdout
    assert not (tmp_path / "quarantine.json").exists()


def test_an_interrupted_nightly_tells_actions_it_was_interrupted(tmp_path: Path) -> None:
    """The process, the artefact and $GITHUB_OUTPUT agree: 130, never a nightly that passed."""
    _slow_project(tmp_path)
    (tmp_path / "quarantine.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "evals": {
                    "slow-command": {
                        "since": "2026-11-01T00:00:00Z",
                        "source": "manual",
                        "reason": "held",
                    }
                },
            }
        )
    )
    outputs = tmp_path / "output.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_") and k != "CI"}
    env.update(GITHUB_ACTIONS="true", GITHUB_OUTPUT=str(outputs), CI="true")
    proc = subprocess.Popen(
        [FIREWALL, "nightly", "--no-issues"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (tmp_path / "started-command").exists():
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    artefact = json.loads((tmp_path / "firewall-report.json").read_text())
    assert artefact["run"]["complete"] is False and artefact["summary"]["exit_code"] == 130
    lines = outputs.read_text().splitlines()
    said = {  # the heredoc form: name<<DELIMITER, the value, the delimiter
        line.split("<<", 1)[0]: lines[i + 1] for i, line in enumerate(lines) if "<<" in line
    }
    assert (said["status"], said["exit-code"]) == ("error", "130")


def test_config_error_names_file_and_key_without_traceback(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.firewall]\nk = 2\n")
    proc = firewall("run", cwd=tmp_path, check_code=2)
    assert "pyproject.toml: tool.firewall.k" in proc.stderr
    assert "greater than or equal to 3" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_python_module_entry_point(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "firewall", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ},
    )
    assert proc.returncode == 0 and "Usage: firewall" in proc.stdout
