"""A provider's rate limit as token buckets: trials started per second, per bucket.

An eval's own ``rate`` is a bucket of its own; a ``[[limits]]`` entry is one
bucket shared by every eval carrying its tag (one provider, one limit). Every
trial of a run starts from one of the runner's slots, threads of the
orchestrator, so one ``Throttle`` in the runner is shared by every worker and
every command. A bucket holds at most a second's worth of starts (at least one),
so a suite never bursts past its rate; a trial waits for its token before it
starts, and the wait is neither its duration nor a retry: trials still never
retry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

Wait = Callable[[float], bool]
"""Sleep up to the seconds given; True when the run was stopped meanwhile."""


class _Bucket:
    def __init__(self, rate: float, clock: Callable[[], float]) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.tokens = self.capacity
        self.clock = clock
        self.updated = clock()

    def take(self) -> float:
        """0 when a token was taken; else how long until one is due."""
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class Throttle:
    """The run's buckets, by name."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}

    def wait(self, bucket: str | None, rate: float | None, sleep: Wait) -> float:
        """Block until ``bucket`` lets one more trial start; the seconds waited in all."""
        if bucket is None or rate is None or rate <= 0:
            return 0.0
        waited = 0.0
        while True:
            with self._lock:
                due = self._buckets.setdefault(bucket, _Bucket(rate, self._clock)).take()
            if due <= 0:
                return waited
            if sleep(due):
                return waited  # stopped: the trial will not run
            waited += due
