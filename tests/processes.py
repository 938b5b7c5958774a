"""Live processes, found as the tests that check nothing is left behind need them."""

from __future__ import annotations

import os
from pathlib import Path


def alive(marker: str) -> list[int]:
    """The pids of the live processes with an argument that starts with ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            arguments = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{name}/stat").read_bytes().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if any(a.startswith(marker.encode()) for a in arguments) and state not in (b"Z", b"X"):
            found.append(int(name))
    return found
