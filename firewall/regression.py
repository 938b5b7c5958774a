"""Regression against the default branch: did this change make the eval worse?

A pull request's probe of an eval is compared with the default branch's recent
runs of it (their means, from the history). Runs drift: a judge's mood, a
model's day, the seeds. So the test is not "this run against the pooled trials
of all earlier runs", which would call every drift a regression, but this run's
mean against the spread of earlier run means (a random-effects view: each run
mean is the eval's level plus a run effect plus its own trial noise). Under "no
regression" the new run mean m0 falls where the earlier ones fall:

    m0 ~ mu + run effect + trial noise,   predicted by the r earlier run means m_i:
    drop = mean(m_i) - m0
    se^2 = var(m_i) * (1 + 1/r)  +  max(0, s0^2/n0 - mean(s_i^2/n_i))
    t    = drop / se,  with r - 1 degrees of freedom (Student's t)

The last term widens the prediction when this run had fewer trials (more trial
noise) than the earlier ones. The drops of several evals are tested together
and corrected with Benjamini-Hochberg, so that twenty evals do not make one
false regression a day. The verdict:

- REGRESSION: the drop is significant after the correction and larger than
  ``max_drop``: a blocking failure, with the numbers;
- OK: the drop's upper confidence bound is within ``max_drop``;
- UNCLEAR: neither. More trials would narrow it; the verdict says which drop
  this many trials can detect.

Pure functions of numbers; Student's t comes from the regularized incomplete
beta function in plain Python (checked against scipy in the tests).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Literal

from firewall._stats import betainc

LEVEL = 0.05  # false discovery rate across the evals of one run
CONFIDENCE = 0.95  # one-sided, for the drop's upper bound
POWER = 0.8  # for the smallest drop this many trials can detect
MIN_RUNS = 3  # earlier runs of the default branch needed for any verdict

Verdict = Literal["regression", "ok", "unclear", "no-baseline"]


@dataclasses.dataclass(frozen=True)
class RunMean:
    """One run's probe of an eval: the mean of its scored trials, their sd and count."""

    mean: float
    sd: float
    n: int


@dataclasses.dataclass(frozen=True)
class Comparison:
    """This run against the default branch's recent runs, before the correction."""

    drop: float  # baseline mean minus this run's mean: positive is worse
    se: float
    df: int
    p: float  # one-sided: the chance of a drop this large with no regression
    upper: float  # the drop's one-sided upper confidence bound
    detectable: float  # the smallest drop this comparison detects with POWER
    runs: int


@dataclasses.dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reason: str
    comparison: Comparison | None = None


def compare(current: RunMean, baseline: Sequence[RunMean]) -> Comparison | None:
    """This run's mean against the earlier run means; None without MIN_RUNS of them."""
    if len(baseline) < MIN_RUNS:
        return None
    means = [run.mean for run in baseline]
    r = len(means)
    spread = statistics.variance(means)
    within = statistics.fmean(run.sd**2 / run.n for run in baseline if run.n > 0)
    extra = max(0.0, (current.sd**2 / current.n if current.n else 0.0) - within)
    se = math.sqrt(spread * (1 + 1 / r) + extra)
    drop = statistics.fmean(means) - current.mean
    df = r - 1
    if se == 0.0:
        p = 0.0 if drop > 0 else 1.0
        return Comparison(drop, 0.0, df, p, drop, 0.0, r)
    t_bound = t_quantile(CONFIDENCE, df)
    return Comparison(
        drop=drop,
        se=se,
        df=df,
        p=t_sf(drop / se, df),
        upper=drop + t_bound * se,
        detectable=(t_quantile(1 - LEVEL, df) + t_quantile(POWER, df)) * se,
        runs=r,
    )


def benjamini_hochberg(p_values: Mapping[str, float], level: float = LEVEL) -> set[str]:
    """The keys whose p-values the Benjamini-Hochberg procedure rejects at ``level``."""
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    m = len(ordered)
    cut = 0
    for rank, (_, p) in enumerate(ordered, start=1):
        if p <= rank / m * level:
            cut = rank
    return {key for key, _ in ordered[:cut]}


def judge(
    comparisons: Mapping[str, Comparison | None], max_drop: Mapping[str, float], base: str
) -> dict[str, Judgement]:
    """The verdict of each opted-in eval, the drops corrected across all of them."""
    tested = {k: c.p for k, c in comparisons.items() if c is not None}
    significant = benjamini_hochberg(tested)
    verdicts = {}
    for eval_id, comparison in comparisons.items():
        limit = max_drop[eval_id]
        if comparison is None:
            verdicts[eval_id] = Judgement(
                "no-baseline",
                f"no regression verdict: fewer than {MIN_RUNS} runs of {base} in the history",
            )
            continue
        numbers = (
            f"drop {comparison.drop:.3f} vs {base}'s last {comparison.runs} runs "
            f"(p = {comparison.p:.3g}, upper bound {comparison.upper:.3f})"
        )
        if eval_id in significant and comparison.drop > limit:
            verdicts[eval_id] = Judgement(
                "regression", f"regression: {numbers} > max_drop {limit:g}", comparison
            )
        elif comparison.upper <= limit:
            verdicts[eval_id] = Judgement("ok", f"no regression: {numbers}", comparison)
        else:
            verdicts[eval_id] = Judgement(
                "unclear",
                f"regression unclear: {numbers}; these trials detect drops of "
                f"{comparison.detectable:.3f} or more, max_drop is {limit:g}",
                comparison,
            )
    return verdicts


# --- Student's t, in plain Python -----------------------------------------------------


def t_sf(t: float, df: int) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    if t * t < df:  # near the centre: the mass between -t and t, from I_y(1/2, df/2)
        centre = 0.5 * betainc(0.5, df / 2, t * t / (df + t * t))
        return 0.5 - centre if t >= 0 else 0.5 + centre
    tail = 0.5 * betainc(df / 2, 0.5, df / (df + t * t))  # in the tails, from I_x(df/2, 1/2)
    return tail if t >= 0 else 1.0 - tail


@functools.lru_cache(maxsize=256)  # a run asks for a few levels at a few df, many times
def t_quantile(q: float, df: int) -> float:
    """The t with P(T <= t) = q, by bisection on ``t_sf`` (monotone, so it converges)."""
    low, high = -1e3, 1e3
    for _ in range(64):  # 2000 / 2**64: far below a float's resolution at these magnitudes
        middle = (low + high) / 2
        if 1.0 - t_sf(middle, df) < q:
            low = middle
        else:
            high = middle
    return (low + high) / 2
