"""Warnings about settings that make a gate impossible or meaningless."""

from __future__ import annotations

from firewall.policy import fmt
from firewall.spec import EvalSpec
from firewall.stats import wilson_interval

MAX_SUGGESTED_K = 10_000


def warnings_for(spec: EvalSpec) -> list[str]:
    notes = []
    if spec.min_pass_rate is not None:
        best = wilson_interval(spec.k, spec.k, spec.confidence)[0]
        if best < spec.min_pass_rate:
            needed = smallest_k(spec.min_pass_rate, spec.confidence)
            advice = f"; k >= {needed} can meet it" if needed else "; no k can meet it"
            notes.append(
                f"min_pass_rate {fmt(spec.min_pass_rate)} cannot be met with k={spec.k}: the "
                f"Wilson lower bound is at most {fmt(best)} even at {spec.k}/{spec.k}{advice}"
            )
    if spec.max_errors >= spec.k:
        notes.append(
            f"max_errors {spec.max_errors} >= k={spec.k}: an eval whose every trial "
            "errors is still ERROR, so this tolerance is never the deciding rule"
        )
    return notes


def smallest_k(min_pass_rate: float, confidence: float) -> int | None:
    """The fewest trials whose perfect record reaches ``min_pass_rate`` at ``confidence``."""
    low, high = 1, MAX_SUGGESTED_K
    if wilson_interval(high, high, confidence)[0] < min_pass_rate:
        return None
    while low < high:
        middle = (low + high) // 2
        if wilson_interval(middle, middle, confidence)[0] >= min_pass_rate:
            high = middle
        else:
            low = middle + 1
    return low
