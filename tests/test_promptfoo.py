"""promptfoo's tests as a JUnit suite (examples/promptfoo/): each test case an eval.

The run needs promptfoo on PATH (and a Node.js it supports); without it that test
skips and says so. The example's configuration is checked either way.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from firewall.cli import main
from firewall.runner.seeds import trial_seed

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "promptfoo"
CONFIG = "examples/promptfoo/firewall.toml"
SUITE = "support-prompt"
CASE = "echo__prompt_1.{}"


def test_the_example_is_listed_as_a_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)

    result = CliRunner().invoke(main, ["list", "--config", CONFIG, "--format", "json"])

    assert result.exit_code == 0, result.output
    [spec] = json.loads(result.output)
    assert (spec["id"], spec["result"]) == (SUITE, "junit")
    assert spec["junit_xml"] == ".firewall/promptfoo-{trial}.junit.xml"
    assert any("without a `description` by its place" in note for note in spec["warnings"])
    assert spec["suite"][0].startswith("a case is its provider, prompt and description")


def test_the_example_quarantines_the_case_that_reads_the_seed(project: Path) -> None:
    if shutil.which("promptfoo") is None:
        pytest.skip(
            "promptfoo is not installed (npm install -g promptfoo): "
            "the promptfoo example's run is not tested here"
        )
    shutil.copytree(EXAMPLE, project / "examples" / "promptfoo")
    # The last case fails on the seeds divisible by three (promptfooconfig.yaml).
    failing = sum(trial_seed(0, SUITE, i) % 3 == 0 for i in range(6))
    assert 0 < failing < 6

    result = CliRunner().invoke(main, ["run", "--config", CONFIG], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    report = json.loads((project / "firewall-promptfoo-report.json").read_text())
    statuses = {entry["id"].removeprefix(f"{SUITE}/"): entry["status"] for entry in report["evals"]}
    assert statuses == {
        CASE.format("greets_the_customer_by_name"): "pass",
        CASE.format("names_the_topic"): "pass",
        CASE.format("stays_short"): "pass",
        CASE.format("answers_in_the_house_tone"): "quarantine",
    }
