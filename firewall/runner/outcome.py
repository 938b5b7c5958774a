"""What a trial executor hands back: the eval's payload, or why there is none."""

from __future__ import annotations

import dataclasses
import signal
from typing import Any

from firewall.runner.judgement import Judged
from firewall.runner.junit import Case
from firewall.text import one_line

STDERR_TAIL_CHARS = 800


OUTPUT_TAIL_CHARS = 2000


@dataclasses.dataclass
class Outcome:
    payload: Any = None
    error: str | None = None
    traceback: str | None = None  # a Python eval's own frames, when it raised
    output: str | None = None  # the tail of what the trial printed, when it errored
    import_s: float | None = None  # the worker imported the eval's module for this trial
    call_s: float | None = None  # a Python eval's call alone, timed in its worker
    boot_s: float | None = None  # the worker booted for this trial
    blocked_s: float | None = None  # an async trial held its worker's event loop this long
    cases: list[Case] | None = None  # a JUnit suite's test cases, one run of them
    worker_lost: bool = False  # the trial killed its worker process, or it died under it
    judged: Judged | None = None  # an eval with a judge: its output and the judgements


def output_tail(stdout: bytes, stderr: bytes = b"") -> str:
    """The last of what a trial printed, stdout then stderr, each labelled when both spoke."""
    parts = []
    for label, data in (("stdout", stdout), ("stderr", stderr)):
        text = data.decode("utf-8", "replace").rstrip()
        if text:
            if len(text) > OUTPUT_TAIL_CHARS:
                text = "…" + text[-OUTPUT_TAIL_CHARS:]
            parts.append((label, text))
    if len(parts) == 1:
        return parts[0][1]
    return "\n".join(f"--- {label} ---\n{text}" for label, text in parts)


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
