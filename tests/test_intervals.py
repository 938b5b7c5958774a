"""The intervals a probe reports: the median's from order statistics, the mean's from
Student's t, both against scipy, and where the artefact and the renderers show them."""

from __future__ import annotations

import random
import statistics

import pytest
from scipy import stats

from firewall._stats import mean_interval, median_interval, summarize
from firewall.report.markdown import intervals


@pytest.mark.parametrize("n", [6, 7, 9, 10, 15, 16, 30, 60, 101, 500])
def test_the_median_interval_is_scipys_order_statistic_interval(n: int) -> None:
    rng = random.Random(n)
    for _ in range(20):
        values = [rng.betavariate(8, 2) for _ in range(n)]
        ours = median_interval(values)
        theirs = stats.quantile_test(values, q=0.5, p=0.5).confidence_interval(0.95)
        assert ours is not None and (ours.low, ours.high) == (theirs.low, theirs.high)


@pytest.mark.parametrize("n", [1, 2, 5, 7, 15, 40])
def test_the_median_interval_states_its_exact_binomial_coverage(n: int) -> None:
    values = [i / n for i in range(n)]
    interval = median_interval(values)
    assert interval is not None
    j = sorted(values).index(interval.low) + 1  # the j-th smallest is the lower end
    assert interval.coverage == pytest.approx(1 - 2 * stats.binom.cdf(j - 1, n, 0.5))
    if n >= 6:
        assert interval.coverage >= 0.95
        assert 1 - 2 * stats.binom.cdf(j, n, 0.5) < 0.95, "the narrowest that reaches 95%"
    else:  # too few trials for 95%: the range, with the coverage it has (5: 93.75%)
        assert (interval.low, interval.high) == (min(values), max(values))


def test_the_median_interval_covers_the_true_median_at_its_stated_rate() -> None:
    rng = random.Random(1)
    covered = 0
    for _ in range(4000):  # a skewed score distribution: no normality assumed
        values = [1 - rng.expovariate(20) for _ in range(7)]
        interval = median_interval(values)
        assert interval is not None
        covered += interval.low <= 1 - 0.05 * 0.6931471805599453 <= interval.high
    assert covered / 4000 == pytest.approx(1 - 2 / 128, abs=0.006)  # 98.4% at n = 7


@pytest.mark.parametrize("n", [2, 3, 7, 15, 50])
def test_the_mean_interval_is_scipys_t_interval(n: int) -> None:
    rng = random.Random(n)
    values = [rng.gauss(0.85, 0.02) for _ in range(n)]
    interval = mean_interval(values)
    low, high = stats.t.interval(0.95, n - 1, loc=statistics.fmean(values), scale=stats.sem(values))
    assert interval is not None
    assert (interval.low, interval.high) == pytest.approx((low, high))


def test_a_probe_carries_both_intervals_and_the_summary_says_what_each_assumes() -> None:
    scores = [0.84, 0.85, 0.86, 0.85, 0.83, 0.87, 0.85]
    measured = summarize(scores, [True] * 7, errors=0, confidence=0.95)
    assert (measured.median_low, measured.median_high) == (0.83, 0.87)
    assert measured.median_coverage == pytest.approx(1 - 2 / 128)
    assert measured.mean_low is not None and measured.mean_low < 0.85 < (measured.mean_high or 0)
    text = intervals(measured)
    assert text.startswith("median 0.85 in [0.83, 0.87] (98.4%, order statistics")
    assert "(Student's t)" in text


def test_the_mean_interval_stays_within_the_score_range() -> None:
    measured = summarize([0.0, 1.0, 0.0], [False, True, False], errors=0, confidence=0.95)
    assert measured.mean_low == 0.0 and measured.mean_high == 1.0
