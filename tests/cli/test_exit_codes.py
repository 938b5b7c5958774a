"""Exit codes CI scripts read (contract §5): 4 for an internal error, never 1; 2 for a
config whose file paths name directories, before any eval runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from builders import invoke_split

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
INTERNAL = "firewall: error: internal error:"
STEADY = "echo '{\"score\": 0.9}'"
MARKED = "touch ran.txt; echo '{\"score\": 0.9}'"


invoke = invoke_split


def write_config(root: Path, settings: str, command: str, *, name: str = "firewall.toml") -> None:
    table = "[tool.firewall]\n" if name == "pyproject.toml" else ""
    evals = "[[tool.firewall.evals]]" if name == "pyproject.toml" else "[[evals]]"
    body = f'{evals}\nid = "good"\ncommand = {json.dumps(command)}\n'
    (root / name).write_text(f"{table}k = 3\nseed = 7\n{settings}\n{body}", encoding="utf-8")


def history_in_a_symlink_loop(root: Path) -> None:
    """A history path that is a symbolic link to itself: appending to it fails with ELOOP,
    an OSError no check foresees (the path is neither a file nor a directory)."""
    (root / "loop").symlink_to("loop")
    write_config(root, 'history = "loop"', STEADY)


def assert_internal_error(code: int, stdout: str, stderr: str) -> None:
    assert code == 4, stdout + stderr
    lines = stderr.splitlines()
    assert [line for line in lines if line.startswith("firewall: error:")] == [lines[0]]
    assert lines[0].startswith(INTERNAL) and "loop" in lines[0]
    assert "not a failing eval" in lines[0]
    assert "Traceback (most recent call last)" in stderr
    assert "FAIL" not in stdout and "exit 1" not in stdout


# --- 4: an internal error ----------------------------------------------------------------


def test_unforeseen_os_error_exits_four_with_one_line_and_a_traceback(project: Path) -> None:
    history_in_a_symlink_loop(project)
    result = invoke("run")
    assert_internal_error(result.exit_code, result.stdout, result.stderr)
    assert (project / "loop").is_symlink()


@pytest.mark.e2e
def test_installed_command_exits_four_on_an_internal_error(tmp_path: Path) -> None:
    history_in_a_symlink_loop(tmp_path)
    proc = subprocess.run(
        [FIREWALL, "run"], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert_internal_error(proc.returncode, proc.stdout, proc.stderr)


# --- 2: a file setting that names a directory --------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [("registry", "state"), ("history", ".firewall"), ("report", "reports")],
)
def test_file_setting_naming_a_directory_exits_two_before_any_eval(
    project: Path, key: str, value: str
) -> None:
    (project / value).mkdir()
    write_config(project, f"{key} = {json.dumps(value)}", MARKED)
    result = invoke("run")
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("firewall: error: firewall.toml:")
    assert f"{key} = {value!r} is a directory" in line
    assert "expected the path of a file" in line and "Traceback" not in result.stderr
    assert not (project / "ran.txt").exists()
    assert sorted(p.name for p in project.iterdir()) == sorted(["firewall.toml", value])


def test_directory_setting_in_pyproject_names_the_table_key(project: Path) -> None:
    (project / "hist").mkdir()
    write_config(project, 'history = "hist"', MARKED, name="pyproject.toml")
    result = invoke("run")
    assert result.exit_code == 2
    assert "pyproject.toml: tool.firewall.history = 'hist' is a directory" in result.stderr
    assert not (project / "ran.txt").exists()


@pytest.mark.parametrize("command", [["status"], ["quarantine", "list"], ["nightly", "--all"]])
def test_every_command_refuses_a_directory_history(project: Path, command: list[str]) -> None:
    (project / "hist").mkdir()
    write_config(project, 'history = "hist"', MARKED)
    result = invoke(*command)
    assert result.exit_code == 2
    assert "history = 'hist' is a directory" in result.stderr
    assert not (project / "ran.txt").exists()


def test_every_exit_code_is_told_in_the_help_and_the_action() -> None:
    """A CI script reads the status: each code the firewall can exit with is named where a
    user looks, `firewall --help` and the action's `exit-code` output."""
    import re
    from pathlib import Path

    import yaml
    from click.testing import CliRunner

    from firewall.cli import main
    from firewall.errors import ExitCode

    told = CliRunner().invoke(main, ["--help"]).output
    said = {int(n) for n in re.findall(r"\b(\d+)\s+[a-z]", told.split("Exit codes:", 1)[1])}
    assert said >= {int(code) for code in ExitCode}
    action = yaml.safe_load((Path(__file__).parents[2] / "action.yml").read_text())
    described = action["outputs"]["exit-code"]["description"]
    assert {int(n) for n in re.findall(r"\d+", described)} == {int(code) for code in ExitCode}


def test_the_error_tree_is_whole_and_no_error_reads_as_a_failing_eval() -> None:
    """Every FirewallError is drawn in errors.py's tree, and none exits 1: that code says
    a blocking eval failed, and an error of the firewall's (a pull request GitHub would
    not open, a git that cannot push) must never be read as one."""
    from firewall import errors
    from firewall.errors import ExitCode, FirewallError

    def family(cls: type[FirewallError]) -> list[type[FirewallError]]:
        return [cls, *(c for sub in cls.__subclasses__() for c in family(sub))]

    everyone = family(FirewallError)
    assert errors.ProposalRefused in everyone and errors.GitError in everyone
    tree = errors.__doc__ or ""
    assert [cls.__name__ for cls in everyone if cls.__name__ not in tree] == []
    assert [cls.__name__ for cls in everyone if cls.exit_code == ExitCode.FAIL] == []
    assert errors.ProposalRefused.exit_code == ExitCode.USAGE
