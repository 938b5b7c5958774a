"""The package, its tests and its benchmarks type-check under `mypy --strict`, as CI's lint job
checks them: `[tool.mypy]` in pyproject.toml says what and how."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ("firewall", "tests", "benchmarks")


def test_the_package_its_tests_and_its_benchmarks_type_check() -> None:
    # mypy's own cache (.mypy_cache, as `mypy` on the command line keeps it): a second run
    # re-reads only what changed.
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    # Every module of the three, not only those the package reaches: a test file left out
    # of `files` would pass unseen.
    modules = sum(1 for root in CHECKED for _ in (REPO / root).rglob("*.py"))
    checked = re.search(r"Success: no issues found in (\d+) source files", result.stdout)
    assert checked is not None, said
    assert int(checked.group(1)) == modules, said
