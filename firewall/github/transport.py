"""How patiently one request to GitHub is made: its timeout, its few retries, its pacing.

What a whole run may spend on GitHub is ``budget``'s; this is the patience of a
single request inside it. Retries are few and short: after a 5xx or a dropped
connection, for reads and idempotent writes only, never after a timeout (a
server that gave no answer within ``timeout`` seconds will not give one in
the next ``timeout`` either, and the warning says what it cost), and never
waiting out a long rate limit.
"""

from __future__ import annotations

import dataclasses
from types import TracebackType

from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import MaxRetryError, ResponseError
from urllib3.exceptions import TimeoutError as Urllib3Timeout
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

MAX_WAIT_S = 10.0  # the longest a CI step waits on GitHub before giving up until the next run


@dataclasses.dataclass(frozen=True)
class Transport:
    """How patiently to talk to GitHub; the defaults suit a CI step, tests shrink them."""

    timeout: int = 10  # seconds per socket operation of a request; PyGithub takes whole seconds
    retries: int = 2  # after a 5xx or a dropped connection, reads and idempotent writes only
    backoff: float = 0.5  # seconds before the second retry, doubling, capped at MAX_WAIT_S
    request_gap: float = 0.25  # PyGithub's pacing between any two requests
    write_gap: float = 1.0  # GitHub asks for a second between writes (secondary rate limits)


DEFAULT_TRANSPORT = Transport()


class BoundedRetry(Retry):
    """urllib3's Retry that never sleeps longer than MAX_WAIT_S for one attempt, and never
    tries again after a timeout.

    A secondary rate limit says 403 or 429 with Retry-After: a short one is
    waited out, a long one ends the attempt at once, and PyGithub raises on
    the response it gets back (``raise_on_status=False``).
    """

    RETRY_AFTER_STATUS_CODES = frozenset({403, 429, 503})

    def get_backoff_time(self) -> float:
        return min(super().get_backoff_time(), MAX_WAIT_S)

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> BoundedRetry:
        if isinstance(error, Urllib3Timeout):  # requests says which timeout, as a RequestException
            raise MaxRetryError(_pool, url or "", error)  # type: ignore[arg-type]
        wait = self.get_retry_after(response) if response is not None else None
        if wait is not None and wait > MAX_WAIT_S:
            raise MaxRetryError(_pool, url or "", ResponseError(f"Retry-After {wait:.0f} s"))  # type: ignore[arg-type]
        return super().increment(method, url, response, error, _pool, _stacktrace)


def retry_for(transport: Transport) -> Retry:
    # POST is left out: a create that timed out may have happened, and retrying it
    # would open a duplicate; the next run finds the issue by its marker instead.
    return BoundedRetry(
        total=transport.retries,
        backoff_factor=transport.backoff,
        status_forcelist=(500, 502, 503, 504),
        allowed_methods=frozenset({"GET", "HEAD", "PATCH", "PUT", "DELETE"}),
        raise_on_status=False,
    )
