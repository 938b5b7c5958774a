"""action.yml's run step splits `args` as a shell would, line by line, and evaluates nothing.

The step's own script (taken from action.yml as GitHub would run it, with
``bash --noprofile --norc -eo pipefail``) runs against a fake `firewall` in the
environment the install step makes, which records the argv it was given.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FAKE_FIREWALL = '#!/bin/sh\nprintf "%s\\0" "$@" > "$ARGV_FILE"\n'


def run_step(
    tmp_path: Path, args: str, command: str = "run"
) -> tuple[subprocess.CompletedProcess[str], list[str] | None]:
    """The action's `Run the firewall` step; the argv the fake firewall got (None: not run)."""
    step = next(
        s
        for s in yaml.safe_load((REPO / "action.yml").read_text())["runs"]["steps"]
        if s.get("id") == "firewall"
    )
    script = tmp_path / "step.sh"
    script.write_text(step["run"])
    runner_temp = tmp_path / "runner-temp"
    tool = runner_temp / "flakiness-firewall" / "bin"
    tool.mkdir(parents=True)
    (tool / "python").symlink_to(sys.executable)
    (tool / "firewall").write_text(FAKE_FIREWALL)
    (tool / "firewall").chmod(0o755)
    argv_file = tmp_path / "argv"
    env = {
        "PATH": f"{tool}{os.pathsep}{os.environ['PATH']}",
        "RUNNER_TEMP": str(runner_temp),
        "FIREWALL_COMMAND": command,
        "FIREWALL_ARGS": args,
        "ARGV_FILE": str(argv_file),
        "HOME": str(tmp_path),
    }
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    argv = argv_file.read_text().split("\0")[:-1] if argv_file.exists() else None
    return done, argv


def block_scalar(text: str) -> str:
    """``args`` as a workflow's `with: args: |` hands it to the action."""
    document = yaml.safe_load(
        "with:\n  args: |\n" + "".join(f"    {line}\n" for line in text.splitlines())
    )
    return str(document["with"]["args"])


def test_every_line_of_a_block_scalar_gives_its_words(tmp_path: Path) -> None:
    args = block_scalar("--tag smoke\n--k 9\n\n--reason \"two words\" --eval 'it is'")
    done, argv = run_step(tmp_path, args)

    assert done.returncode == 0, done.stderr
    assert argv == ["run", "--tag", "smoke", "--k", "9", "--reason", "two words", "--eval", "it is"]


def test_one_line_still_splits_on_whitespace(tmp_path: Path) -> None:
    done, argv = run_step(tmp_path, "--tag smoke   --k 9", command="nightly")
    assert done.returncode == 0 and argv == ["nightly", "--tag", "smoke", "--k", "9"]


def test_no_args_gives_the_command_alone(tmp_path: Path) -> None:
    done, argv = run_step(tmp_path, "")
    assert done.returncode == 0 and argv == ["run"]


def test_nothing_in_args_is_expanded_or_run(tmp_path: Path) -> None:
    args = "--reason $(touch pwned) `touch pwned2` ; rm -rf / \n* $HOME ${PATH} # kept\n"
    done, argv = run_step(tmp_path, args)

    assert done.returncode == 0, done.stderr
    assert argv == [
        "run",
        "--reason",
        "$(touch",
        "pwned)",
        "`touch",
        "pwned2`",
        ";",
        "rm",
        "-rf",
        "/",
        "*",
        "$HOME",
        "${PATH}",
        "#",
        "kept",
    ]
    assert not list((tmp_path / "work").iterdir()), "no file was created"


def test_an_unclosed_quote_is_an_error_annotation_and_nothing_runs(tmp_path: Path) -> None:
    done, argv = run_step(tmp_path, '--tag smoke\n--reason "unfinished\n')

    assert done.returncode == 2 and argv is None
    assert done.stdout.strip() == (
        "::error title=Flakiness Firewall::line 2 of args: No closing quotation"
    )


@pytest.mark.parametrize("command", ["status", "run; id"])
def test_an_unknown_command_is_refused_before_anything_runs(tmp_path: Path, command: str) -> None:
    done, argv = run_step(tmp_path, "", command=command)
    assert done.returncode == 2 and argv is None
    assert "command must be run, nightly or propose" in done.stdout


def action_step(step_id: str) -> dict[str, Any]:
    action = yaml.safe_load((REPO / "action.yml").read_text())
    step: dict[str, Any] = next(s for s in action["runs"]["steps"] if s.get("id") == step_id)
    return step


def locate_report(tmp_path: Path, report: str, working_directory: str) -> str:
    """The action's `report` output, from its `Locate the report` step run as GitHub runs it."""
    step = action_step("report")
    assert step["if"] == "always()", "a failing gate's report is uploaded too"
    assert step["env"] == {
        "REPORT": "${{ steps.firewall.outputs.report }}",
        "WORKING_DIRECTORY": "${{ inputs.working-directory }}",
    }
    assert "working-directory" not in step, "it runs where later steps read paths from"
    script = tmp_path / "locate.sh"
    script.write_text(str(step["run"]))
    outputs = tmp_path / "output.txt"
    outputs.write_text("")
    env = {
        "PATH": os.environ["PATH"],
        "REPORT": report,
        "WORKING_DIRECTORY": working_directory,
        "GITHUB_OUTPUT": str(outputs),
    }
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return outputs.read_text()


@pytest.mark.parametrize(
    ("report", "working_directory", "path"),
    [
        ("firewall-report.json", ".", "./firewall-report.json"),
        ("firewall-report.json", "services/evals", "services/evals/firewall-report.json"),
        ("out/r.json", "services/evals/", "services/evals/out/r.json"),
        ("/tmp/r.json", "services/evals", "/tmp/r.json"),
        ("", "services/evals", "services/evals/firewall-report.json"),  # the step never got far
    ],
)
def test_the_report_output_honours_the_working_directory(
    tmp_path: Path, report: str, working_directory: str, path: str
) -> None:
    assert locate_report(tmp_path, report, working_directory) == f"path={path}\n"


def test_a_report_path_that_spans_lines_sets_no_output(tmp_path: Path) -> None:
    assert locate_report(tmp_path, "r.json\nstatus=pass", ".") == ""


def test_the_firewall_step_gets_the_job_key_whose_default_is_the_matrix_leg() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["inputs"]["job-key"]["default"] == "${{ toJSON(matrix) }}"
    assert action_step("firewall")["env"]["FIREWALL_JOB_KEY"] == "${{ inputs.job-key }}"
