"""Atomic writes: all or nothing, and the permissions a plain write would give."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from filelock import FileLock

from firewall.errors import LockError
from firewall.store.atomic import LOCK_DIR_VARIABLE, lock_path, locked, write_atomic


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


def test_locks_live_in_the_lock_directory_not_beside_the_file(tmp_path: Path) -> None:
    target = tmp_path / "quarantine.json"
    with locked(target, "quarantine registry"):
        held = lock_path(target)
        assert held.exists()
    assert held.parent == Path(os.environ[LOCK_DIR_VARIABLE])
    assert not held.is_relative_to(tmp_path) and list(tmp_path.iterdir()) == []


def test_a_lock_held_elsewhere_times_out_with_a_message_that_says_what_to_do(
    tmp_path: Path,
) -> None:
    target = tmp_path / "quarantine.json"
    other = FileLock(lock_path(target))  # another process's lock, as far as filelock can tell
    with other, pytest.raises(LockError) as caught, locked(target, "registry", timeout=0.05):
        pass
    message = str(caught.value)
    assert message.startswith(f"{target}: could not lock the registry within 0.05 s")
    assert str(lock_path(target)) in message and "wait for it to finish" in message
    assert caught.value.exit_code == 2
