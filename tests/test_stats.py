"""firewall.stats against independent oracles: numpy/scipy quartiles, statsmodels for the rest."""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Sequence

import numpy as np
import pytest
import scipy.special
import scipy.stats
from statsmodels.stats.contingency_tables import cochrans_q as statsmodels_cochran
from statsmodels.stats.inter_rater import cohens_kappa as statsmodels_kappa
from statsmodels.stats.proportion import proportion_confint

from firewall import _stats as stats
from firewall._stats import (
    COCHRAN,
    DISPERSION,
    EPSILON,
    Stats,
    binomial_dispersion,
    chi2_sf,
    cochran_q,
    cohen_kappa,
    drift_rate,
    gamma_q,
    iqr,
    item_variance,
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


@pytest.mark.parametrize("scores", [*FIXED_ARRAYS, []])
def test_summarize_builds_the_stats_that_validation_would(scores: list[float]) -> None:
    """Built without validation (a decision makes one per eval): equal to the validated
    model, written alike, and with the fields set that the assignments would set."""
    stats = summarize(
        scores,
        [score >= 0.5 for score in scores],
        errors=1,
        confidence=0.9,
        latencies_ms=[120, 80.5],
        tokens=[3],
        costs_usd=[0.5, 0.25],
    )
    validated = Stats.model_validate(stats.model_dump())
    assert stats == validated
    assert stats.model_dump_json() == validated.model_dump_json()
    assert stats.model_fields_set == {"errors", *(k for k, v in stats if v is not None)}
    stats.sd = 0.5  # a model like any: the policy assigns the spread test's figures
    assert stats.model_dump()["sd"] == 0.5


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


# --- chi-square survival, the regularized upper incomplete gamma -------------------

RELATIVE = 1e-10
"""How close to scipy the survival function must be, relative to its value."""
SUBNORMAL = 1e-290  # below it scipy's own value has lost digits: both must merely be ~0


def assert_close_to(ours: float, oracle: float, where: object) -> None:
    if oracle > SUBNORMAL:
        assert abs(ours - oracle) <= RELATIVE * oracle, (where, ours, oracle)
    else:
        assert 0 <= ours < 1e-280, (where, ours, oracle)


def chi2_grid(df: int) -> list[float]:
    """Tiny and huge x, and a dense sweep over the body and both tails of chi2(df)."""
    body = np.linspace(0.01, 3 * df + 60, 120).tolist()
    return [1e-300, 1e-100, 1e-12, 1e-6, 1e-3, *body, 1e3, 5e3, 1e4, 1e5, 1e7]


def test_chi2_sf_matches_scipy_for_df_1_to_200_tiny_to_huge_x() -> None:
    for df in range(1, 201):
        xs = chi2_grid(df)
        for x, oracle in zip(xs, scipy.stats.chi2.sf(xs, df), strict=True):
            assert_close_to(chi2_sf(x, df), float(oracle), (df, x))


@pytest.mark.parametrize("df", [250, 999, 2_000, 9_999])  # up to a probe of max_k = 10,000
def test_chi2_sf_matches_scipy_for_many_degrees_of_freedom(df: int) -> None:
    xs = [*np.linspace(0.5 * df, 1.6 * df, 200).tolist(), 1.0, 3.0 * df]
    for x, oracle in zip(xs, scipy.stats.chi2.sf(xs, df), strict=True):
        assert_close_to(chi2_sf(x, df), float(oracle), (df, x))


@pytest.mark.parametrize("a", [1e-3, 0.1, 0.5, 0.77, 1.0, 2.5, 10.3, 77.7, 1_000.0])
def test_gamma_q_matches_scipy_gammaincc_for_non_integer_shapes(a: float) -> None:
    xs = [1e-200, 1e-10, 1e-3, *np.linspace(0.01, 5 * a + 30, 150).tolist(), a, a + 1]
    for x in xs:
        assert_close_to(gamma_q(a, x), float(scipy.special.gammaincc(a, x)), (a, x))


def test_chi2_sf_at_the_ends_of_its_range() -> None:
    assert chi2_sf(0.0, 3) == 1.0
    assert chi2_sf(-1.0, 3) == 1.0
    assert chi2_sf(float("inf"), 3) == 0.0
    assert chi2_sf(2.0, 2) == pytest.approx(np.exp(-1.0), rel=1e-15)  # chi2(2) is exponential


@pytest.mark.parametrize(("x", "df"), [(float("nan"), 3), (1.0, 0), (1.0, -2)])
def test_chi2_sf_rejects_what_is_not_a_distribution(x: float, df: float) -> None:
    with pytest.raises(ValueError):
        chi2_sf(x, df)


@pytest.mark.parametrize(("a", "x"), [(0.0, 1.0), (-1.0, 1.0), (1.0, -0.5)])
def test_gamma_q_rejects_arguments_outside_its_domain(a: float, x: float) -> None:
    with pytest.raises(ValueError):
        gamma_q(a, x)


# --- Cochran's Q and the binomial dispersion test ----------------------------------


def random_binary_tables() -> list[np.ndarray]:
    """Items x trials tables of every shape the policy meets: few and many items and trials,
    rates near 0, near 1 and in between, items of their own difficulty, shifted trials."""
    rng = np.random.default_rng(20261201)
    tables = []
    for _ in range(400):
        items, trials = int(rng.integers(1, 201)), int(rng.integers(2, 16))
        a, b = rng.uniform(0.2, 5, 2)
        difficulty = rng.beta(a, b, size=(items, 1))
        shift = rng.normal(0, rng.choice([0.0, 0.1, 0.3]), size=(1, trials))
        tables.append((rng.random((items, trials)) < np.clip(difficulty + shift, 0, 1)).astype(int))
    return tables


def test_cochran_q_matches_statsmodels_on_random_tables() -> None:
    compared = 0
    for table in random_binary_tables():
        ours = cochran_q(table.astype(bool).tolist())
        assert ours.df == table.shape[1] - 1
        if np.all((table.sum(axis=1) == 0) | (table.sum(axis=1) == table.shape[1])):
            assert (ours.statistic, ours.p_value) == (0.0, 1.0)  # statsmodels divides 0 by 0
            continue
        oracle = statsmodels_cochran(table)
        assert ours.statistic == pytest.approx(float(oracle.statistic), rel=1e-12, abs=1e-12)
        assert_close_to(ours.p_value, float(oracle.pvalue), table.shape)
        compared += 1
    assert compared > 300


def test_cochran_q_hand_case() -> None:
    # Columns 3, 2, 1 of N = 6; rows 2, 1, 3, 0: Q = 2 (3 x 14 - 36) / (3 x 6 - 14) = 3.
    table = [[True, True, False], [True, False, False], [True, True, True], [False] * 3]

    result = cochran_q(table)

    assert result.statistic == pytest.approx(3.0)
    assert result.df == 2
    assert result.p_value == pytest.approx(np.exp(-1.5))


def test_cochran_q_of_items_that_never_change_is_zero_with_p_one() -> None:
    assert cochran_q([[True] * 5, [False] * 5, [True] * 5]) == (0.0, 4, 1.0)


def test_constant_items_add_nothing_to_cochran_q() -> None:
    table = [[True, False, True, True], [False, False, True, False], [True, True, False, True]]
    padded = table + [[True] * 4] * 20 + [[False] * 4] * 20

    assert cochran_q(padded) == pytest.approx(cochran_q(table))


def test_binomial_dispersion_matches_scipy_chi2_contingency_on_random_tables() -> None:
    rng = np.random.default_rng(20261202)
    compared = 0
    for _ in range(400):
        k = int(rng.integers(2, 16))
        totals = rng.integers(1, 201, size=k)
        rate = rng.beta(*rng.uniform(0.2, 5, 2)) + rng.normal(0, rng.choice([0.0, 0.1]), k)
        passes = rng.binomial(totals, np.clip(rate, 0, 1))
        ours = binomial_dispersion(passes.tolist(), totals.tolist())
        assert ours.df == k - 1
        if passes.sum() in (0, totals.sum()):
            assert (ours.statistic, ours.p_value) == (0.0, 1.0)  # scipy: expected count of zero
            continue
        table = np.column_stack([passes, totals - passes])
        statistic, p_value, df, _ = scipy.stats.chi2_contingency(table, correction=False)
        assert df == k - 1
        assert ours.statistic == pytest.approx(statistic, rel=1e-10, abs=1e-12)
        assert_close_to(ours.p_value, float(p_value), table.tolist())
        compared += 1
    assert compared > 300


@pytest.mark.parametrize(
    ("passes", "totals"), [([1, 2], [2]), ([], []), ([3, 1], [2, 2]), ([0, 0], [0, 3])]
)
def test_binomial_dispersion_rejects_impossible_counts(
    passes: list[int], totals: list[int]
) -> None:
    with pytest.raises(ValueError):
        binomial_dispersion(passes, totals)


def test_a_single_sample_cannot_differ_from_itself() -> None:
    assert binomial_dispersion([3], [5]) == (0.0, 0, 1.0)
    assert cochran_q([[True], [False]]) == (0.0, 0, 1.0)


# --- item_variance: which test, on what -------------------------------------------------


def items_of(*rows: str) -> list[dict[str, float]]:
    """One trial per string; item i of a trial passes where the string has a 1 at i."""
    return [{f"case-{i}": float(c == "1") for i, c in enumerate(row)} for row in rows]


def test_item_variance_pairs_the_items_when_every_trial_ran_the_same_ones() -> None:
    trials = items_of("1101", "1001", "1111", "0001")

    test = item_variance(trials)

    assert test.name == COCHRAN == "Cochran's Q"
    table = [[bool(trial[case]) for trial in trials] for case in trials[0]]
    assert test.result == pytest.approx(cochran_q(table))
    assert test.pass_rate == pytest.approx(10 / 16)
    assert test.items == 4
    assert test.dispersion == pytest.approx(test.result.statistic / 3)
    assert test.noise == pytest.approx(np.sqrt(10 / 16 * 6 / 16 / 4))


def test_item_variance_compares_pass_counts_when_the_trials_ran_different_items() -> None:
    trials = items_of("1101", "1001", "1111")
    trials.append({"other-1": 1.0, "other-2": 0.0})

    test = item_variance(trials)

    assert test.name == DISPERSION == "chi-square dispersion"
    assert test.result == pytest.approx(binomial_dispersion([3, 2, 4, 1], [4, 4, 4, 2]))
    assert test.items == pytest.approx(14 / 4)


def test_item_variance_needs_items() -> None:
    with pytest.raises(ValueError):
        item_variance([])
    with pytest.raises(ValueError):
        item_variance([{"a": 1.0}, {}])


def test_stats_of_an_older_artefact_without_the_item_test_still_load() -> None:
    old = {"median": 0.9, "iqr": 0.01, "errors": 0}

    loaded = Stats.model_validate(old)

    assert loaded.item_test is None and loaded.item_p is None and loaded.dispersion is None
