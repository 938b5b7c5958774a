"""Writing files so that a reader never sees half of one, and the locks that serialise writers.

A file is replaced in one step (temp file, fsync, ``os.replace``) or appended to
in one write that is cut back when it fails part-way: whole, or not at all. Any
OS error on the way is a ``WriteError`` whose one line names the file, says
what is left of it and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from firewall.errors import LockError, WriteError

LOCK_TIMEOUT_S = 60.0
LOCK_POLL_S = 0.05
LOCK_DIR_VARIABLE = "FIREWALL_LOCK_DIR"


def write_atomic(path: Path, text: str, *, what: str = "file") -> None:
    """Replace ``path`` with ``text`` in one step; on any failure the old file stays.

    ``what`` names the file in the error (``"quarantine registry"``).
    """
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _write_error(path, what, exc, existed=existed) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            # mkstemp makes 0600; keep what a plain write would give.
            os.fchmod(handle.fileno(), _mode_for(path))
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise _write_error(path, what, exc, existed=existed) from exc
        raise


def _write_error(path: Path, what: str, exc: OSError, *, existed: bool) -> WriteError:
    left = "the file was left as it was" if existed else "no file was written"
    return WriteError(
        f"{path}: could not write the {what} ({_reason(exc)}); {left}; {advice(exc)}", path=path
    )


def append_whole(path: Path, data: bytes, *, what: str) -> None:
    """Append ``data`` to ``path`` in one write with ``O_APPEND``: whole, or not at all.

    A write that fails part-way (a full disk, a file-size limit) is cut back to
    the size the file had before it, so that whoever reads the file next (the
    GitHub runner reads ``$GITHUB_OUTPUT`` when the step ends) never meets half
    a block: for the step outputs, a heredoc without its closing delimiter,
    which the runner rejects, failing the step.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as exc:
        raise WriteError(
            f"{path}: could not append the {what} ({_reason(exc)}); nothing of it was written; "
            f"{advice(exc)}",
            path=path,
        ) from exc
    try:
        size = os.fstat(fd).st_size
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            raise _append_error(path, what, exc, fd, size, torn=len(view) < len(data)) from exc
    finally:
        os.close(fd)


def _append_error(
    path: Path, what: str, exc: OSError, fd: int, size: int, *, torn: bool
) -> WriteError:
    left = "nothing of it was written"
    if torn:
        try:
            os.ftruncate(fd, size)
        except OSError:
            left = f"it could not be cut back, so the file may end in a part of the {what}"
        else:
            left = "what it had written was cut back, so the file is as it was"
    return WriteError(
        f"{path}: could not append the {what} ({_reason(exc)}); {left}; {advice(exc)}", path=path
    )


def advice(exc: OSError) -> str:
    """What a person can do about ``exc``, an error writing a file."""
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        return "free space on its disk (or raise the quota) and run again"
    if code == errno.EFBIG:
        return "the file is over this process's file-size limit: raise it (`ulimit -f`)"
    if code in (errno.EACCES, errno.EPERM):
        return (
            "make the file and its directory writable for this user "
            "(an immutable file shows `i` in `lsattr` and needs `chattr -i`)"
        )
    if code == errno.EROFS:
        return "its file system is mounted read-only: point the firewall at a writable place"
    if code in (errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENOENT):
        return "its path must name a file in a directory: fix the path, or move what is in the way"
    return "check the file, its directory and its disk, and run again"


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _mode_for(path: Path) -> int:
    """The file's current permissions, or those a new file gets under the umask."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def lock_path(path: Path) -> Path:
    """Where the lock of ``path`` lives: beside it, as ``.NAME.lock``; or in
    ``$FIREWALL_LOCK_DIR`` when that is set, keyed by the file's absolute path.

    Beside the file, because whoever may replace the file (a temp file in its
    directory, then ``os.replace``) may create a file there too: no lock depends
    on a directory another user owns, as a shared temp directory is once root
    has left a lock file in it. The lock file exists only while it is held.
    """
    directory = os.environ.get(LOCK_DIR_VARIABLE)
    if not directory:
        return path.parent / f".{path.name}.lock"
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return Path(directory) / f"firewall-{key}.lock"


@contextlib.contextmanager
def locked(path: Path, what: str, *, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the lock that serialises every writer of ``path``."""
    lock_file = lock_path(path)
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        release = _acquire(lock_file, timeout)
    except _TimedOut:
        raise LockError(
            f"{path}: could not lock the {what} within {timeout:g} s; another firewall "
            f"process holds {lock_file}: wait for it to finish, or end it if it is stuck"
        ) from None
    except OSError as exc:
        if lock_file.exists():
            what_to_do = (
                "it was left by a process that was killed, or belongs to another user: "
                "remove it when no firewall process is running"
            )
        elif os.environ.get(LOCK_DIR_VARIABLE):
            what_to_do = f"${LOCK_DIR_VARIABLE} must name a directory this user can write"
        else:
            what_to_do = f"it goes beside the {what}, whose directory must be writable to change it"
        raise LockError(
            f"{path}: could not lock the {what}: its lock file {lock_file} cannot be made "
            f"({_reason(exc)}); {what_to_do}"
        ) from exc
    try:
        yield
    finally:
        release()


class _TimedOut(Exception):
    """The lock was still held by another process when the time ran out."""


if sys.platform == "win32":  # pragma: no cover - CI runs on Linux
    from filelock import FileLock, Timeout

    def _acquire(lock_file: Path, timeout: float) -> Callable[[], None]:
        # Windows refuses to delete an open file, so a holder cannot take the file from
        # under a waiter: filelock's lock, which deletes it after release, is safe there.
        lock = FileLock(lock_file)
        try:
            lock.acquire(timeout=timeout)
        except Timeout:
            raise _TimedOut from None
        return lock.release

else:
    import fcntl

    _OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW

    def _acquire(lock_file: Path, timeout: float) -> Callable[[], None]:
        """``flock`` the lock file, which its holder removes before letting it go.

        Removing it is what keeps lock files from piling up (and a killed root
        process's from locking every other user out), and it is why a lock just
        won is checked: a waiter may have opened the file before its holder
        removed it, and win the lock of a file the path no longer names, while a
        third process holds the path's new file. Then it starts again. (filelock
        keeps its lock files for this reason, and before 3.20.4 does not check.)
        """
        deadline = time.monotonic() + timeout
        while True:
            fd = os.open(lock_file, _OPEN_FLAGS, 0o666)
            try:
                _wait_for(fd, deadline)
                if _names(lock_file, fd):
                    return functools.partial(_release, lock_file, fd)
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)

    def _wait_for(fd: int, deadline: float) -> None:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                raise _TimedOut
            time.sleep(LOCK_POLL_S)

    def _names(lock_file: Path, fd: int) -> bool:
        """Whether the path still names the file open as ``fd``."""
        try:
            return os.path.samestat(os.stat(lock_file), os.fstat(fd))
        except FileNotFoundError:
            return False

    def _release(lock_file: Path, fd: int) -> None:
        # Removed while still held, so that no waiter can win a file that is about to go.
        try:
            if _names(lock_file, fd):
                os.unlink(lock_file)
        except OSError:
            pass  # a lock file left behind is only clutter: the next holder removes it
        finally:
            os.close(fd)  # which lets the lock go
