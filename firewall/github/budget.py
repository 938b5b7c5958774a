"""The time GitHub may cost one run: one budget that all its calls share, held by a deadline.

A CI step must not hang on GitHub, and requests' ``timeout`` cannot promise
that: it bounds each socket operation, not an answer. A server (or a proxy in
the way) that sends its headers and then one byte every few seconds never
trips it, and neither do a DNS lookup that stalls, PyGithub's pacing between
requests, or urllib3's back-off between retries.

So every call into PyGithub runs in a worker thread of its own, and the caller
waits for it no longer than what is left of the budget (``Budget.run``). A call
still running at the deadline is abandoned: the run goes on at once and says
so, and everything GitHub was still to do this run is skipped. The abandoned
thread is a daemon, so the process exits without waiting for it; before each
request PyGithub asks the token for its header (``Auth.authentication``), where
``Budget.check`` stops such a thread from sending anything more. A write it had
already sent may still land: the next run finds that issue by its marker.

Why a thread and not a deadline on the socket: PyGithub owns its requests
session, and reaching the socket of a request in progress would mean patching
PyGithub's or urllib3's internals; a thread bounds every way a call can stall,
including the ones no socket sees.

The budget counts only the time spent in calls: a nightly that asks GitHub for
its candidates, then probes for an hour, then updates the issues has the whole
budget for the two together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from firewall.errors import IssueError

T = TypeVar("T")

DEFAULT_BUDGET_S = 30.0
SETTING = "`[github] budget`"


class BudgetSpent(IssueError):
    """The run's time for GitHub is used up: the call under way and all after it are skipped.

    ``cut_off``: a call was under way and was abandoned (else the budget had run out
    before it began). ``action`` names the call, once ``client.Session.calling`` knows it.
    """

    def __init__(self, *, seconds: float, cut_off: bool, action: str | None = None) -> None:
        self.seconds, self.cut_off, self.action = seconds, cut_off, action
        budget = f"this run's {seconds:g} s for GitHub ({SETTING})"
        if cut_off:
            said = f"GitHub had not finished when {budget} ran out"
            said += f", while the firewall tried to {action}" if action else ""
        else:
            said = f"{budget} had run out"
            said += f" before the firewall could {action}" if action else ""
        super().__init__(said)

    def doing(self, action: str) -> BudgetSpent:
        """The same, naming the call it stopped."""
        return BudgetSpent(seconds=self.seconds, cut_off=self.cut_off, action=action)


def spent_warning(exc: BudgetSpent, skipped: str | None) -> str:
    """The one warning of a run whose time for GitHub ran out; ``skipped`` says what of
    the work under way was left undone (e.g. "the issues of a, b")."""
    named = f" ({skipped})" if skipped else ""
    return (
        f"{exc}; skipped the rest of this run's GitHub work{named}; the decision and exit "
        f"code stand, and the next run catches up; if GitHub is only slow, raise {SETTING}"
    )


class Budget:
    """The seconds all GitHub calls of one run may take together."""

    def __init__(
        self, seconds: float = DEFAULT_BUDGET_S, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not seconds > 0:
            raise ValueError(f"a budget is a number of seconds above 0, got {seconds!r}")
        self.seconds = seconds
        self._clock = clock
        self._spent = 0.0
        self._deadline: float | None = None  # of the call under way
        self._inside = threading.local()

    def __repr__(self) -> str:
        return f"Budget({self.seconds:g} s, {self.remaining():.1f} s left)"

    def remaining(self) -> float:
        return max(0.0, self.seconds - self._spent)

    @property
    def spent(self) -> bool:
        return self.remaining() <= 0

    def check(self) -> None:
        """Raise ``BudgetSpent`` once the deadline has passed; PyGithub calls it before each
        request, so an abandoned call sends nothing more."""
        now = self._clock()
        if self.spent or (self._deadline is not None and now >= self._deadline):
            raise BudgetSpent(seconds=self.seconds, cut_off=True)

    def run(self, call: Callable[[], T]) -> T:
        """``call()``, given up on when the budget runs out before it returns.

        Whatever ``call`` raises is raised here. A call inside a call runs as part of the
        outer one (it is already in the worker, and its time already counted).
        """
        if getattr(self._inside, "running", False):
            return call()
        if self.spent:
            raise BudgetSpent(seconds=self.seconds, cut_off=False)
        results: list[T] = []
        errors: list[BaseException] = []

        def work() -> None:
            self._inside.running = True
            try:
                results.append(call())
            except BaseException as exc:  # handed to the caller, who decides
                errors.append(exc)

        worker = threading.Thread(target=work, name="firewall-github-call", daemon=True)
        started = self._clock()
        self._deadline = started + self.remaining()
        try:
            worker.start()
            worker.join(self.remaining())
        finally:
            self._spent += self._clock() - started
            self._deadline = None
        if errors:
            raise errors[0]
        if not results:  # still running: abandoned, and nothing more is sent this run
            self._spent = self.seconds
            raise BudgetSpent(seconds=self.seconds, cut_off=True)
        return results[0]
