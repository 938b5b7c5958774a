"""What a trial executor hands back: the eval's payload, or why there is none."""

from __future__ import annotations

import dataclasses
import signal
from typing import Any

from firewall.text import one_line

STDERR_TAIL_CHARS = 800


@dataclasses.dataclass
class Outcome:
    payload: Any = None
    error: str | None = None


def tail(stderr: bytes) -> str:
    """'; stderr: ...' with the last lines of stderr, or '' when there was none."""
    text = one_line(stderr.decode("utf-8", "replace"))  # a reason is one line
    if not text:
        return ""
    if len(text) > STDERR_TAIL_CHARS:
        text = "…" + text[-STDERR_TAIL_CHARS:]
    return f"; stderr: {text}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
