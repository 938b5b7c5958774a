"""`firewall list` says which evals every pull request probes, and why: a JUnit suite (even
with `inputs`) and a command eval without `inputs`; a Python eval is not among them."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from firewall.cli import main

CONFIG = """
[[evals]]
id = "shop"
command = "python -m pytest tests --junitxml={result}"
result = "junit"
inputs = ["tests/**"]

[[evals]]
id = "smoke"
command = "python smoke.py"

[[evals]]
id = "triage"
python = "evals:triage"
"""


def test_list_says_why_a_suite_is_always_probed(project: Path) -> None:
    (project / "firewall.toml").write_text(CONFIG)
    (project / "evals.py").write_text("def triage(seed):\n    return 1.0\n")
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 0, result.output
    said = result.output.split("probed on every pull request, never carried", 1)[1]
    assert "shop: a JUnit suite: its cases are known only from the report a run writes" in said
    assert "a suite is always probed" in said
    assert "smoke: a command eval without `inputs`" in said
    assert "triage:" not in said.split("how each suite")[0]

    listed = json.loads(CliRunner().invoke(main, ["list", "--format", "json"]).output)
    why = {entry["id"]: entry["always_probed"] for entry in listed}
    assert why["triage"] is None and why["shop"].startswith("a JUnit suite")
