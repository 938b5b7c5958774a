"""Writing files so that a reader never sees half of one: temp file, fsync, os.replace."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from firewall.errors import LockError

LOCK_TIMEOUT_S = 60.0
LOCK_DIR_VARIABLE = "FIREWALL_LOCK_DIR"


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step; on any failure the old file stays."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))  # mkstemp makes 0600; keep what a plain write would give
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _mode_for(path: Path) -> int:
    """The file's current permissions, or those a new file gets under the umask."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def lock_path(path: Path) -> Path:
    """Where the lock of ``path`` lives: ``$FIREWALL_LOCK_DIR``, else the temp directory.

    Keyed by the file's absolute path, so that no ``.lock`` file appears in the
    user's repository and every process on the machine finds the same lock.
    """
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    directory = os.environ.get(LOCK_DIR_VARIABLE) or tempfile.gettempdir()
    return Path(directory) / f"firewall-{key}.lock"


@contextlib.contextmanager
def locked(path: Path, what: str, *, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the lock that serialises every writer of ``path`` on this machine."""
    lock = FileLock(lock_path(path))
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise LockError(
            f"{path}: could not lock the {what} within {timeout:g} s; another firewall "
            f"process holds {lock.lock_file}: wait for it to finish, or end it if it is stuck"
        ) from None
    try:
        yield
    finally:
        lock.release()
