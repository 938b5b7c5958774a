"""Statistics over a probe's trials: pure functions, no I/O.

Also the public helpers users call from their own evals (``firewall.stats``):
the Wilson interval, the IQR, the drift rate and Cohen's kappa.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from statistics import NormalDist

from pydantic import BaseModel, ConfigDict

__all__ = [
    "EPSILON",
    "Stats",
    "cohen_kappa",
    "drift_rate",
    "iqr",
    "percentile",
    "quartiles",
    "summarize",
    "wilson_interval",
]

EPSILON = 1e-9
"""Floating-point slack in every comparison of a statistic with a setting."""


class Stats(BaseModel):
    """The numbers a decision is taken on. Score statistics are None when no trial scored."""

    model_config = ConfigDict(extra="forbid")

    median: float | None = None
    q1: float | None = None
    q3: float | None = None
    iqr: float | None = None
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    pass_rate: float | None = None
    wilson_low: float | None = None
    wilson_high: float | None = None
    errors: int = 0
    p50_latency_ms: float | None = None
    p95_latency_ms: float | None = None
    mean_tokens: float | None = None
    mean_cost_usd: float | None = None


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile by linear interpolation, as ``numpy.percentile`` computes it.

    The same operations in the same order as numpy's default ("linear")
    method, so the results agree to the last bit; in plain Python, because a
    probe has a handful of scores and numpy's call overhead is 30 times the
    arithmetic (it showed at a thousand evals per run).
    """
    ordered = sorted(float(v) for v in values)
    if not ordered:
        raise ValueError("percentile of no values")
    return _interpolate(ordered, q)


def _interpolate(ordered: Sequence[float], q: float) -> float:
    last = len(ordered) - 1
    virtual = last * (q / 100)
    if virtual >= last:
        return ordered[-1]
    if virtual < 0:
        return ordered[0]
    below = math.floor(virtual)
    a, b = ordered[below], ordered[below + 1]
    t = virtual - below
    # numpy's _lerp: from the nearer end, for the same rounding.
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """Q1, median and Q3 by linear interpolation (numpy's default method)."""
    ordered = sorted(float(v) for v in values)
    if not ordered:
        raise ValueError("quartiles of no values")
    return _interpolate(ordered, 25), _interpolate(ordered, 50), _interpolate(ordered, 75)


def iqr(values: Sequence[float]) -> float:
    """The interquartile range Q3 - Q1."""
    q1, _, q3 = quartiles(values)
    return q3 - q1


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion; (0, 1) when there are no trials."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes}/{trials}")
    if trials == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    # At 0/n and n/n the bound is exactly 0 or 1; float rounding must not move it off p.
    low = 0.0 if successes == 0 else max(0.0, float(centre - half))
    high = 1.0 if successes == trials else min(1.0, float(centre + half))
    return low, high


def drift_rate(values: Sequence[Hashable]) -> float:
    """The share of values that disagree with the most common one (0.0 for no values)."""
    if not values:
        return 0.0
    most_common = Counter(values).most_common(1)[0][1]
    return 1 - most_common / len(values)


def cohen_kappa(rater_a: Sequence[Hashable], rater_b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters over the same cases.

    Returns None when kappa is undefined: chance agreement P_e = 1, which
    happens when both raters use one and the same label throughout. Reporting
    that as 1.0 would call a judge calibrated on evidence that cannot tell.
    """
    if len(rater_a) != len(rater_b):
        raise ValueError(f"raters labelled {len(rater_a)} and {len(rater_b)} cases")
    n = len(rater_a)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(rater_a, rater_b, strict=True)) / n
    counts_a, counts_b = Counter(rater_a), Counter(rater_b)
    expected = sum(counts_a[label] * counts_b[label] for label in counts_a) / (n * n)
    if abs(1 - expected) < EPSILON:
        return None
    return (observed - expected) / (1 - expected)


def summarize(
    scores: Sequence[float],
    passes: Sequence[bool],
    *,
    errors: int,
    confidence: float,
    latencies_ms: Sequence[float] = (),
    tokens: Sequence[float] = (),
    costs_usd: Sequence[float] = (),
) -> Stats:
    """All the statistics of one probe, from the trials that did not error."""
    stats = Stats(errors=errors)
    if scores:
        q1, median, q3 = quartiles(scores)
        stats.median, stats.q1, stats.q3, stats.iqr = median, q1, q3, q3 - q1
        stats.mean = math.fsum(scores) / len(scores)
        stats.min, stats.max = float(min(scores)), float(max(scores))
    if passes:
        successes = sum(passes)
        stats.pass_rate = successes / len(passes)
        stats.wilson_low, stats.wilson_high = wilson_interval(successes, len(passes), confidence)
    if latencies_ms:
        stats.p50_latency_ms = percentile(latencies_ms, 50)
        stats.p95_latency_ms = percentile(latencies_ms, 95)
    if tokens:
        stats.mean_tokens = math.fsum(tokens) / len(tokens)
    if costs_usd:
        stats.mean_cost_usd = math.fsum(costs_usd) / len(costs_usd)
    return stats
