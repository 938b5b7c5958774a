"""action.yml and the workflows: parsed, and the invariants we rely on checked."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from firewall.scaffold import ACTION_REF, scaffold

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
REPORT_PATH = "${{ steps.firewall.outputs.report || 'firewall-report.json' }}"
OUTPUTS = {"status", "exit-code", "pass", "fail", "quarantine", "quarantined", "error", "report"}


def load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    assert isinstance(document, dict), path
    # PyYAML reads the bare key `on` as True (YAML 1.1); GitHub reads it as "on".
    if True in document:
        document["on"] = document.pop(True)
    return document


def scripts(document: dict[str, Any]) -> list[str]:
    steps = document.get("runs", {}).get("steps", [])
    for job in document.get("jobs", {}).values():
        steps += job.get("steps", [])
    return [step["run"] for step in steps if "run" in step]


def test_action_is_composite_and_exposes_every_output() -> None:
    action = load(REPO / "action.yml")
    assert action["runs"]["using"] == "composite"
    assert set(action["outputs"]) == OUTPUTS
    for name, output in action["outputs"].items():
        step = "report.outputs.path" if name == "report" else f"firewall.outputs.{name}"
        assert output["value"] == f"${{{{ steps.{step} }}}}"
    assert {"args", "python-version", "working-directory", "command"} <= set(action["inputs"])
    assert any(step.get("id") == "firewall" for step in action["runs"]["steps"])


def test_action_installs_from_its_own_path_into_an_isolated_environment() -> None:
    install = next(
        s for s in load(REPO / "action.yml")["runs"]["steps"] if "pip install" in s.get("run", "")
    )
    assert install["env"]["ACTION_PATH"] == "${{ github.action_path }}"
    assert "python3 -m venv" in install["run"] and '"$ACTION_PATH"' in install["run"]


@pytest.mark.parametrize(
    "path", [REPO / "action.yml", *sorted(WORKFLOWS.glob("*.yml"))], ids=lambda p: p.name
)
def test_no_expression_is_spliced_into_a_script(path: Path) -> None:
    """Inputs reach scripts through env:, never as ${{ }} inside `run:` (script injection)."""
    for script in scripts(load(path)):
        assert "${{" not in script, script


@pytest.mark.parametrize("name", ["ci.yml", "firewall.yml", "nightly.yml"])
def test_workflows_have_minimal_permissions_and_concurrency(name: str) -> None:
    workflow = load(WORKFLOWS / name)
    assert "permissions" in workflow and workflow["permissions"].get("contents") in (
        "read",
        "write",
    )
    assert "write-all" not in str(workflow["permissions"])
    assert workflow["concurrency"]["group"]
    for job in workflow["jobs"].values():
        assert "timeout-minutes" in job


def test_ci_runs_the_readme_test_command_on_a_python_matrix() -> None:
    workflow = load(WORKFLOWS / "ci.yml")
    job = workflow["jobs"]["test"]
    assert len(job["strategy"]["matrix"]["python-version"]) >= 3
    assert "3.10" in job["strategy"]["matrix"]["python-version"]
    readme = (REPO / "README.md").read_text()
    command = re.search(r"## Tests\n\n```bash\n(.+?)\n```", readme)
    assert command is not None
    assert command.group(1) in scripts(workflow)
    ci_script = (REPO / ".ci" / "run").read_text()
    assert ci_script.strip().splitlines()[-1] == command.group(1)


def test_the_pr_gate_uses_this_action_and_uploads_the_report() -> None:
    workflow = load(WORKFLOWS / "firewall.yml")
    assert "pull_request" in workflow["on"]
    steps = workflow["jobs"]["gate"]["steps"]
    assert any(step.get("uses") == "./" for step in steps)
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == REPORT_PATH
    assert "main" in workflow["on"]["push"]["branches"], "the default branch's runs keep history"
    assert workflow["permissions"] == {"contents": "write", "issues": "write"}


def test_the_nightly_is_scheduled_and_proposes_a_pull_request() -> None:
    workflow = load(WORKFLOWS / "nightly.yml")
    assert workflow["on"]["schedule"][0]["cron"]
    assert workflow["concurrency"]["cancel-in-progress"] is False
    steps = workflow["jobs"]["nightly"]["steps"]
    commands = [s["with"]["command"] for s in steps if s.get("uses") == "./"]
    assert commands == ["nightly", "propose"], "re-probe, then one rolling pull request"
    assert not any("gh " in script or "git push" in script for script in scripts(workflow))
    assert workflow["permissions"] == {
        "contents": "write",
        "issues": "write",
        "pull-requests": "write",
    }


def test_init_scaffolds_valid_workflows_and_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    mine = tmp_path / ".github" / "workflows" / "firewall.yml"
    mine.write_text("name: mine\n")
    results = {p.path.name: p for p in scaffold(tmp_path)}
    assert not results["firewall.yml"].created and mine.read_text() == "name: mine\n"
    assert results["firewall-nightly.yml"].created and results["firewall.toml"].created
    nightly = load(tmp_path / ".github" / "workflows" / "firewall-nightly.yml")
    uses = [s.get("uses") for s in nightly["jobs"]["nightly"]["steps"]]
    assert ACTION_REF in uses
    again = scaffold(tmp_path)
    assert not any(p.created for p in again)


def test_the_lowest_constraints_pin_exactly_the_declared_floors() -> None:
    """CI's `lowest` job tests the oldest releases pyproject.toml admits; keep the two in step."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    floors = {}
    for line in project["dependencies"]:
        requirement = Requirement(line)
        (minimum,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        floors[requirement.name.lower()] = (Version(minimum), str(requirement.marker or ""))
    pins = {}
    for line in (REPO / "tests" / "constraints-lowest.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            (pinned,) = [spec.version for spec in requirement.specifier if spec.operator == "=="]
            pins[requirement.name.lower()] = (Version(pinned), str(requirement.marker or ""))
    assert pins == floors

    job = load(WORKFLOWS / "ci.yml")["jobs"]["lowest"]
    assert job["steps"][1]["with"]["python-version"] == project["requires-python"].lstrip(">=")
    assert "-c tests/constraints-lowest.txt" in " ".join(scripts({"jobs": {"lowest": job}}))


def gate_workflows(tmp_path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every workflow that runs on pull requests and on the default branch: this project's
    and the ones `firewall init` writes."""
    scaffold(tmp_path)
    written = tmp_path / ".github" / "workflows"
    return [
        ("ci.yml", load(WORKFLOWS / "ci.yml")),
        ("firewall.yml", load(WORKFLOWS / "firewall.yml")),
        ("init: firewall.yml", load(written / "firewall.yml")),
    ]


def test_only_pull_requests_cancel_their_older_runs(tmp_path: Path) -> None:
    """The default branch's runs are the baseline: none is cancelled, and none waits in a
    shared group, where GitHub drops a pending run when a newer one arrives."""
    for name, workflow in gate_workflows(tmp_path):
        concurrency = workflow["concurrency"]
        assert concurrency["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}", (
            name
        )
        group = concurrency["group"]
        assert "github.event_name == 'pull_request' && github.ref || github.run_id" in group, name


def test_the_documented_workflow_cancels_only_pull_requests() -> None:
    """The workflow the docs' GitHub Actions page shows first is the one this repository runs."""
    page = (REPO / "docs" / "ci" / "github-actions.md").read_text()
    snippet = page.split("```yaml", 1)[1].split("```", 1)[0]
    workflow = yaml.safe_load(snippet)
    assert workflow["concurrency"] == load(WORKFLOWS / "firewall.yml")["concurrency"]
    assert workflow["permissions"] == {"contents": "write", "issues": "write"}


def test_every_upload_takes_the_path_the_action_reports(tmp_path: Path) -> None:
    scaffold(tmp_path)
    written = tmp_path / ".github" / "workflows"
    for path in (WORKFLOWS / "firewall.yml", WORKFLOWS / "nightly.yml", *written.glob("*.yml")):
        steps = [s for job in load(path)["jobs"].values() for s in job["steps"]]
        ids = {s.get("id") for s in steps}
        uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-")]
        assert uploads and "firewall" in ids, path
        assert all(s["with"]["path"] == REPORT_PATH for s in uploads), path


def test_the_gate_needs_no_pull_requests_permission_for_its_comment(tmp_path: Path) -> None:
    scaffold(tmp_path)
    gate = load(tmp_path / ".github" / "workflows" / "firewall.yml")
    assert gate["permissions"] == {"contents": "write", "issues": "write"}
