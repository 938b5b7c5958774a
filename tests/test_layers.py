"""The layers of the package, checked by import-linter as CI checks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` with the project's contracts, on the package found under ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_every_arrow_points_down_the_layers() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # The store reaching up into the command line: the arrow the layout forbids.
        (
            "store/atomic.py",
            "from firewall.cli import main",
            "firewall.store is not allowed to import firewall.cli",
        ),
        # A renderer reaching into GitHub.
        (
            "report/html.py",
            "import firewall.github.annotations",
            "firewall.report is not allowed to import firewall.github",
        ),
        # PyGithub outside its one module.
        (
            "pipeline/effects.py",
            "import github",
            "firewall.pipeline.effects -> github",
        ),
    ],
)
def test_an_arrow_pointing_back_up_breaks_the_build(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    shutil.copytree(
        REPO / "firewall", tmp_path / "firewall", ignore=shutil.ignore_patterns("__pycache__")
    )
    target = tmp_path / "firewall" / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1
    assert broken in result.stdout
