"""`paths` of decorated evals: under the project, where they can be imported from its root."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import invoke_split

EVAL = "import firewall\n\n\n@firewall.eval()\ndef steady(seed: int) -> float:\n    return 0.9\n"


@pytest.fixture
def monorepo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project beside a sibling that holds evals: ``app/`` and ``shared/evals/``."""
    (tmp_path / "shared" / "evals").mkdir(parents=True)
    (tmp_path / "shared" / "evals" / "steady.py").write_text(EVAL, encoding="utf-8")
    app = tmp_path / "app"
    app.mkdir()
    monkeypatch.chdir(app)
    return app


def configure(app: Path, path: str) -> None:
    (app / "firewall.toml").write_text(f'paths = ["{path}"]\n', encoding="utf-8")


def test_paths_outside_the_project_are_refused_in_one_line(monorepo: Path) -> None:
    configure(monorepo, "../shared/evals")

    result = invoke_split("list")

    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("firewall: error: firewall.toml: paths: ../shared/evals is outside")
    assert "Traceback" not in result.stderr + result.stdout


def test_a_link_out_of_the_project_is_refused_and_says_where_it_leads(monorepo: Path) -> None:
    (monorepo / "evals").symlink_to(monorepo.parent / "shared" / "evals")
    configure(monorepo, "evals")

    result = invoke_split("list")

    assert result.exit_code == 2
    expected = f"paths: evals (a link to {(monorepo.parent / 'shared' / 'evals').resolve()})"
    assert expected in result.stderr


def test_a_link_within_the_project_is_followed(monorepo: Path) -> None:
    (monorepo / "src" / "evals").mkdir(parents=True)
    (monorepo / "src" / "evals" / "steady.py").write_text(EVAL, encoding="utf-8")
    (monorepo / "evals").symlink_to(monorepo / "src" / "evals")
    configure(monorepo, "evals")

    result = invoke_split("list")

    assert result.exit_code == 0, result.output
    assert "steady" in result.stdout
