"""Regression against the default branch: the statistics against scipy and statsmodels, and
the verdicts on simulated evals whose truth is known."""

from __future__ import annotations

import random
import statistics

import pytest
from scipy import special, stats
from statsmodels.stats.multitest import multipletests

from firewall._stats import betainc
from firewall.regression import (
    MIN_RUNS,
    RunMean,
    benjamini_hochberg,
    compare,
    judge,
    t_quantile,
    t_sf,
)


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 19, 30, 100])
@pytest.mark.parametrize("t", [-8.0, -2.5, -0.3, 0.0, 0.7, 1.96, 3.3, 12.0])
def test_t_tail_matches_scipy(t: float, df: int) -> None:
    assert t_sf(t, df) == pytest.approx(stats.t.sf(t, df), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("df", [1, 2, 4, 9, 29])
@pytest.mark.parametrize("q", [0.2, 0.5, 0.8, 0.95, 0.99])
def test_t_quantile_matches_scipy(q: float, df: int) -> None:
    assert t_quantile(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-7, abs=1e-9)


@pytest.mark.parametrize(("a", "b"), [(0.5, 0.5), (1, 3), (4.5, 0.5), (20, 7), (0.1, 50)])
@pytest.mark.parametrize("x", [1e-6, 0.01, 0.3, 0.5, 0.9, 0.999])
def test_incomplete_beta_matches_scipy(a: float, b: float, x: float) -> None:
    assert betainc(a, b, x) == pytest.approx(special.betainc(a, b, x), rel=1e-9, abs=1e-14)


def test_benjamini_hochberg_matches_statsmodels() -> None:
    rng = random.Random(7)
    for _ in range(200):
        p = {f"e{i}": rng.random() ** rng.choice([1, 3, 8]) for i in range(rng.randint(1, 25))}
        keys = list(p)
        rejected, *_ = multipletests([p[k] for k in keys], alpha=0.05, method="fdr_bh")
        assert benjamini_hochberg(p) == {k for k, r in zip(keys, rejected, strict=True) if r}


def runs(rng: random.Random, level: float, *, count: int, drift: float, sd: float, k: int):
    """Run means of an eval whose level moves by ``drift`` (sd) between runs."""
    out = []
    for _ in range(count):
        run_level = level + rng.gauss(0, drift)
        scores = [min(1.0, max(0.0, rng.gauss(run_level, sd))) for _ in range(k)]
        out.append(RunMean(statistics.fmean(scores), statistics.stdev(scores), k))
    return out


def verdicts(*, drop: float, drift: float, sd: float = 0.03, k: int = 7, trials: int = 2000):
    rng = random.Random(20261201)
    counted: dict[str, int] = {}
    for _ in range(trials):
        baseline = runs(rng, 0.85, count=10, drift=drift, sd=sd, k=k)
        (current,) = runs(rng, 0.85 - drop, count=1, drift=drift, sd=sd, k=k)
        verdict = judge({"e": compare(current, baseline)}, {"e": 0.01}, "main")["e"].verdict
        counted[verdict] = counted.get(verdict, 0) + 1
    return {key: value / trials for key, value in counted.items()}


def test_drift_between_runs_is_not_a_regression() -> None:
    # Runs that move by 0.02 between them, trials by 0.03 within: no change at all. The
    # test holds its 5% level (within the simulation's own noise of about 0.5%)...
    rates = verdicts(drop=0.0, drift=0.02)
    assert rates.get("regression", 0) <= 0.065
    # ... where pooling the earlier runs' trials, as if runs did not drift, cries wolf often.
    rng = random.Random(20261201)
    naive = 0
    for _ in range(2000):
        baseline = runs(rng, 0.85, count=10, drift=0.02, sd=0.03, k=7)
        (current,) = runs(rng, 0.85, count=1, drift=0.02, sd=0.03, k=7)
        pooled = statistics.fmean(run.mean for run in baseline)
        se = (0.03**2 / 70 + current.sd**2 / current.n) ** 0.5
        naive += (pooled - current.mean) / se > 1.645 and pooled - current.mean > 0.01
    assert naive / 2000 > 0.15


def test_a_real_drop_is_found() -> None:
    rates = verdicts(drop=0.08, drift=0.01)
    assert rates.get("regression", 0) >= 0.8


def test_a_drop_within_max_drop_is_ok_when_the_runs_are_tight() -> None:
    rates = verdicts(drop=0.0, drift=0.001, sd=0.002, k=15)
    assert rates.get("ok", 0) >= 0.9


def test_a_small_drop_with_few_trials_is_unclear_and_says_what_it_can_detect() -> None:
    # Five scattered runs of main, and a run 0.01 below their mean: neither proved nor excluded.
    baseline = [RunMean(m, 0.05, 7) for m in (0.85, 0.87, 0.83, 0.86, 0.84)]
    judgement = judge({"e": compare(RunMean(0.84, 0.05, 7), baseline)}, {"e": 0.01}, "main")["e"]
    assert judgement.verdict == "unclear"
    assert judgement.comparison is not None and judgement.comparison.detectable > 0.01
    detectable = f"these trials detect drops of {judgement.comparison.detectable:.3f} or more"
    assert detectable in judgement.reason and "max_drop is 0.01" in judgement.reason


def test_too_few_runs_of_the_default_branch_give_no_verdict() -> None:
    few = [RunMean(0.8, 0.01, 7)] * (MIN_RUNS - 1)
    judgement = judge({"e": compare(RunMean(0.5, 0.01, 7), few)}, {"e": 0.01}, "main")["e"]
    assert judgement.verdict == "no-baseline" and "fewer than 3 runs of main" in judgement.reason
