"""The documentation: the site builds strictly, and what the code defines is documented.

The reference's generated parts come from `docs/gen_reference.py` (the MkDocs hook);
these tests use its walks of the click group and the config models, so that a key or
an option added to the code fails here until a page says what it is for.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from firewall.errors import ExitCode

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load_generator()


def handwritten() -> str:
    """Every page as written by hand: the generated parts are only marker lines here."""
    return "\n".join(page.read_text() for page in sorted(DOCS.rglob("*.md")))


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """Broken links and anchors, missing pages and pages left out of the nav all fail."""
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "<!-- generated" not in cli and "Usage: firewall run [OPTIONS]" in cli
    schemas = (site / "reference" / "schemas" / "index.html").read_text()
    assert schemas.count("urn:flakiness-firewall:schema:") == 3
    config = (site / "reference" / "configuration" / "index.html").read_text()
    assert "release_after" in config and "<!-- generated" not in config


def described_keys() -> dict[str, set[str]]:
    """The keys in the first column of each table of "What each key means", by heading."""
    page = (DOCS / "reference" / "configuration.md").read_text()
    section = page.split("## What each key means", 1)[1].split("\n## ", 1)[0]
    described: dict[str, set[str]] = {}
    for block in section.split("\n### ")[1:]:
        heading, _, body = block.partition("\n")
        rows = [line for line in body.splitlines() if line.startswith("| `")]
        described[heading.strip()] = {
            key for row in rows for key in re.findall(r"`([a-z0-9_]+)`", row.split(" | ")[0])
        }
    return described


def test_every_config_key_is_described_in_its_table(generator: ModuleType) -> None:
    described = described_keys()
    expected = {}
    for path, model in generator.tables():
        name = generator._table_name(path)
        heading = f"`{name}`" if name else "Top level"
        plain = {
            key
            for key, field in model.model_fields.items()
            if generator._model_of(field.annotation) is None
        }
        expected[heading] = plain
    assert described == expected


def test_every_command_and_option_is_documented(generator: ModuleType) -> None:
    text = handwritten()
    missing = []
    for path, command, _ in generator.commands():
        if path and f"firewall {path}" not in text:
            missing.append(f"firewall {path}")
        for option in generator.options(command):
            if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text):
                missing.append(f"firewall {path} {option}".replace("  ", " "))
    assert not missing, f"not described by hand in docs/: {missing}"


def test_the_generated_reference_has_every_command_and_option(generator: ModuleType) -> None:
    reference = generator.cli_reference()
    sections = dict(
        re.findall(r"^### `firewall ?([a-z ]*)`\n(.*?)(?=^### |\Z)", reference, re.M | re.S)
    )
    for path, command, _ in generator.commands():
        assert path in sections, path
        for option in generator.options(command):
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", sections[path]), (
                path,
                option,
            )


def test_every_exit_code_is_on_its_page() -> None:
    page = (DOCS / "reference" / "exit-codes.md").read_text()
    listed = {int(code) for code in re.findall(r"^\| `(\d+)` \|", page, re.M)}
    assert listed == {int(code) for code in ExitCode}


def test_the_readme_is_short_and_its_links_resolve() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 80, "the README is a front page; the rest is in docs/"
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if "://" not in target:
            assert (REPO / target).exists(), target


def markdown_tables(text: str) -> list[dict[str, list[Any]]]:
    """Every Markdown table in ``text``: its header cells and its rows of cells, parsed as
    `benchmarks/decisions.py --json` parses the tables it prints."""
    tables: list[dict[str, list[Any]]] = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.splitlines() if line.startswith("|")]
        if len(lines) >= 2 and set(lines[1]) <= set("|-: "):
            cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
            tables.append({"columns": cells[0], "rows": cells[2:]})
    return tables


def test_the_error_rates_are_the_benchmarks_output() -> None:
    """Issue 23, item 6: the figures on "Measured error rates" are the ones the procedure
    the runner really runs gave, Monte Carlo errors included: every table on the page is,
    cell for cell and in order, a table `benchmarks/decisions.py --json
    docs/data/decisions.json` printed, and the page names that run's command and load.
    Re-run the benchmark and paste its tables when the simulations or the rules change."""
    results = json.loads((DOCS / "data" / "decisions.json").read_text())
    page = (DOCS / "concepts" / "error-rates.md").read_text()
    assert markdown_tables(page) == results["tables"]
    assert all(table["rows"] for table in results["tables"])
    assert f"`{results['command']}`" in page
    assert f"{results['load_average']['before']:.1f}" in page
