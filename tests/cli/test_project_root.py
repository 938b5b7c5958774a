"""The config is found as pytest finds its rootdir, and `init` writes where GitHub looks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from firewall.cli import main

CONFIG = 'k = 3\n[[evals]]\nid = "steady"\ncommand = "python score.py"\n'


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "src" / "deep")
    return tmp_path


def test_a_run_from_a_subdirectory_finds_the_config_at_the_root_and_works_from_there(
    repo: Path,
) -> None:
    (repo / "firewall.toml").write_text(CONFIG)
    (repo / "score.py").write_text("print('{\"score\": 0.9}')\n")  # found from the root only
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 0, result.output
    assert json.loads((repo / "firewall-report.json").read_text())["summary"]["pass"] == 1
    assert not (repo / "src" / "deep" / "firewall-report.json").exists()


def test_a_pyproject_without_a_firewall_table_is_passed_on_the_way_up(repo: Path) -> None:
    (repo / "src" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (repo / "pyproject.toml").write_text(
        '[tool.firewall]\nk = 3\n[[tool.firewall.evals]]\nid = "steady"\ncommand = "true"\n'
    )
    (repo / "score.py").write_text("print('{\"score\": 0.9}')\n")
    result = CliRunner().invoke(main, ["list", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert [e["id"] for e in json.loads(result.output)] == ["steady"]


def test_the_walk_stops_at_the_repository_root(repo: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 2
    assert f"or above it up to the repository root {repo.resolve()}" in result.output
    assert "`firewall init` (it writes to the repository root)" in result.output


def test_init_from_a_subdirectory_writes_at_the_repository_root(repo: Path) -> None:
    result = CliRunner().invoke(main, ["init"])
    assert result.exit_code == 0, result.output
    assert "writing to the repository root" in result.output
    assert (repo / "firewall.toml").is_file()
    assert (repo / ".github" / "workflows" / "firewall.yml").is_file()
    assert not (repo / "src" / "deep" / "firewall.toml").exists()
