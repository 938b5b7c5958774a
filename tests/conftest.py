"""Keep every test off the machine: no GITHUB_* from the outside, paths in tmp_path."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from firewall.store.atomic import LOCK_DIR_VARIABLE


@pytest.fixture(autouse=True)
def clean_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No GITHUB_* or FIREWALL_* from the outside; every lock file in pytest's own temp tree.

    Lock files would otherwise go to the system temp directory, one per file a
    test locked; the variable reaches the installed command's processes too.
    They get a directory of their own beside the test's tmp_path, so that tests
    that list what a command wrote do not see them.
    """
    for name in list(os.environ):
        if name.startswith(("GITHUB_", "FIREWALL_", "RUNNER_")) or name in ("CI",):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(LOCK_DIR_VARIABLE, str(tmp_path_factory.mktemp("locks")))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty project directory that is also the working directory."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path
