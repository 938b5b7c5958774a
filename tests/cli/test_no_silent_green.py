"""A gate that ran nothing must not read as one that passed: exit 5, and why."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from firewall.cli import main
from firewall.errors import ExitCode

EVALS = """k = 3
[[evals]]
id = "triage"
command = "echo 0.9"
tags = ["smoke", "triage"]
[[evals]]
id = "refusals"
command = "echo 0.9"
tags = ["safety"]
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_a_tag_that_matches_nothing_exits_5_and_suggests_the_near_miss(project: Path) -> None:
    (project / "firewall.toml").write_text(EVALS)
    result = invoke("run", "--tag", "smkoe")
    assert result.exit_code == ExitCode.NOTHING_SELECTED.value == 5
    assert "no eval has the tag 'smkoe' (did you mean 'smoke'?)" in result.output
    assert "the tags are safety, smoke, triage; the evals are refusals, triage" in result.output
    assert not (project / "firewall-report.json").exists(), "nothing ran: no report"


def test_tags_that_no_eval_has_together_exit_5(project: Path) -> None:
    (project / "firewall.toml").write_text(EVALS)
    result = invoke("run", "--tag", "smoke", "--tag", "safety")
    assert result.exit_code == 5
    assert "no eval has all the tags 'smoke', 'safety'" in result.output


def test_a_config_whose_paths_find_no_eval_exits_5(project: Path) -> None:
    (project / "evals").mkdir()
    (project / "evals" / "helpers.py").write_text("def not_an_eval(seed):\n    return 1.0\n")
    (project / "firewall.toml").write_text('paths = ["evals"]\n')
    result = invoke("run")
    assert result.exit_code == 5
    assert "no eval is defined: firewall.toml has no [[evals]]" in result.output


def test_a_probe_of_nothing_exits_5_and_writes_no_part(project: Path) -> None:
    (project / "firewall.toml").write_text(EVALS)
    result = invoke("probe", "--tag", "nope", "--out", "part.json")
    assert result.exit_code == 5 and not (project / "part.json").exists()


def test_listing_nothing_is_not_an_error(project: Path) -> None:
    (project / "firewall.toml").write_text(EVALS)
    result = invoke("list", "--tag", "nope", "--format", "json")
    assert result.exit_code == 0 and json.loads(result.output) == []
