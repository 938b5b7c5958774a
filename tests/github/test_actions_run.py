"""`firewall run` inside a GitHub Actions job: annotations, summary, outputs, no forgery."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from firewall.cli import main

FORGER = (
    "echo '::error::forged from stderr' >&2; "
    "echo '::add-mask::secret' >&2; "
    "printf '%s\\n' '::set-output name=status::pass'; "
    "exit 5"
)


def workflow_commands(stdout: str) -> list[str]:
    """The lines the runner would act on, honouring ::stop-commands:: blocks as it does."""
    commands, stopped_until = [], None
    for raw in stdout.splitlines():
        line = raw.strip()
        if stopped_until is not None:
            if line == f"::{stopped_until}::":
                stopped_until = None
            continue
        match = re.match(r"^::stop-commands::(.+)$", line)
        if match:
            stopped_until = match.group(1)
            continue
        if line.startswith("::"):
            commands.append(line)
    return commands


@pytest.fixture
def actions_env(project: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    paths = {"summary": project / "summary.md", "output": project / "output.txt"}
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(project))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(paths["summary"]))
    monkeypatch.setenv("GITHUB_OUTPUT", str(paths["output"]))
    return paths


def write(project: Path, evals: dict[str, str], extra: str = "") -> None:
    body = "".join(
        f'[[evals]]\nid = "{i}"\ncommand = {json.dumps(c)}\n{extra}\n' for i, c in evals.items()
    )
    (project / "firewall.toml").write_text("k = 3\n" + body)


def test_nothing_an_eval_prints_becomes_a_workflow_command(
    project: Path, actions_env: dict[str, Path]
) -> None:
    write(project, {"forger": FORGER})
    result = CliRunner().invoke(main, ["run", "-v"])
    assert result.exit_code == 3
    assert "forged from stderr" in result.output, "the text is shown, inside stop-commands"
    commands = workflow_commands(result.output)
    assert commands, "the failure itself is annotated"
    for command in commands:
        # The forged text may appear only as escaped data after the command's own `::`.
        kind = re.match(r"^::(\S+?)[ :]", command)
        assert kind is not None and kind.group(1) in ("error", "warning"), command


def test_annotations_summary_and_outputs(project: Path, actions_env: dict[str, Path]) -> None:
    write(project, {"good": "echo '{\"score\": 0.9}'", "low": "echo '{\"score\": 0.2}'"})
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 1
    commands = workflow_commands(result.output)
    assert any(
        c.startswith("::error ")
        and "title=FAIL low" in c
        and "file=firewall.toml" in c
        and "line=7" in c
        for c in commands
    ), commands
    summary = actions_env["summary"].read_text()
    assert summary.index("low") < summary.index("good"), "failures come first"
    outputs = actions_env["output"].read_text()
    found = re.findall(r"^([\w-]+)<<(\S+)\n(.*?)\n\2$", outputs, re.M | re.S)
    values = {name: value for name, _delimiter, value in found}
    assert len(values) == 8
    assert values["status"] == "fail" and values["exit-code"] == "1"
    assert values["fail"] == "1" and values["pass"] == "1"


def test_dry_run_writes_no_summary_or_outputs(project: Path, actions_env: dict[str, Path]) -> None:
    write(project, {"low": "echo '{\"score\": 0.2}'"})
    result = CliRunner().invoke(main, ["run", "--dry-run"])
    assert result.exit_code == 1
    assert workflow_commands(result.output)
    assert not actions_env["summary"].exists() and not actions_env["output"].exists()


def test_an_unwritable_summary_warns_and_keeps_the_exit_code(
    project: Path, actions_env: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project / "missing-dir" / "summary.md"))
    write(project, {"good": "echo '{\"score\": 0.9}'"})
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 0
    assert any("could not append the job summary" in c for c in workflow_commands(result.output))


def test_outside_actions_no_workflow_commands(project: Path) -> None:
    write(project, {"low": "echo '{\"score\": 0.2}'"})
    result = CliRunner().invoke(main, ["run"])
    assert workflow_commands(result.output) == []


def test_json_output_stays_valid_json_inside_a_job(
    project: Path, actions_env: dict[str, Path]
) -> None:
    write(project, {"forger": FORGER})
    result = CliRunner().invoke(main, ["run", "--format", "json"])
    document, end = json.JSONDecoder().raw_decode(result.output)
    assert document["evals"][0]["id"] == "forger"
    assert workflow_commands(result.output[:end]) == [], "no line of the JSON is a command"
    annotations = result.output[end:].split()
    assert annotations and all(
        line.startswith("::") or not line.strip() for line in result.output[end:].splitlines()
    )
