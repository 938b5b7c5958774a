"""A provider's rate limit: trial starts per sliding second, per bucket, taken where they start.

An eval's own ``rate`` is a bucket of its own; a ``[[limits]]`` entry is one
bucket shared by every eval carrying its tag (one provider, one limit). ``rate``
counts trials, not the model calls a trial makes.

A bucket never lets more than ``rate`` trials start in any one-second window,
from the first second on: it is the log of the bucket's last ``starts`` start
times, and a trial starts only once the oldest of them is a ``window`` old
(``meter``; the window is kept 50 ms longer, ``_worker.SLACK_S``, for the moment
between a token and the eval's first instruction). A token bucket that starts full
lets a second's worth go at once and then ``rate`` more within the same second; this
one does not.

The token is taken where the trial really starts, not when it leaves its slot:
a Python trial takes it in its worker, after the worker has booted and imported
the eval's module, just before the eval is called (so trials queued behind a
boot do not hold tokens and then start together); a command trial takes it in
its slot just before the shell is spawned. Workers are processes of their own,
so the log is a small file in the run's scratch directory, read and written
under ``flock`` (``_worker.try_start``, the one implementation, which a worker
runs without importing the package). The wait is neither the trial's duration
nor a retry, and it does not count against its timeout.
"""

from __future__ import annotations

import math
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from firewall.runner._worker import new_log, try_start

__all__ = ["Meter", "Throttle", "meter"]

Meter = tuple[str, int, float]
"""A bucket's start log as a worker takes it: its file, how many starts, the window."""

Wait = Callable[[float], bool]
"""Sleep up to the seconds given; True when the run was stopped meanwhile."""


def meter(rate: float) -> tuple[int, float]:
    """``(starts, window)``: at most ``starts`` trials start in any ``window`` seconds.

    A whole number per second is exactly that many per sliding second; a rate that is
    not is rounded down within each second (``2.5/s`` lets two start per second), and
    one below 1/s spaces single starts ``1 / rate`` apart.
    """
    starts = max(1, math.floor(rate + 1e-9))
    return starts, max(1.0, starts / rate)


class Throttle:
    """The run's buckets, by name: each a start log in ``directory``."""

    def __init__(
        self, directory: Path | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._directory = directory
        self._clock = clock
        self._lock = threading.Lock()
        self._meters: dict[str, Meter] = {}

    def meter(self, bucket: str | None, rate: float | None) -> Meter | None:
        """What a worker needs to take this bucket's token itself; None: no limit."""
        if bucket is None or rate is None or rate <= 0:
            return None
        found = self._meters.get(bucket)
        if found is not None:
            return found
        with self._lock:
            found = self._meters.get(bucket)
            if found is None:
                if self._directory is None:
                    self._directory = Path(tempfile.mkdtemp(prefix="firewall-rate-"))
                starts, window = meter(rate)
                path = self._directory / f"rate-{len(self._meters)}"
                new_log(str(path), starts)
                found = self._meters[bucket] = (str(path), starts, window)
        return found

    def wait(self, bucket: str | None, rate: float | None, sleep: Wait) -> float:
        """Block until ``bucket`` lets one more trial start here; the seconds waited in all."""
        found = self.meter(bucket, rate)
        if found is None:
            return 0.0
        waited = 0.0
        while True:
            due = try_start(*found, self._clock)
            if due <= 0:
                return waited
            if sleep(due):
                return waited  # stopped: the trial will not run
            waited += due
