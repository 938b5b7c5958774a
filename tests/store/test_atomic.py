"""Atomic writes: all or nothing, and the permissions a plain write would give."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from firewall.store.atomic import write_atomic


def test_a_new_file_gets_the_umask_permissions(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "report.json", "{}\n")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "report.json").stat().st_mode) == 0o644


def test_an_existing_file_keeps_its_permissions(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.json"
    path.write_text("old")
    path.chmod(0o664)
    write_atomic(path, "new")
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o664


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.json"
    path.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(path, "\udcff")  # a lone surrogate cannot be encoded
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["quarantine.json"]
