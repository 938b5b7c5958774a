"""Regression against the default branch: did this change make the eval worse than allowed?

A pull request's probe of an eval is compared with the default branch's recent
runs of it (their means, sds and trial counts, from the history). Each run mean
is the eval's level, plus a run effect (drift: a judge's mood, a model's day),
plus the noise of its own trials:

    m_i = mu + b_i + e_i,   var(b_i) = tau^2,   var(e_i) = sigma_i^2 / n_i

The drop d = mean(m_i) - m_0 then has the variance

    se^2 = B / r  +  tau^2  +  s_0^2 / n_0

where B is the sample variance of the r earlier run means (it estimates tau^2
plus their trial noise, so B / r is the variance of their mean), tau^2 is
estimated as B minus the earlier runs' own trial noise W = mean(s_i^2 / n_i)
(never below 0), and s_0^2 / n_0 is this run's trial noise. Only the last term
shrinks with this run's trials: B / r + tau^2 is the floor that drift and the
baseline set, and more trials are asked for only where they move the standard
error off that floor. The degrees of freedom are Satterthwaite's for that sum
of variance estimates.

The hypothesis is the tolerance's, as a non-inferiority trial states it:

    H0: drop <= max_drop     against     H1: drop > max_drop
    t = (d - max_drop) / se,  p = P(T > t)

so a drop the eval tolerates fails at most LEVEL of the time, whatever it is up
to max_drop. The p-values of one run's evals are corrected together with
Benjamini-Hochberg. A run may look twice (after adding trials to the unclear
evals), so LEVEL is split over the looks: each at LEVEL / LOOKS, the second
only over the evals it extended. Trials are added only where they can help:
where max_k of them would cut the standard error by a tenth or more, and then
either a drop within max_drop could be shown to be, or the drop seen is
already beyond max_drop.
The verdict:

- REGRESSION: the drop is significantly larger than ``max_drop`` after the
  correction: a blocking failure, with the numbers;
- OK: the drop's one-sided upper confidence bound is within ``max_drop``;
- UNCLEAR: neither. It says which drop these trials detect with POWER, at the
  level Benjamini-Hochberg applies to one regression among the evals tested
  (LEVEL / LOOKS / m), or that drift limits what any number of trials could.

Pure functions of numbers; Student's t is ``firewall.stats``' (checked against
scipy in the tests).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Literal

from firewall._stats import t_quantile, t_sf

__all__ = [
    "CONFIDENCE",
    "LEVEL",
    "LOOKS",
    "MIN_RUNS",
    "POWER",
    "Comparison",
    "Judgement",
    "RunMean",
    "benjamini_hochberg",
    "compare",
    "judge",
    "t_quantile",
    "t_sf",
]

LEVEL = 0.05  # the false-fail rate over every look (FDR across the evals of one run)
LOOKS = 2  # a run looks once, then once more after adding trials to the unclear evals
CONFIDENCE = 0.95  # one-sided, for the drop's upper bound
POWER = 0.8  # for the smallest drop these trials can detect
MIN_RUNS = 3  # earlier runs of the default branch needed for any verdict
WORTH_MORE = 0.9  # add trials only when max_k of them would cut the se to this share or less

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
    limit: float  # max_drop: the drop tolerated, the null hypothesis' edge
    se: float
    df: float  # Satterthwaite's
    p: float  # one-sided: the chance of a drop this large if the true one is max_drop
    upper: float  # the drop's one-sided upper confidence bound
    runs: int
    drift: float  # tau: the sd of the run-to-run drift, net of the runs' own trial noise
    floor: float  # the se that no number of this run's trials gets under: baseline and drift
    noise: float  # s_0: the sd of this run's trials
    n: int  # this run's scored trials

    def se_with(self, trials: int) -> float:
        """The standard error had this run scored ``trials`` trials with the same sd."""
        return math.sqrt(self.floor**2 + self.noise**2 / max(1, trials))

    def detectable(self, level: float, se: float | None = None) -> float:
        """The drop found with POWER by a one-sided test at ``level``, at ``se``."""
        quantiles = _t(1 - level, self.df) + _t(POWER, self.df)
        return self.limit + quantiles * (self.se if se is None else se)


@dataclasses.dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reason: str
    comparison: Comparison | None = None
    more_trials: bool = False  # unclear, and max_k trials would narrow it enough to try


def compare(current: RunMean, baseline: Sequence[RunMean], limit: float) -> Comparison | None:
    """This run's mean against the earlier run means; None without MIN_RUNS of them."""
    if len(baseline) < MIN_RUNS:
        return None
    r = len(baseline)
    means = [run.mean for run in baseline]
    between = statistics.variance(means)  # B: drift plus the earlier runs' trial noise
    noises = [run.sd**2 / run.n if run.n > 0 else 0.0 for run in baseline]
    within = statistics.fmean(noises)  # W
    drift2 = max(0.0, between - within)
    noise = current.sd**2 / current.n if current.n > 0 else 0.0
    floor2 = between / r + drift2
    se2 = floor2 + noise
    drop = statistics.fmean(means) - current.mean
    # Satterthwaite: each variance estimate with its coefficient and degrees of freedom.
    terms = [((1 + 1 / r) if drift2 > 0 else 1 / r, between, r - 1)]
    if drift2 > 0:
        terms += [
            (-1 / r, noise_i, run.n - 1) for noise_i, run in zip(noises, baseline, strict=True)
        ]
    terms.append((1.0, noise, current.n - 1))
    spread = math.fsum((c * v) ** 2 / dof for c, v, dof in terms if dof > 0 and v > 0)
    df = max(1.0, se2**2 / spread if spread > 0 else float(r - 1))
    se = math.sqrt(se2)
    if se == 0.0:
        p = 0.0 if drop > limit else 1.0
        upper = drop
    else:
        p = t_sf((drop - limit) / se, df)
        upper = drop + _t(CONFIDENCE, df) * se
    return Comparison(
        drop=drop,
        limit=limit,
        se=se,
        df=df,
        p=p,
        upper=upper,
        runs=r,
        drift=math.sqrt(drift2),
        floor=math.sqrt(floor2),
        noise=current.sd,
        n=current.n,
    )


def _t(q: float, df: float) -> float:
    """Student's t quantile at ``df`` to a tenth: bounds, not p-values, so that a run's many
    look-ups of a few levels hit ``t_quantile``'s cache (a difference in the third digit)."""
    return t_quantile(q, round(df, 1))


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
    comparisons: Mapping[str, Comparison | None],
    base: str,
    *,
    level: float = LEVEL / LOOKS,
    max_k: Mapping[str, int] | None = None,
) -> dict[str, Judgement]:
    """The verdict of each opted-in eval at one look, the drops corrected across all of
    them at ``level``. ``max_k``: the trials each eval may still reach; an unclear one
    whose standard error they would cut enough is marked for ``more_trials``."""
    tested = {k: c.p for k, c in comparisons.items() if c is not None}
    significant = benjamini_hochberg(tested, level)
    lone = level / max(1, len(tested))  # BH's level for one regression among them
    verdicts = {}
    for eval_id, comparison in comparisons.items():
        if comparison is None:
            verdicts[eval_id] = Judgement(
                "no-baseline",
                f"no regression verdict: fewer than {MIN_RUNS} runs of {base} in the history",
            )
            continue
        limit = comparison.limit
        numbers = (
            f"drop {comparison.drop:.3f} vs {base}'s last {comparison.runs} runs "
            f"(se {comparison.se:.3f}, p = {comparison.p:.2g} against max_drop {limit:g}, "
            f"upper bound {comparison.upper:.3f})"
        )
        if eval_id in significant:
            verdicts[eval_id] = Judgement(
                "regression", f"regression: {numbers}, above max_drop {limit:g}", comparison
            )
        elif comparison.upper <= limit:
            verdicts[eval_id] = Judgement("ok", f"no regression: {numbers}", comparison)
        else:
            reach = (max_k or {}).get(eval_id, comparison.n)
            more = reach > comparison.n and _settles(comparison, reach, level)
            verdicts[eval_id] = Judgement(
                "unclear",
                f"regression unclear: {numbers}; {_what_limits(comparison, lone, reach)}",
                comparison,
                more_trials=more,
            )
    return verdicts


def _settles(comparison: Comparison, trials: int, level: float) -> bool:
    """Whether ``trials`` trials are worth asking for: they cut the standard error to
    WORTH_MORE of today's or less, and with that smaller error either a drop within
    max_drop could be shown to be (no drop at all would have its upper bound inside), or
    the drop seen is already beyond max_drop. Where drift holds the error up, no number of
    trials can show a drop within max_drop, and none are added."""
    se = comparison.se_with(trials)
    if se > WORTH_MORE * comparison.se or se == 0.0:
        return False
    reachable = _t(CONFIDENCE, comparison.df) * se < comparison.limit
    return reachable or comparison.drop > comparison.limit


def _what_limits(comparison: Comparison, level: float, reach: int) -> str:
    """Which drop these trials can detect, or that drift keeps any number from doing better."""
    floor = comparison.detectable(level, comparison.floor)
    drift_bound = comparison.se_with(reach) > WORTH_MORE * comparison.se
    if comparison.floor**2 >= 0.5 * comparison.se**2 or (reach > comparison.n and drift_bound):
        source = (
            f"run-to-run drift {comparison.drift:.3f}"
            if comparison.drift > 0
            else f"the spread of {comparison.runs} runs"
        )
        return f"{source} limits detection to drops of {floor:.3f} or more"
    return f"these {comparison.n} trials detect drops of {comparison.detectable(level):.3f} or more"
