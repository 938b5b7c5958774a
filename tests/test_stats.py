"""firewall.stats against independent oracles: numpy/scipy quartiles, statsmodels for the rest."""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Sequence

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.inter_rater import cohens_kappa as statsmodels_kappa
from statsmodels.stats.proportion import proportion_confint

from firewall import stats
from firewall.stats import (
    EPSILON,
    cohen_kappa,
    drift_rate,
    iqr,
    quartiles,
    summarize,
    wilson_interval,
)

FIXED_ARRAYS: list[list[float]] = [
    [0.5],
    [0.2, 0.9],
    [0.81, 0.79, 0.83, 0.80, 0.82, 0.78, 0.84],
    [0.92, 0.92, 0.92, 0.92, 0.92, 0.92, 0.35],
    [1.0, 0.0, 1.0, 1.0, 0.0],
    [0.0] * 5,
    [0.1, 0.4, 0.35, 0.8, 0.95, 0.6, 0.55, 0.05],
]


def random_arrays() -> list[list[float]]:
    rng = np.random.default_rng(20261129)
    sizes = [3, 4, 5, 7, 10, 15, 30, 101]
    return [rng.uniform(0, 1, size).tolist() for size in sizes] + [
        rng.integers(0, 2, size).astype(float).tolist() for size in sizes
    ]


ALL_ARRAYS = FIXED_ARRAYS + random_arrays()


# --- quartiles and IQR -------------------------------------------------------


@pytest.mark.parametrize("values", ALL_ARRAYS)
def test_quartiles_match_numpy_linear_percentiles(values: list[float]) -> None:
    q1, median, q3 = quartiles(values)

    assert median == pytest.approx(float(np.median(values)), abs=1e-12)
    assert q1 == pytest.approx(float(np.quantile(values, 0.25, method="linear")), abs=1e-12)
    assert q3 == pytest.approx(float(np.quantile(values, 0.75, method="linear")), abs=1e-12)


@pytest.mark.parametrize("values", ALL_ARRAYS)
def test_iqr_matches_scipy(values: list[float]) -> None:
    assert iqr(values) == pytest.approx(float(scipy.stats.iqr(values)), abs=1e-12)


def test_quartiles_interpolate_between_order_statistics() -> None:
    # 4 values: Q1 sits at rank 0.75 -> 1 + 0.75 * (2 - 1), Q3 at rank 2.25 -> 3 + 0.25 * (4 - 3)
    assert quartiles([4.0, 1.0, 3.0, 2.0]) == pytest.approx((1.75, 2.5, 3.25))


def test_iqr_of_the_documented_tight_eval_is_point_03_up_to_float_error() -> None:
    value = iqr([0.81, 0.79, 0.83, 0.80, 0.82, 0.78, 0.84])

    assert value == pytest.approx(0.03, abs=1e-12)
    assert value <= 0.03 + EPSILON


def test_summarize_reports_every_statistic() -> None:
    scores = [0.9, 0.7, 0.8, 1.0, 0.6]
    stats = summarize(
        scores,
        [s >= 0.8 for s in scores],
        errors=2,
        confidence=0.95,
        latencies_ms=[100, 200, 300, 400, 500],
        tokens=[10, 20, 30, 40, 50],
        costs_usd=[0.01, 0.02, 0.03, 0.04, 0.05],
    )

    assert stats.median == pytest.approx(0.8)
    assert stats.q1 == pytest.approx(0.7)
    assert stats.q3 == pytest.approx(0.9)
    assert stats.iqr == pytest.approx(scipy.stats.iqr(scores))
    assert stats.mean == pytest.approx(0.8)
    assert (stats.min, stats.max) == (0.6, 1.0)
    assert stats.pass_rate == pytest.approx(3 / 5)
    low, high = proportion_confint(3, 5, alpha=0.05, method="wilson")
    assert (stats.wilson_low, stats.wilson_high) == pytest.approx((low, high))
    assert stats.errors == 2
    assert stats.p50_latency_ms == pytest.approx(300)
    assert stats.p95_latency_ms == pytest.approx(np.percentile([100, 200, 300, 400, 500], 95))
    assert stats.mean_tokens == pytest.approx(30)
    assert stats.mean_cost_usd == pytest.approx(0.03)


def test_summarize_without_scores_leaves_score_statistics_unset() -> None:
    stats = summarize([], [], errors=7, confidence=0.95)

    assert stats.median is None and stats.iqr is None and stats.min is None
    assert stats.pass_rate is None and stats.wilson_low is None
    assert stats.p95_latency_ms is None and stats.mean_tokens is None
    assert stats.errors == 7


# --- Wilson interval -------------------------------------------------------------


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [(18, 20, 0.69897, 0.97213)],
)
def test_wilson_documented_interval(successes: int, n: int, low: float, high: float) -> None:
    assert wilson_interval(successes, n, 0.95) == pytest.approx((low, high), abs=5e-6)


@pytest.mark.parametrize(
    ("successes", "n", "low"),
    [(7, 7, 0.646), (5, 5, 0.566), (27, 30, 0.744)],
)
def test_wilson_documented_lower_bounds(successes: int, n: int, low: float) -> None:
    assert wilson_interval(successes, n)[0] == pytest.approx(low, abs=5e-4)


WILSON_GRID = [
    (successes, n, confidence)
    for n in (1, 2, 3, 5, 7, 10, 20, 30, 100)
    for successes in sorted({0, 1, n // 2, n - 1, n})
    for confidence in (0.8, 0.9, 0.95, 0.99)
]


@pytest.mark.parametrize(("successes", "n", "confidence"), WILSON_GRID)
def test_wilson_matches_statsmodels(successes: int, n: int, confidence: float) -> None:
    expected = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")

    low, high = wilson_interval(successes, n, confidence)

    assert (low, high) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("successes", "n", "confidence"), WILSON_GRID)
def test_wilson_interval_contains_the_observed_rate(
    successes: int, n: int, confidence: float
) -> None:
    low, high = wilson_interval(successes, n, confidence)

    assert 0.0 <= low <= successes / n <= high <= 1.0


@pytest.mark.parametrize("n", [1, 5, 7, 10, 20, 30, 100])
def test_wilson_bounds_are_exact_at_zero_and_all_successes(n: int) -> None:
    assert wilson_interval(0, n)[0] == 0.0
    assert wilson_interval(n, n, 0.99)[1] == 1.0


def test_wilson_widens_with_confidence() -> None:
    narrow = wilson_interval(9, 12, 0.8)
    wide = wilson_interval(9, 12, 0.99)

    assert wide[0] < narrow[0] and narrow[1] < wide[1]


def test_wilson_with_no_trials_knows_nothing() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("successes", "n", "confidence"),
    [
        (-1, 5, 0.95),
        (6, 5, 0.95),
        (1, -1, 0.95),
        (3, 5, 0.0),
        (3, 5, 1.0),
        (3, 5, 1.5),
        (3, 5, -0.1),
    ],
)
def test_wilson_rejects_impossible_arguments(successes: int, n: int, confidence: float) -> None:
    with pytest.raises(ValueError):
        wilson_interval(successes, n, confidence)


# --- Cohen's kappa ---------------------------------------------------------------


def contingency(rater_a: Sequence[Hashable], rater_b: Sequence[Hashable]) -> np.ndarray:
    labels = sorted(set(rater_a) | set(rater_b), key=repr)
    position = {label: i for i, label in enumerate(labels)}
    table = np.zeros((len(labels), len(labels)))
    for a, b in zip(rater_a, rater_b, strict=True):
        table[position[a], position[b]] += 1
    return table


def kappa_cases() -> list[tuple[list[str], list[str]]]:
    cases = [
        (
            ["yes"] * 20 + ["no"] * 10 + ["yes"] * 5 + ["no"] * 15,
            ["yes"] * 20 + ["yes"] * 10 + ["no"] * 5 + ["no"] * 15,
        ),
        (["a", "b", "c", "a", "b", "c"], ["a", "b", "c", "a", "b", "c"]),
        (["a", "b", "a", "b"], ["b", "a", "b", "a"]),
        (["a", "a", "a", "b"], ["a", "a", "a", "a"]),
        (["x"] * 6, ["y"] * 6),
    ]
    rng = np.random.default_rng(7)
    for n in (5, 12, 40, 200):
        a = rng.choice(["billing", "refund", "other"], n).tolist()
        b = [
            label if rng.random() < 0.7 else str(rng.choice(["billing", "refund", "other"]))
            for label in a
        ]
        cases.append((a, b))
    return cases


@pytest.mark.parametrize(("rater_a", "rater_b"), kappa_cases())
def test_cohen_kappa_matches_statsmodels(rater_a: list[str], rater_b: list[str]) -> None:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        # statsmodels also computes a z-test that divides by zero on degenerate tables
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = statsmodels_kappa(contingency(rater_a, rater_b)).kappa

    assert cohen_kappa(rater_a, rater_b) == pytest.approx(expected, abs=1e-12)


def test_cohen_kappa_hand_case() -> None:
    # P_o = 0.7; P_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = 0.2 / 0.5
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15

    assert cohen_kappa(a, b) == pytest.approx(0.4)


@pytest.mark.parametrize("label", ["pass", 1, True])
def test_cohen_kappa_is_undefined_when_both_raters_use_one_same_label(label: Hashable) -> None:
    result = cohen_kappa([label] * 8, [label] * 8)

    assert result is None


def test_cohen_kappa_of_no_cases_is_undefined() -> None:
    assert cohen_kappa([], []) is None


def test_cohen_kappa_rejects_raters_of_different_lengths() -> None:
    with pytest.raises(ValueError):
        cohen_kappa(["a", "b"], ["a"])


# --- drift rate ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], 0.0),
        (["billing"], 0.0),
        (["billing"] * 7, 0.0),
        (["billing"] * 6 + ["refund"], 1 / 7),
        (["a", "a", "b", "b", "c"], 3 / 5),
        (["a", "b", "c", "d"], 3 / 4),
        ([("refund", 10), ("refund", 10), ("refund", 20)], 1 / 3),
        ([None, None, "x"], 1 / 3),
    ],
)
def test_drift_rate_is_the_share_disagreeing_with_the_mode(
    values: list[Hashable], expected: float
) -> None:
    assert drift_rate(values) == pytest.approx(expected)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 15, 30, 41])
def test_percentile_is_numpy_to_the_last_bit(size: int) -> None:
    rng = np.random.default_rng(size)
    for _ in range(50):
        values = rng.random(size).round(int(rng.integers(1, 6))).tolist()
        for q in (0, 5, 25, 50, 75, 80, 95, 99, 100):
            assert stats.percentile(values, q) == float(np.percentile(values, q)), (values, q)


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        stats.percentile([], 50)
