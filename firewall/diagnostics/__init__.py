"""Diagnostics that explain an unstable probe: pure functions over its trials, no I/O.

Owns what a report says beyond the decision: the drift of each output field
(with its value distribution), the items (cases) that flip between pass and
fail, a short ranked list of likely causes each citing its numbers, the
budget metrics in the open, and the checklist line of one policy check.

``diagnose`` puts them together; the parts live in

- ``models.py``: the values handed out (``FieldDrift``, ``CaseFlip``, ``Hint``, ``Diagnosis``...);
- ``drift.py``: field drift and value display, flipping cases, budget metrics;
- ``causes.py``: the hint rules and their thresholds (the table of rules is its
  docstring), and Spearman's rank correlation they use;
- ``text.py``: one line of text per check, hint, flip or drifting field.

Import from ``firewall.diagnostics``; the submodules are an internal layout.
"""

from __future__ import annotations

from collections.abc import Sequence

from firewall.diagnostics.causes import hints, spearman
from firewall.diagnostics.drift import (
    DISPLAY_CHARS,
    MISSING_DISPLAY,
    budget_summary,
    case_flips,
    case_ids,
    field_drift,
    measured,
)
from firewall.diagnostics.models import CaseFlip, Cause, Diagnosis, FieldDrift, Hint, ValueCount
from firewall.diagnostics.text import describe_drift, describe_flip, describe_hint, format_check
from firewall.runner.trial import TrialRecord

__all__ = [
    "DISPLAY_CHARS",
    "MISSING_DISPLAY",
    "CaseFlip",
    "Cause",
    "Diagnosis",
    "FieldDrift",
    "Hint",
    "ValueCount",
    "budget_summary",
    "case_flips",
    "describe_drift",
    "describe_flip",
    "describe_hint",
    "diagnose",
    "field_drift",
    "format_check",
    "hints",
    "spearman",
]


def diagnose(
    trials: Sequence[TrialRecord], *, pass_score: float, with_hints: bool = True
) -> Diagnosis:
    """All the diagnostics of one probe; the hints (the costly part) only when asked."""
    drift = field_drift(trials)
    flips = case_flips(trials, pass_score=pass_score)
    return Diagnosis(
        trials=len(trials),
        measured=len(measured(trials)),
        cases=len(case_ids(trials)),
        drift=drift,
        flips=flips,
        hints=hints(trials, flips=flips, drift=drift) if with_hints else [],
        budgets=budget_summary(trials),
    )
