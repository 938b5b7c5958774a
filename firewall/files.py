"""Reading a file that anyone may have put anything at: bounded in time and in memory.

An eval writes its result where it likes, and a user's repository holds what it
holds: a FIFO (``mkfifo "$FIREWALL_RESULT"``) whose open or read waits for a
writer that never comes, a link to ``/dev/zero`` that never ends, a 3 GB file.
So a file is opened without blocking (``O_NONBLOCK``: a FIFO's open returns at
once), refused unless ``fstat`` on the open descriptor says it is a regular file
(the file read is the file checked: no race with a rename), refused when it is
larger than its cap, and read for at most ``cap + 1`` bytes, so that a file
growing while it is read is refused too, before its memory is spent.

The errors are the caller's to word: ``Refused`` carries what is wrong with the
file as the end of a sentence that begins with its name; an ``OSError`` of the
open or the read is the caller's to name too (``os_reason``).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_CHUNK = 1 << 20


class Refused(Exception):
    """The file is not one to read: not a regular file, or larger than its cap. The
    message follows the file's name: ``"is a FIFO, not a regular file"``."""


def size_text(count: int) -> str:
    """A byte count as people read it: ``64 MiB``, ``3.0 GiB``, ``512 bytes``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            value = count / (1 << shift)
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{count} bytes"


def open_regular(path: Path | str) -> int:
    """A descriptor of the regular file at ``path``, opened without waiting for anyone.

    ``Refused`` when it is anything else; ``OSError`` (``FileNotFoundError`` too)
    when it cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), None)
            raise Refused(f"is {kind}, not a regular file" if kind else "is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_capped(path: Path | str, cap: int) -> bytes:
    """The bytes of the regular file at ``path``: ``Refused`` when it is no regular file
    or holds more than ``cap`` bytes, ``OSError`` when it cannot be read."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > cap:
            raise Refused(f"is {size_text(size)}, more than the {size_text(cap)} it may be")
        chunks = []
        total = 0
        while total <= cap:
            chunk = os.read(fd, min(_CHUNK, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > cap:  # it grew while it was read
            raise Refused(f"is more than the {size_text(cap)} it may be")
        return b"".join(chunks)
    finally:
        os.close(fd)


def lines_capped(fd: int, cap: int) -> Iterator[bytes | None]:
    """The lines of the file open as ``fd``, each with its newline (the last may lack one),
    read in bounded chunks; a line of more than ``cap`` bytes before its newline is given
    as None, its bytes dropped as they are read, so that one endless line costs ``cap``."""
    pending = bytearray()
    overlong = False
    while chunk := os.read(fd, _CHUNK):
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if overlong or len(pending) + end - start > cap:
                yield None
            else:
                yield bytes(pending) + chunk[start : end + 1]
            pending.clear()
            overlong = False
            start = end + 1
        if not overlong:
            pending += chunk[start:]
            if len(pending) > cap:
                pending.clear()
                overlong = True
    if overlong:
        yield None
    elif pending:
        yield bytes(pending)


def os_reason(exc: OSError) -> str:
    """An OS error as a message says it: its text and its name (``Permission denied, EACCES``)."""
    text = exc.strerror or str(exc) or type(exc).__name__
    name = errno.errorcode.get(exc.errno or 0)
    return f"{text}, {name}" if name else text
