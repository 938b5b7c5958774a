"""Keep every test off the machine: no GITHUB_* from the outside, paths in tmp_path."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("GITHUB_", "FIREWALL_", "RUNNER_")) or name in ("CI",):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty project directory that is also the working directory."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path
