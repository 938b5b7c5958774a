"""Regression against the default branch: the statistics against scipy and statsmodels, and
the verdicts on simulated evals whose truth is known."""

from __future__ import annotations

import random
import statistics
from collections import Counter

import pytest
from scipy import special, stats
from statsmodels.stats.multitest import multipletests

from firewall._stats import betainc
from firewall.regression import (
    MIN_RUNS,
    Judgement,
    RunMean,
    benjamini_hochberg,
    compare,
    judge,
    t_quantile,
    t_sf,
)


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 19, 30, 100, 2.5, 7.3])
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


def runs(
    rng: random.Random, level: float, *, count: int, drift: float, sd: float, k: int
) -> list[RunMean]:
    """Run means of an eval whose level moves by ``drift`` (sd) between runs."""
    out = []
    for _ in range(count):
        run_level = level + rng.gauss(0, drift)
        scores = [rng.gauss(run_level, sd) for _ in range(k)]
        out.append(RunMean(statistics.fmean(scores), statistics.stdev(scores), k))
    return out


def pull_request(
    rng: random.Random, *, drop: float, drift: float, sd: float, max_drop: float = 0.01
) -> str:
    """One pull request's verdict as `firewall run` reaches it: ten runs of main, a first
    look at k = 7 with half the level, and where it asks for them, trials up to max_k = 15
    (from the same run, so the same run effect) and a second look with the other half."""
    baseline = runs(rng, 0.85, count=10, drift=drift, sd=sd, k=7)
    run_level = 0.85 - drop + rng.gauss(0, drift)
    scores = [rng.gauss(run_level, sd) for _ in range(7)]

    def look(trials: list[float]) -> Judgement:
        current = RunMean(statistics.fmean(trials), statistics.stdev(trials), len(trials))
        return judge({"e": compare(current, baseline, max_drop)}, "main", max_k={"e": 15})["e"]

    first = look(scores)
    if not first.more_trials:
        return first.verdict
    return look(scores + [rng.gauss(run_level, sd) for _ in range(8)]).verdict


def rates(*, drop: float, drift: float, sd: float = 0.03, prs: int = 2000) -> dict[str, float]:
    rng = random.Random(20261201)
    counted = Counter(pull_request(rng, drop=drop, drift=drift, sd=sd) for _ in range(prs))
    return {verdict: count / prs for verdict, count in counted.items()}


# 2,000 pull requests: a rate of 5% is measured within +-0.5% (one Monte Carlo se); the
# bounds below allow two of those.


@pytest.mark.parametrize("drop", [0.005, 0.0075, 0.01])
def test_a_tolerated_drop_fails_at_most_five_percent_of_pull_requests(drop: float) -> None:
    assert rates(drop=drop, drift=0.005).get("regression", 0) <= 0.06


@pytest.mark.parametrize("drift", [0.01, 0.02])
def test_unchanged_pull_requests_under_drift_false_fail_at_most_five_percent(
    drift: float,
) -> None:
    assert rates(drop=0.0, drift=drift).get("regression", 0) <= 0.06


def test_drift_between_runs_is_not_a_regression_where_pooling_would_cry_wolf() -> None:
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
    assert rates(drop=0.08, drift=0.01).get("regression", 0) >= 0.8


def test_a_drop_within_max_drop_is_ok_when_the_runs_are_tight() -> None:
    assert rates(drop=0.0, drift=0.001, sd=0.002).get("ok", 0) >= 0.9


def test_extra_trials_help_where_drift_is_small() -> None:
    # Little drift, much trial noise: the extension narrows the standard error, and most
    # unchanged pull requests end OK rather than unclear.
    assert rates(drop=0.0, drift=0.0, sd=0.012).get("ok", 0) >= 0.5


def test_under_drift_no_trials_are_added_and_the_reason_names_the_drift() -> None:
    rng = random.Random(3)
    baseline = runs(rng, 0.85, count=10, drift=0.012, sd=0.01, k=7)
    current = RunMean(0.85, 0.01, 7)
    judgement = judge({"e": compare(current, baseline, 0.01)}, "main", max_k={"e": 15})["e"]
    assert judgement.verdict == "unclear" and not judgement.more_trials
    assert judgement.comparison is not None
    drift = f"run-to-run drift {judgement.comparison.drift:.3f} limits detection to drops of"
    assert drift in judgement.reason


def test_the_baseline_runs_own_noise_is_not_counted_as_drift() -> None:
    # Runs whose means differ by their trial noise alone (0.03 / sqrt(7) = 0.011): what is
    # left as drift is a fraction of that, so fifteen trials narrow the se.
    rng = random.Random(5)
    baseline = runs(rng, 0.85, count=200, drift=0.0, sd=0.03, k=7)
    comparison = compare(RunMean(0.85, 0.03, 7), baseline, 0.01)
    assert comparison is not None and comparison.drift < 0.03 / 7**0.5 / 2
    assert comparison.se_with(15) < 0.8 * comparison.se


def test_a_small_drop_with_few_trials_is_unclear_and_says_what_it_can_detect() -> None:
    # Five scattered runs of main with noisy trials, and a run 0.01 below their mean.
    baseline = [RunMean(m, 0.05, 7) for m in (0.85, 0.87, 0.83, 0.86, 0.84)]
    comparison = compare(RunMean(0.84, 0.05, 7), baseline, 0.01)
    judgement = judge({"e": comparison}, "main")["e"]
    assert judgement.verdict == "unclear" and comparison is not None
    detectable = comparison.detectable(0.025)
    assert detectable > 0.01 and f"these 7 trials detect drops of {detectable:.3f}" in (
        judgement.reason
    )


def test_the_detectable_drop_is_stated_at_the_level_bh_applies() -> None:
    baseline = [RunMean(m, 0.05, 7) for m in (0.85, 0.87, 0.83, 0.86, 0.84)]
    comparison = compare(RunMean(0.84, 0.05, 7), baseline, 0.01)
    others = {f"x{i}": compare(RunMean(0.86, 0.05, 7), baseline, 0.01) for i in range(9)}
    alone = judge({"e": comparison}, "main")["e"].reason
    among_ten = judge({"e": comparison, **others}, "main")["e"].reason
    assert comparison is not None
    assert f"{comparison.detectable(0.025):.3f}" in alone
    assert f"{comparison.detectable(0.0025):.3f}" in among_ten


def test_too_few_runs_of_the_default_branch_give_no_verdict() -> None:
    few = [RunMean(0.8, 0.01, 7)] * (MIN_RUNS - 1)
    judgement = judge({"e": compare(RunMean(0.5, 0.01, 7), few, 0.01)}, "main")["e"]
    assert judgement.verdict == "no-baseline" and "fewer than 3 runs of main" in judgement.reason


def test_without_drift_the_test_is_welchs_against_max_drop() -> None:
    # When the runs' means scatter no more than their trials explain, the se is the
    # baseline mean's and this run's, with Welch-Satterthwaite degrees of freedom: scipy's
    # Welch test of "mean(means) - mean(trials) > max_drop" is the oracle.
    rng = random.Random(11)
    checked = 0
    for _ in range(200):
        means = [rng.gauss(0.85, 0.004) for _ in range(rng.randint(3, 12))]
        baseline = [RunMean(m, 0.03, 7) for m in means]  # W = 0.03^2 / 7 > the spread
        trials = [rng.gauss(0.84, 0.03) for _ in range(rng.randint(3, 15))]
        current = RunMean(statistics.fmean(trials), statistics.stdev(trials), len(trials))
        comparison = compare(current, baseline, 0.01)
        assert comparison is not None and comparison.drift == 0.0
        welch = stats.ttest_ind(
            means, [t + 0.01 for t in trials], equal_var=False, alternative="greater"
        )
        se = (statistics.variance(means) / len(means) + current.sd**2 / current.n) ** 0.5
        assert comparison.se == pytest.approx(se, rel=1e-12)
        assert comparison.df == pytest.approx(welch.df, rel=1e-9)
        assert comparison.p == pytest.approx(welch.pvalue, rel=1e-7, abs=1e-12)
        checked += 1
    assert checked == 200


def test_with_drift_the_degrees_of_freedom_are_satterthwaites() -> None:
    baseline = [RunMean(m, s, n) for m, s, n in [(0.85, 0.02, 7), (0.9, 0.03, 9), (0.8, 0.01, 5)]]
    current = RunMean(0.84, 0.025, 11)
    comparison = compare(current, baseline, 0.01)
    assert comparison is not None
    b = statistics.variance([0.85, 0.9, 0.8])
    terms = [
        ((1 + 1 / 3) * b, 2),
        *((-(s**2 / n) / 3, n - 1) for _, s, n in [(0, 0.02, 7), (0, 0.03, 9), (0, 0.01, 5)]),
        (0.025**2 / 11, 10),
    ]
    total = sum(v for v, _ in terms)
    assert comparison.se == pytest.approx(total**0.5, rel=1e-12)
    df = total**2 / sum(v**2 / d for v, d in terms)
    assert comparison.df == pytest.approx(df, rel=1e-12)
    t = (comparison.drop - 0.01) / total**0.5
    assert comparison.p == pytest.approx(stats.t.sf(t, df), rel=1e-9)
