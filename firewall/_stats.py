"""Statistics over a probe's trials: pure functions, no I/O.

Private to the firewall: the four helpers users call from their own evals (the
Wilson interval, the IQR, the drift rate and Cohen's kappa) are re-exported by
``firewall.stats``, the public module.

And the tests of item-aware instability (contract §4): whether the trials of
an eval that reports binary items differ by more than the binomial noise of
that many items explains. Cochran's Q when every trial ran the same items, a
chi-square test of homogeneity of the trials' pass rates otherwise; both are
referred to the chi-square distribution, whose survival function is the
regularized upper incomplete gamma function, computed here in plain Python.
"""

from __future__ import annotations

import functools
import math
import sys
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from itertools import chain, compress
from statistics import NormalDist
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

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
    # Confidence intervals at the eval's ``confidence``: the median's from order statistics
    # (distribution-free; its real coverage, which the order statistics make discrete), the
    # mean's from Student's t.
    median_low: float | None = None
    median_high: float | None = None
    median_coverage: float | None = None
    mean_low: float | None = None
    mean_high: float | None = None
    errors: int = 0
    p50_latency_ms: float | None = None
    p95_latency_ms: float | None = None
    mean_tokens: float | None = None
    mean_cost_usd: float | None = None
    # The item-aware instability test, when every trial reported binary items (contract §4):
    # its name, its p-value, and the between-trial variance as a multiple of the binomial one.
    item_test: str | None = None
    item_p: float | None = None
    dispersion: float | None = None
    items_per_trial: float | None = None  # their mean, when the trials ran different numbers
    groups_per_trial: float | None = None  # items in groups (``doc-3/q1``): their mean count
    # The spread test of a score-only eval (``spread_test``): the trials' sd inside the
    # collapse fence, and its p-value against the sd an IQR of F has under normal noise.
    sd: float | None = None
    spread_p: float | None = None


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


def sorted_iqr(ordered: Sequence[float]) -> float:
    """The IQR of values already in ascending order (no copy, no sort)."""
    return _interpolate(ordered, 75) - _interpolate(ordered, 25)


def sorted_median(ordered: Sequence[float]) -> float:
    """The median of values already in ascending order."""
    return _interpolate(ordered, 50)


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


def _mean(values: Sequence[float]) -> float:
    """The mean, summed in shares so that values near the float limit cannot overflow."""
    return math.fsum(value / len(values) for value in values)


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
    values: dict[str, float | None] = {}
    if scores:
        q1, median, q3 = quartiles(scores)
        values.update(median=median, q1=q1, q3=q3, iqr=q3 - q1)
        values["mean"] = math.fsum(scores) / len(scores)
        values["min"], values["max"] = float(min(scores)), float(max(scores))
        around = median_interval(scores, confidence)
        if around is not None:
            values.update(
                median_low=around.low, median_high=around.high, median_coverage=around.coverage
            )
        spread = mean_interval(scores, confidence)
        if spread is not None:
            # Scores are in [0, 1] (contract §3), so the mean is too, whatever t says.
            values.update(mean_low=max(0.0, spread.low), mean_high=min(1.0, spread.high))
    if passes:
        successes = sum(passes)
        values["pass_rate"] = successes / len(passes)
        values["wilson_low"], values["wilson_high"] = wilson_interval(
            successes, len(passes), confidence
        )
    if latencies_ms:
        values["p50_latency_ms"] = percentile(latencies_ms, 50)
        values["p95_latency_ms"] = percentile(latencies_ms, 95)
    if tokens:
        values["mean_tokens"] = _mean(tokens)
    if costs_usd:
        values["mean_cost_usd"] = _mean(costs_usd)
    return _stats_of(errors, values)


_STATS_DEFAULTS = {name: field.default for name, field in Stats.model_fields.items()}
_new_stats = object.__new__
_set = object.__setattr__


def _stats_of(errors: int, values: Mapping[str, float | None]) -> Stats:
    """``Stats(errors=errors)`` with each of ``values`` assigned to it, built as pydantic
    builds a model without validating (each value is of its field's type already, as an
    assignment, which is not validated, takes it): a decision builds one per eval, and
    fifteen assignments through pydantic's ``__setattr__`` cost twice the statistics.
    ``tests/test_stats.py`` holds the two ways equal."""
    stats = _new_stats(Stats)
    _set(stats, "__dict__", {**_STATS_DEFAULTS, "errors": errors, **values})
    _set(stats, "__pydantic_fields_set__", {"errors", *values})
    _set(stats, "__pydantic_extra__", None)
    _set(stats, "__pydantic_private__", None)
    return stats


# --- chi-square tests of binary items ------------------------------------------

_FLOAT_EPSILON = sys.float_info.epsilon  # the series and the fraction stop at full precision
_TINY = 1e-300  # keeps the continued fraction's denominators off zero (Lentz's method)
_MAX_ITERATIONS = 100_000


class ChiSquare(NamedTuple):
    """A chi-square test: its statistic, degrees of freedom and p-value (upper tail)."""

    statistic: float
    df: int
    p_value: float


def gamma_q(a: float, x: float) -> float:
    """The regularized upper incomplete gamma function Q(a, x) = Γ(a, x) / Γ(a).

    As Numerical Recipes (§6.2, ``gammq``) and Cephes (``igamc``) compute it:
    the power series of P = 1 - Q below x = a + 1, where it converges fast and
    Q is not small, so 1 - P loses nothing; Legendre's continued fraction of Q
    (modified Lentz) above, where it converges fast and keeps Q's relative
    precision however far out in the tail. The common factor x^a e^-x / Γ(a)
    is taken through logarithms so that large a and x do not overflow.
    """
    if not a > 0 or not x >= 0:
        raise ValueError(f"gamma_q needs a > 0 and x >= 0, got a={a}, x={x}")
    if x == 0:
        return 1.0
    if math.isinf(x):
        return 0.0
    log_factor = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        return 1.0 - _gamma_p_series(a, x) * math.exp(log_factor)
    return _gamma_q_fraction(a, x) * math.exp(log_factor)


def _gamma_p_series(a: float, x: float) -> float:
    """P(a, x) / (x^a e^-x / Γ(a)) = Σ x^n / (a (a+1) ... (a+n))."""
    term = total = 1 / a
    denominator = a
    for _ in range(_MAX_ITERATIONS):
        denominator += 1
        term *= x / denominator
        total += term
        if abs(term) < abs(total) * _FLOAT_EPSILON:
            return total
    raise ArithmeticError(f"the series of P({a}, {x}) did not converge")  # pragma: no cover


def _gamma_q_fraction(a: float, x: float) -> float:
    """Q(a, x) / (x^a e^-x / Γ(a)) as the continued fraction 1/(x+1-a- 1(1-a)/(x+3-a- ...))."""
    b = x + 1 - a
    c = 1 / _TINY
    d = 1 / b
    h = d
    for i in range(1, _MAX_ITERATIONS):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        if abs(d) < _TINY:
            d = _TINY
        c = b + an / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < _FLOAT_EPSILON:
            return h
    raise ArithmeticError(f"the fraction of Q({a}, {x}) did not converge")  # pragma: no cover


def chi2_sf(x: float, df: float) -> float:
    """P(X > x) for X chi-square with ``df`` degrees of freedom (``scipy.stats.chi2.sf``)."""
    if not df > 0:
        raise ValueError(f"chi-square needs df > 0, got {df}")
    if math.isnan(x):
        raise ValueError("chi-square survival of NaN")
    return 1.0 if x <= 0 else gamma_q(df / 2, x / 2)


def cochran_q(table: Sequence[Sequence[bool]]) -> ChiSquare:
    """Cochran's Q test that k related binary samples share one pass rate.

    ``table[i][j]`` is block i (an item) under treatment j (a trial). Blocks
    that are all pass or all fail contribute nothing; when every block is, Q
    is 0 and p is 1. Q = (k-1) (k Σ C_j² - N²) / (k N - Σ R_i²), with C_j the
    column totals, R_i the row totals and N the grand total, on k-1 degrees of
    freedom (as ``statsmodels.stats.contingency_tables.cochrans_q``).
    """
    if not table:
        raise ValueError("Cochran's Q of no blocks")
    k = len(table[0])
    if any(len(row) != k for row in table):
        raise ValueError("Cochran's Q needs the same treatments in every block")
    columns = [sum(bool(row[j]) for row in table) for j in range(k)]
    return _cochran_from_totals(columns, [sum(bool(cell) for cell in row) for row in table])


def _cochran_from_totals(columns: Sequence[int], rows: Sequence[int]) -> ChiSquare:
    """Cochran's Q from the pass counts of its columns and of its rows (all-fail rows may be
    left out: they add nothing). In integers, so that only the last division rounds."""
    k = len(columns)
    total = sum(columns)
    denominator = k * total - sum(r * r for r in rows)  # Σ R_i (k - R_i): 0 if all constant
    if k < 2 or denominator == 0:
        return ChiSquare(0.0, max(k - 1, 0), 1.0)
    statistic = (k - 1) * (k * sum(c * c for c in columns) - total * total) / denominator
    return ChiSquare(statistic, k - 1, chi2_sf(statistic, k - 1))


def binomial_dispersion(passes: Sequence[int], totals: Sequence[int]) -> ChiSquare:
    """Pearson's chi-square test that k binomial samples share one pass rate.

    The k x 2 table of passes and fails, as ``scipy.stats.chi2_contingency``
    without the continuity correction: Σ (s_j N - n_j S)² / (n_j S F) on k-1
    degrees of freedom, with s_j of n_j passing in sample j, S of N passing in
    all, F = N - S failing. When every item passed, or every one failed, the
    samples cannot differ: the statistic is 0 and p is 1.
    """
    if len(passes) != len(totals) or not passes:
        raise ValueError("binomial dispersion needs one total per pass count")
    if any(not 0 <= s <= n or n == 0 for s, n in zip(passes, totals, strict=True)):
        raise ValueError("binomial dispersion needs 0 <= passes <= total and total > 0")
    k = len(passes)
    grand, successes = sum(totals), sum(passes)
    failures = grand - successes
    if k < 2 or successes == 0 or failures == 0:
        return ChiSquare(0.0, max(k - 1, 0), 1.0)
    statistic = math.fsum(
        (s * grand - n * successes) ** 2 / (n * successes * failures)
        for s, n in zip(passes, totals, strict=True)
    )
    return ChiSquare(statistic, k - 1, chi2_sf(statistic, k - 1))


def f_sf(statistic: float, df1: float, df2: float) -> float:
    """The upper tail of the F distribution, P(F > statistic), from I_x(df2/2, df1/2)."""
    if statistic <= 0:
        return 1.0
    return betainc(df2 / 2, df1 / 2, df2 / (df2 + df1 * statistic))


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (Numerical Recipes' betacf)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), by the modified Lentz method."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, _nonzero(1.0 - qab * x / qap) ** -1
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = _nonzero(1.0 + aa * d) ** -1
            c = _nonzero(1.0 + aa / c)
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _nonzero(value: float) -> float:
    return value if abs(value) > 1e-300 else 1e-300


COCHRAN = "Cochran's Q"
DISPERSION = "chi-square dispersion"
ANOVA = "two-way ANOVA"


class ItemTest(NamedTuple):
    """Whether the trials of an eval over items differ by more than its item noise explains."""

    name: str  # COCHRAN, DISPERSION or ANOVA
    result: ChiSquare  # for ANOVA: the F statistic, the trials' degrees of freedom, p
    pass_rate: float  # the mean item score, pooled over every item of every trial
    items: float  # per trial; their mean when the trials ran different numbers of items
    dispersion: float  # between-trial variance as a multiple of what item noise explains
    noise: float  # the standard deviation of one trial's score from item noise alone
    groups: float = 0.0  # groups per trial (their mean), for a test of items in groups


def _binomial_test(name: str, result: ChiSquare, pass_rate: float, items: float) -> ItemTest:
    return ItemTest(
        name,
        result,
        pass_rate,
        items,
        dispersion=result.statistic / result.df if result.df else 0.0,
        noise=math.sqrt(pass_rate * (1 - pass_rate) / items),
    )


def item_variance(trials: Sequence[Mapping[str, float]]) -> ItemTest:
    """Test the trials' binary item scores (1.0 pass, 0.0 fail) against binomial noise.

    Cochran's Q with the items as blocks when every trial ran the same item
    ids: it compares the trials item by item, so that hard and easy items do
    not count as scatter. Otherwise (sampled items) there is no one set of
    items to pair the trials on, and their pass counts are compared with
    Pearson's chi-square. Whether the items are binary, the caller checks.
    """
    if not trials or any(not items for items in trials):
        raise ValueError("item_variance needs trials that each report items")
    passes = [round(math.fsum(items.values())) for items in trials]
    totals = [len(items) for items in trials]
    pass_rate = sum(passes) / sum(totals)
    per_trial = sum(totals) / len(totals)
    first = trials[0].keys()
    if all(items.keys() == first for items in trials[1:]):
        # Each item's passes over the trials; compress() and Counter keep the loop in C.
        rows = Counter(chain.from_iterable(compress(t.keys(), t.values()) for t in trials))
        result = _cochran_from_totals(passes, list(rows.values()))
        return _binomial_test(COCHRAN, result, pass_rate, per_trial)
    return _binomial_test(DISPERSION, binomial_dispersion(passes, totals), pass_rate, per_trial)


def trial_anova(trials: Sequence[Mapping[str, float]]) -> ItemTest:
    """Test the trials' continuous item scores for a trial effect: a two-way ANOVA without
    replication, items as blocks, every trial over the same item ids.

    A judge that scatters on each item scatters into the item-by-trial
    interaction, which is the test's error term; only a shift of whole trials
    (a bad prompt cache, a different model behind the endpoint) raises the
    trial effect above it. The analogue of Cochran's Q for scores that are
    not binary.
    """
    ids = list(trials[0]) if trials else []
    if not ids or any(items.keys() != trials[0].keys() for items in trials):
        raise ValueError("trial_anova needs trials over the same item ids")
    t, n = len(trials), len(ids)
    table = [[items[i] for i in ids] for items in trials]  # a row per trial
    grand = math.fsum(math.fsum(row) for row in table) / (t * n)
    trial_means = [math.fsum(row) / n for row in table]
    item_means = [math.fsum(row[j] for row in table) / t for j in range(n)]
    total = math.fsum((x - grand) ** 2 for row in table for x in row)
    between = n * math.fsum((m - grand) ** 2 for m in trial_means)
    blocks = t * math.fsum((m - grand) ** 2 for m in item_means)
    residual = max(0.0, total - between - blocks)
    df1, df2 = t - 1, (t - 1) * (n - 1)
    noise_ms = residual / df2 if df2 else 0.0
    if df1 == 0 or df2 == 0:
        f, p = 0.0, 1.0
    elif noise_ms <= EPSILON * EPSILON:  # no item noise at all: any trial effect is real
        f, p = (math.inf, 0.0) if between > EPSILON else (0.0, 1.0)
    else:
        f = (between / df1) / noise_ms
        p = f_sf(f, df1, df2)
    return ItemTest(
        ANOVA,
        ChiSquare(f, df1, p),
        grand,
        float(n),
        dispersion=f,
        noise=math.sqrt(noise_ms / n),
    )


# --- Student's t and the intervals a probe reports -------------------------------------


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (not necessarily whole)."""
    if t * t < df:  # near the centre: the mass between -t and t, from I_y(1/2, df/2)
        centre = 0.5 * betainc(0.5, df / 2, t * t / (df + t * t))
        return 0.5 - centre if t >= 0 else 0.5 + centre
    tail = 0.5 * betainc(df / 2, 0.5, df / (df + t * t))  # in the tails, from I_x(df/2, 1/2)
    return tail if t >= 0 else 1.0 - tail


@functools.lru_cache(maxsize=1024)  # a run asks for a few levels at a few df, many times
def t_quantile(q: float, df: float) -> float:
    """The t with P(T <= t) = q (``scipy.stats.t.ppf``): ``t_isf`` of the other tail."""
    return t_isf(1.0 - q, df)


class Interval(NamedTuple):
    """A two-sided confidence interval and the coverage it really has."""

    low: float
    high: float
    coverage: float


def median_interval(values: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """A distribution-free interval on the median, from order statistics.

    The j-th smallest and j-th largest of n scores bracket the true median unless
    fewer than j of the n fall on one side of it, which for any continuous
    distribution has the binomial(n, 1/2) chance P(B <= j - 1) per side. The
    interval is the narrowest such pair whose coverage 1 - 2 P(B <= j - 1)
    reaches ``confidence``. Below six scores no pair does at 95% (the range of
    five covers 93.75%): then it is the range, with the coverage it has.
    None without a score.
    """
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return None
    whole = 1 << n  # binomial(n, 1/2) probabilities as exact integers over 2^n
    tail, j, coverage = 1, 1, 1.0 - 2.0 / whole  # P(B <= 0) = 1 / 2^n
    while 2 * (j + 1) <= n + 1:
        wider = tail + math.comb(n, j)  # 2^n P(B <= j)
        if 1.0 - 2 * wider / whole < confidence:
            break
        tail, j, coverage = wider, j + 1, 1.0 - 2 * wider / whole
    return Interval(float(ordered[j - 1]), float(ordered[n - j]), coverage)


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """Student's t interval on the mean: mean +- t(n - 1) s / sqrt(n). None below two
    scores. It assumes the trial scores' mean is near normal, which a handful of
    bounded scores without collapses gives; the median's interval assumes nothing."""
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(1 - (1 - confidence) / 2, n - 1) * sd / math.sqrt(n)
    return Interval(mean - half, mean + half, confidence)


# --- the spread against F, and the tails the collapse fence is sized for --------------

IQR_PER_SD = 2 * NormalDist().inv_cdf(0.75)
"""A normal distribution's IQR in standard deviations (1.349): F as an IQR is F / 1.349
as a standard deviation."""


def t_isf(p: float, df: float) -> float:
    """The t with P(T > t) = p, by bisection on ``t_sf`` in a bracket widened until it
    holds the answer: ``scipy.stats.t.isf``, far into the tail as well (the collapse fence
    reads quantiles at 1e-6 and beyond)."""
    if not 0 < p < 1:
        raise ValueError(f"t_isf needs 0 < p < 1, got {p}")
    low, high = -1.0, 1.0
    while t_sf(low, df) < p:
        low *= 2
    while t_sf(high, df) > p:
        high *= 2
    return _bisect_isf(lambda x: t_sf(x, df), p, low, high)


def chi2_isf(p: float, df: float) -> float:
    """The x with P(X > x) = p for X chi-square on ``df`` degrees of freedom
    (``scipy.stats.chi2.isf``), by bisection on ``chi2_sf``."""
    if not 0 < p < 1:
        raise ValueError(f"chi2_isf needs 0 < p < 1, got {p}")
    low, high = 0.0, max(1.0, 2.0 * df)
    while chi2_sf(high, df) > p:
        low, high = high, 2 * high
    return _bisect_isf(lambda x: chi2_sf(x, df), p, low, high)


def _bisect_isf(sf: Callable[[float], float], p: float, low: float, high: float) -> float:
    """The x in [low, high] with sf(x) = p, for a decreasing survival function, by
    bisection to a float's resolution."""
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if sf(middle) > p:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def sample_sd(values: Sequence[float]) -> float | None:
    """The sample standard deviation (n - 1 in the denominator); None below two values."""
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def spread_test(values: Sequence[float], flakiness: float) -> ChiSquare:
    """The one-sided chi-square test that the values' standard deviation exceeds the one
    an IQR of ``flakiness`` has under normal noise, sd_F = F / 1.349.

    Under normal scores with sd_F, (n - 1) s² / sd_F² is chi-square on n - 1 degrees
    of freedom: the statistic is Σ (x - mean)² / sd_F², its p-value the upper tail. The
    sample sd is about 2.7 times as efficient as the sample IQR under normality (its
    variance is 0.5 σ²/n against the IQR's 1.36 σ²/n in sd terms), so it tells an eval
    at 0.9 F from one at 1.2 F with fewer trials. With F = 0 any spread is beyond it.
    """
    n = len(values)
    if n < 2:
        return ChiSquare(0.0, 0, 1.0)
    mean = math.fsum(values) / n
    squares = math.fsum((v - mean) ** 2 for v in values)
    return spread_from_squares(squares, n - 1, flakiness)


def spread_from_squares(squares: float, df: int, flakiness: float) -> ChiSquare:
    """``spread_test`` from the sum of squared deviations and its degrees of freedom."""
    if df < 1:
        return ChiSquare(0.0, 0, 1.0)
    sd_f = flakiness / IQR_PER_SD
    if sd_f <= 0:
        spread = squares > EPSILON * EPSILON
        return ChiSquare(math.inf if spread else 0.0, df, 0.0 if spread else 1.0)
    statistic = squares / (sd_f * sd_f)
    return ChiSquare(statistic, df, chi2_sf(statistic, df))


# --- items in groups: several checks of one document, turns of one conversation ------

GROUPED = "grouped ANOVA"
CLUSTERED = "cluster-sampled ANOVA"
GROUP_SEPARATOR = "/"


def group_of(item_id: str) -> str | None:
    """The group an item belongs to: what its id holds before the last ``/`` (``doc-3/q1``
    is in ``doc-3``; ``corpus/doc-3/q1`` in ``corpus/doc-3``, the finer unit); None
    without one."""
    head, separator, _ = item_id.rpartition(GROUP_SEPARATOR)
    return head if separator and head else None


def grouped(trials: Sequence[Mapping[str, float]]) -> list[dict[str, list[float]]] | None:
    """Each trial's item scores by group, when every item of every trial names a group and
    every trial holds two groups or more (one group per trial leaves nothing to tell a
    trial's own effect from its group's); else None."""
    out: list[dict[str, list[float]]] = []
    for items in trials:
        groups: dict[str, list[float]] = {}
        for item_id, score in items.items():
            group = group_of(item_id)
            if group is None:
                return None
            groups.setdefault(group, []).append(score)
        if len(groups) < 2:
            return None
        out.append(groups)
    return out


def group_test(groups: Sequence[Mapping[str, Sequence[float]]], *, binary: bool) -> ItemTest:
    """Whether the trials differ by more than the noise of their items explains when the
    items come in groups whose items are not independent (a document's checks share its
    difficulty, and a misread document fails them together).

    The same groups in every trial: blocked on the groups, a two-way ANOVA of the groups'
    mean scores (``trial_anova``), whose error term, the trial-by-group interaction, holds
    the groups' shared noise. Groups sampled per trial: a one-way ANOVA of the groups' mean
    scores between trials, weighted by their sizes, whose error term is the spread of a
    trial's groups about its own mean: Pearson's chi-square of the trials' pass counts
    divided by the design effect (Rao and Scott's first-order correction), on the F
    distribution for the error term's degrees of freedom. For binary items the design
    effect is at least 1: never a stricter test than the independent items'.
    """
    first = groups[0].keys()
    if all(g.keys() == first for g in groups[1:]):
        return _blocked_group_test(groups)
    return _sampled_group_test(groups, binary=binary)


def _blocked_group_test(groups: Sequence[Mapping[str, Sequence[float]]]) -> ItemTest:
    """The same groups in every trial: ``trial_anova`` of the groups' mean scores."""
    means = [{name: math.fsum(s) / len(s) for name, s in g.items()} for g in groups]
    test = trial_anova(means)
    items = sum(len(s) for g in groups for s in g.values()) / len(groups)
    # The noise of one trial's score: the interaction's, over its groups.
    return test._replace(name=GROUPED, items=items, groups=float(len(groups[0])))


def _sampled_group_test(
    groups: Sequence[Mapping[str, Sequence[float]]], *, binary: bool
) -> ItemTest:
    """Groups sampled per trial: a one-way ANOVA of the groups' mean scores between
    trials, weighted by their sizes, against the spread of a trial's groups about its mean."""
    sizes = [[len(s) for s in g.values()] for g in groups]
    sums = [[math.fsum(s) for s in g.values()] for g in groups]
    totals = [sum(row) for row in sizes]
    trial_means = [math.fsum(row) / n for row, n in zip(sums, totals, strict=True)]
    grand_n = sum(totals)
    grand = math.fsum(math.fsum(row) for row in sums) / grand_n
    between = _between_trials(totals, trial_means, grand)
    within = _within_trials(sums, sizes, trial_means)
    df1 = len(groups) - 1
    df2 = sum(len(row) for row in sizes) - len(groups)
    noise_ms = _item_noise(within, df2, grand, binary=binary)
    f, p = _f_test(between, df1, noise_ms, df2)
    per_trial = grand_n / len(groups)
    return ItemTest(
        CLUSTERED,
        ChiSquare(f, df1, p),
        grand,
        per_trial,
        dispersion=f,
        noise=math.sqrt(noise_ms / per_trial),
        groups=sum(len(row) for row in sizes) / len(groups),
    )


def _between_trials(totals: Sequence[int], trial_means: Sequence[float], grand: float) -> float:
    """The size-weighted squares of each trial's mean about the grand mean."""
    return math.fsum(n * (m - grand) ** 2 for n, m in zip(totals, trial_means, strict=True))


def _within_trials(
    sums: Sequence[Sequence[float]], sizes: Sequence[Sequence[int]], trial_means: Sequence[float]
) -> float:
    """The size-weighted squares of each group's mean about its trial's mean."""
    return math.fsum(
        (total - size * mean) ** 2 / size
        for row_sums, row_sizes, mean in zip(sums, sizes, trial_means, strict=True)
        for total, size in zip(row_sums, row_sizes, strict=True)
    )


def _item_noise(within: float, df2: int, grand: float, *, binary: bool) -> float:
    """One item's variance, the groups' shared part in; for binary items never below the
    binomial variance (a design effect of at least 1)."""
    noise_ms = within / df2 if df2 else 0.0
    return max(noise_ms, grand * (1 - grand)) if binary else noise_ms


def _f_test(between: float, df1: int, noise_ms: float, df2: int) -> tuple[float, float]:
    """F and its p-value for a between-trials sum of squares over an error mean square;
    no test without degrees of freedom, and without noise any effect is real."""
    if df1 == 0 or df2 == 0:
        return 0.0, 1.0
    if noise_ms <= EPSILON * EPSILON:
        return (math.inf, 0.0) if between > EPSILON else (0.0, 1.0)
    f = (between / df1) / noise_ms
    return f, f_sf(f, df1, df2)


# --- a pass-rate gate that looks more than once ---------------------------------------------


def wilson_looks_pass(
    k: int, max_k: int, step: int, bar: float, confidence: float, rate: float
) -> float:
    """The chance that a sequence of Wilson looks passes when each trial passes with
    ``rate``: looks at k, k + step, ..., max_k; a look passes when the lower bound at
    ``confidence`` reaches ``bar``; the next look comes when the rate reaches the bar, the
    bound does not, and passes in every trial up to max_k could still lift it there (the
    adaptive gate's rule, ``firewall.adaptive.close``); otherwise the gate fails. Exact:
    the binomial distribution of the passes is carried from look to look."""
    n, passed = k, 0.0
    paths = binomial_pmf(k, rate)  # passes so far -> chance, over the paths still going
    while paths:
        going: dict[int, float] = {}
        room = max_k - n
        for s, chance in paths.items():
            if wilson_interval(s, n, confidence)[0] >= bar - EPSILON:
                passed += chance
            elif (
                room > 0
                and s / n >= bar - EPSILON
                and wilson_interval(s + room, n + room, confidence)[0] >= bar - EPSILON
            ):
                going[s] = chance
        if not going:
            break
        extra = min(step, room)
        more = binomial_pmf(extra, rate)
        paths = {}
        for s, chance in going.items():
            for t, p in more.items():
                paths[s + t] = paths.get(s + t, 0.0) + chance * p
        n += extra
    return min(1.0, passed)


def binomial_pmf(n: int, p: float) -> dict[int, float]:
    """Binomial(n, p) probabilities above 1e-16, in logs (``math.comb`` outgrows a float
    past n of about 1030)."""
    if p <= 0 or p >= 1:
        return {n if p >= 1 else 0: 1.0}
    log_p, log_q = math.log(p), math.log1p(-p)
    out = {}
    for s in range(n + 1):
        log = math.lgamma(n + 1) - math.lgamma(s + 1) - math.lgamma(n - s + 1)
        chance = math.exp(log + s * log_p + (n - s) * log_q)
        if chance > 1e-16:
            out[s] = chance
    return out
