"""The layers of the package, checked by import-linter as CI checks them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

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
    assert "Contracts: 6 kept, 0 broken." in result.stdout


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
            "import firewall.github.actions.annotations",
            "firewall.report is not allowed to import firewall.github",
        ),
        # The pure core starting a process, directly or through the runner.
        (
            "policy.py",
            "import subprocess",
            "firewall.policy -> subprocess",
        ),
        (
            "policy.py",
            "from firewall.runner.command import run_command",
            "firewall.policy -> firewall.runner.command",
        ),
        # ... or reading a file, or reaching the store or GitHub.
        (
            "_stats.py",
            "from firewall.files import read_capped",
            "firewall._stats -> firewall.files",
        ),
        (
            "lifecycle.py",
            "import firewall.store.registry",
            "firewall.lifecycle -> firewall.store.registry",
        ),
        (
            "runner/trial.py",
            "import os",
            "firewall.runner.trial -> os",
        ),
        # What writes the runner's files reaching for the REST API.
        (
            "github/actions/summary.py",
            "from firewall.github.client import GitHubPullRequests",
            "firewall.github.actions.summary -> firewall.github.client",
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


def _contracts() -> dict[str, Any]:
    document = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = document["tool"]["importlinter"]["contracts"]
    return {contract["id"]: contract for contract in contracts}


def _modules(cell: str) -> list[str]:
    """`cli/`, `policy.py` -> cli, policy."""
    return [name.rstrip("/").removesuffix(".py") for name in re.findall(r"`([^`]+)`", cell)]


def test_the_documented_layers_are_the_contracts() -> None:
    """docs/reference/layers.md draws the layers contract, row for layer, module for module."""
    contract = _contracts()["layers"]
    text = (REPO / "docs" / "reference" / "layers.md").read_text()
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| layer ")
    ]
    documented = [(_modules(row[1]), row[2]) for row in rows]
    expected = []
    for layer in contract["layers"]:
        separator = ":" if ":" in layer else "|"
        modules = [module.strip() for module in layer.split(separator)]
        kind = {":": "ordered", "|": "independent"}[separator]
        expected.append((modules, kind if len(modules) > 1 else "-"))
    assert documented == expected


def test_the_documented_core_is_the_forbidden_contracts() -> None:
    contract = _contracts()["pure-core"]
    core = [module.removeprefix("firewall.") for module in contract["source_modules"]]
    text = (REPO / "docs" / "reference" / "layers.md").read_text()
    section = text.split("## The pure core", 1)[1]
    opening = section.split(" decide from values", 1)[0]
    records = ("runner.trial", "runner.judgement")  # the runner's data, held to the contract
    assert _modules(opening) == [module for module in core if module not in records]
    assert "`runner/trial.py`" in section and "`runner/judgement.py`" in section
