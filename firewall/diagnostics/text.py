"""The diagnostics as text: the checklist line of a policy check, and one line per finding.

Every renderer (terminal, JUnit, step summary, issue, HTML) uses these, so a
finding reads the same wherever it is shown.
"""

from __future__ import annotations

import re

from firewall.diagnostics.models import CaseFlip, FieldDrift, Hint
from firewall.policy import Check
from firewall.text import fmt

_NEGATED = {"<=": ">", ">=": "<", "<": ">=", ">": "<=", "==": "!=", "=": "!=", "!=": "="}
_OPERATOR = re.compile(r"^(<=|>=|==|!=|<|>|=)\s*(.*)$", re.DOTALL)


def format_check(check: Check) -> str:
    """One checklist line, actual against allowed: ``ok   iqr 0.012 <= 0.03``.

    A failed check shows the operator that did hold (``FAIL median 0.61 < 0.85``).
    An allowed value without an operator ("none") is shown in brackets; a check with none
    at all reads as a count (a plain test's ``FAIL flaky: passed 6, failed 1 of 7``).
    """
    mark = "ok  " if check.ok else "FAIL"
    if not check.allowed:
        return f"{mark} {check.name}: {check.actual}"
    match = _OPERATOR.match(check.allowed)
    if match is None:
        if check.ok and check.actual == check.allowed:
            return f"{mark} {check.name} {check.actual}"
        return f"{mark} {check.name} {check.actual} (allowed {check.allowed})"
    operator, bound = match.groups()
    shown = operator if check.ok else _NEGATED[operator]
    return f"{mark} {check.name} {check.actual} {shown} {bound}"


def describe_hint(hint: Hint) -> str:
    """One line: the cause, then its evidence."""
    return f"{hint.cause}: {hint.evidence}"


def describe_flip(flip: CaseFlip) -> str:
    return f"{flip.case} passed {flip.passes}/{flip.trials}"


def describe_drift(entry: FieldDrift, *, values: int = 3) -> str:
    """``category 0.43 ("billing" x4, "refund" x3)``, the most common values first."""
    shown = ", ".join(f"{v.display} x{v.count}" for v in entry.distribution[:values])
    more = f", +{len(entry.distribution) - values} more" if len(entry.distribution) > values else ""
    return f"{entry.name} {fmt(entry.drift)} ({shown}{more})"
