"""The spread rule and the stretched collapse fence (issue 23, item 4), against scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from builders import make_spec, trials

from firewall._stats import IQR_PER_SD, chi2_isf, sample_sd, spread_test, t_isf
from firewall.policy import (
    FENCE_REFERENCE_K,
    HEAVY_TAIL_DF,
    SPREAD_LEVEL,
    Status,
    decide,
    fence_multiplier,
    looks,
    spread_level,
)


def test_the_iqr_per_sd_is_a_normal_distributions() -> None:
    assert pytest.approx(scipy.stats.norm.ppf(0.75) * 2, rel=1e-12) == IQR_PER_SD


@pytest.mark.parametrize("seed", range(5))
def test_the_spread_test_is_scipys_one_sided_chi_square_test_of_the_variance(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(2, 40))
        flakiness = float(rng.uniform(0.005, 0.1))
        values = rng.normal(0.8, rng.uniform(0.001, 0.08), n).tolist()
        sd_f = flakiness / (2 * scipy.stats.norm.ppf(0.75))
        statistic = (n - 1) * np.var(values, ddof=1) / sd_f**2
        result = spread_test(values, flakiness)
        assert result.df == n - 1
        assert result.statistic == pytest.approx(statistic, rel=1e-9)
        assert result.p_value == pytest.approx(scipy.stats.chi2.sf(statistic, n - 1), rel=1e-7)
        assert sample_sd(values) == pytest.approx(np.std(values, ddof=1), rel=1e-12)


def test_with_no_flakiness_any_spread_is_beyond_it() -> None:
    assert spread_test([0.5, 0.5, 0.5], 0.0).p_value == 1.0
    assert spread_test([0.5, 0.51, 0.5], 0.0).p_value == 0.0
    assert spread_test([0.5], 0.03).df == 0


@pytest.mark.parametrize("df", [1, 2, 3, 6, 14, 59, 400])
@pytest.mark.parametrize("p", [0.5, 0.05, 0.0125, 0.01, 1e-4])
def test_chi2_isf_matches_scipy(df: int, p: float) -> None:
    assert chi2_isf(p, df) == pytest.approx(scipy.stats.chi2.isf(p, df), rel=1e-9)


@pytest.mark.parametrize("df", [1, 3, 7.5, 30])
@pytest.mark.parametrize("p", [0.9, 0.5, 0.25, 0.01, 1e-6, 1e-10])
def test_t_isf_matches_scipy_far_into_the_tail(df: float, p: float) -> None:
    assert t_isf(p, df) == pytest.approx(scipy.stats.t.isf(p, df), rel=1e-8)


def test_an_honest_eval_at_f_is_quarantined_at_the_stated_level_per_probe() -> None:
    """Normal trials whose true IQR is F: the fixed rule quarantines SPREAD_LEVEL of probes
    (exactly, the test is exact), the adaptive rule's first look SPREAD_LEVEL / looks."""
    k, sd_f = 7, 0.03 / IQR_PER_SD
    exact = scipy.stats.chi2.sf(scipy.stats.chi2.isf(SPREAD_LEVEL, k - 1), k - 1)
    assert exact == pytest.approx(SPREAD_LEVEL)
    rng = np.random.default_rng(11)
    fixed = make_spec(k=k, adaptive=False, threshold=0.5)
    probes = 3000
    flagged = sum(
        decide(fixed, trials(rng.normal(0.85, sd_f, k).tolist())).status is Status.QUARANTINE
        for _ in range(probes)
    )
    se = math.sqrt(SPREAD_LEVEL * (1 - SPREAD_LEVEL) / probes)
    assert abs(flagged / probes - SPREAD_LEVEL) < 4 * se


def test_the_level_is_split_over_the_looks_an_adaptive_probe_may_take() -> None:
    assert looks(make_spec(k=7, max_k=15)) == 4  # at 7, 10, 13 and 15
    assert spread_level(make_spec(k=7, max_k=15)) == pytest.approx(SPREAD_LEVEL / 4)
    assert looks(make_spec(k=7, max_k=7)) == 1
    assert looks(make_spec(k=7, max_k=15, adaptive=False)) == 1
    assert looks(make_spec(k=9, max_k=15)) == 3  # at 9, 12 and 15


def test_the_fence_is_the_contracts_formula_at_k_7_and_off_at_0() -> None:
    assert fence_multiplier(3.0, FENCE_REFERENCE_K) == 3.0
    assert fence_multiplier(0.0, 15) == 0.0


@pytest.mark.parametrize("fence", [1.5, 3.0, 6.0])
@pytest.mark.parametrize("k", [3, 5, 15, 30, 100, 1000])
def test_a_heavy_tailed_evals_chance_of_a_trial_below_the_fence_does_not_grow_with_k(
    fence: float, k: int
) -> None:
    """For Student's t (3 df) with the fence's width as its IQR: P(any of k trials below
    median - (0.5 + multiplier) IQR) is the same at every k as at k = 7 (scipy)."""
    t = scipy.stats.t(HEAVY_TAIL_DF)
    iqr = t.ppf(0.75) - t.ppf(0.25)

    def any_below(multiplier: float, n: int) -> float:
        return float(1 - (1 - t.cdf(-(0.5 + multiplier) * iqr)) ** n)

    reference = any_below(fence, FENCE_REFERENCE_K)
    assert any_below(fence_multiplier(fence, k), k) == pytest.approx(reference, rel=1e-6)
    assert fence_multiplier(fence, k) > fence_multiplier(fence, k - 1)


def test_a_collapse_reason_says_the_fence_was_stretched() -> None:
    scores = [0.9] * 7 + [0.91] * 7 + [0.2]
    decision = decide(make_spec(k=15, max_k=15), trials(scores))
    assert decision.status is Status.QUARANTINE
    assert "(outlier_fence 3 at k=7, stretched for 15 trials)" in decision.reason
    assert decision.reason.startswith("trial 14 (seed 1014) collapsed to 0.2, below the fence")


def test_a_collapse_with_the_rule_off_counts_for_neither_rule() -> None:
    scores = [0.9, 0.91, 0.9, 0.92, 0.9, 0.91, 0.1]
    decision = decide(make_spec(outlier_fence=0.0, threshold=0.5), trials(scores))
    assert decision.status is Status.PASS
    assert decision.stats.sd is not None and decision.stats.sd < 0.01  # the collapse left out
