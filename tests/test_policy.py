"""firewall.policy.decide: the rule table of contract §4, row by row, first match wins."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest
import scipy.stats
from builders import check_named, error_trial, make_spec, trial, trials, with_metrics

from firewall.diagnostics import format_check
from firewall.policy import Decision, Status, decide
from firewall.runner.trial import TrialRecord
from firewall.text import fmt

STABLE = [0.92, 0.91, 0.93, 0.92, 0.92, 0.91, 0.93]  # median 0.92, iqr 0.01
SCATTERED = [0.5, 0.9, 0.6, 0.95, 0.7, 0.85, 0.55]  # iqr 0.3
TIGHT_AT_F = [0.81, 0.79, 0.83, 0.80, 0.82, 0.78, 0.84]  # iqr 0.029999999999999916
COLLAPSED = [0.92] * 6 + [0.35]


def binary(passes: int, fails: int) -> list[TrialRecord]:
    """Pass/fail trials as a plain test reports them: 1.0 or 0.0."""
    return trials([1.0] * passes + [0.0] * fails)


def assert_one_line(decision: Decision) -> None:
    assert decision.reason
    assert "\n" not in decision.reason and "\r" not in decision.reason


def check_names(decision: Decision) -> list[str]:
    return [check.name for check in decision.checks]


def assert_decided_by(decision: Decision, name: str) -> None:
    """The check called ``name`` failed, and it is the rule that decided: no other check
    failed, and none was recorded after it (first match wins, so no later rule ran)."""
    deciding = check_named(decision.checks, name)
    assert not deciding.ok
    assert [check.name for check in decision.checks if not check.ok] == [name]
    # Positional on purpose: that the deciding rule is the last one recorded is the point.
    assert decision.checks[-1] == deciding


# --- row 1: error -----------------------------------------------------------------


def test_error_when_more_trials_errored_than_max_errors() -> None:
    records = [error_trial("judge timed out", index=0)]
    records += [trial(score, index=i) for i, score in enumerate(STABLE[1:], start=1)]

    decision = decide(make_spec(max_errors=0), records)

    assert decision.status is Status.ERROR
    assert "1 of 7 trials errored" in decision.reason
    assert "max_errors 0" in decision.reason
    assert "judge timed out" in decision.reason  # the first error, so the log says why
    assert_one_line(decision)
    assert_decided_by(decision, "errors")
    assert check_names(decision) == ["errors"]  # the first rule decided: nothing else ran


def test_exactly_max_errors_errored_trials_are_tolerated() -> None:
    records = [error_trial(index=0), error_trial(index=1)] + [
        trial(score, index=i) for i, score in enumerate(STABLE[2:], start=2)
    ]

    decision = decide(make_spec(max_errors=2), records)

    assert decision.status is Status.PASS
    assert decision.stats.errors == 2
    assert decision.stats.median == pytest.approx(0.92)  # over the trials that scored
    assert check_named(decision.checks, "errors").ok


def test_error_outranks_a_violation() -> None:
    records = [error_trial(index=0)] + [
        trial(score, index=i, violations=["pii-in-reply"]) for i, score in enumerate(STABLE[1:], 1)
    ]

    decision = decide(make_spec(max_errors=0), records)

    assert decision.status is Status.ERROR


def test_error_when_every_trial_errored_even_within_max_errors() -> None:
    records = [error_trial(index=i) for i in range(3)]

    decision = decide(make_spec(k=3, max_errors=5), records)

    assert decision.status is Status.ERROR
    assert "3 of 3" in decision.reason


def test_error_reason_stays_on_one_line_when_the_trial_error_has_several() -> None:
    records = [error_trial("Traceback (most recent call last):\n  boom\r\nValueError: x", index=0)]
    records += [trial(0.92, index=i) for i in range(1, 7)]

    decision = decide(make_spec(), records)

    assert decision.status is Status.ERROR
    assert "boom" in decision.reason and "ValueError: x" in decision.reason
    assert_one_line(decision)


# --- row 2: violation -------------------------------------------------------------


def test_any_violation_fails_even_with_perfect_scores() -> None:
    records = trials([1.0] * 7)
    records[4] = trial(1.0, index=4, seed=4321, violations=["pii-in-reply"])

    decision = decide(make_spec(), records)

    assert decision.status is Status.FAIL
    assert "pii-in-reply" in decision.reason
    assert "trial 4" in decision.reason and "4321" in decision.reason
    assert_one_line(decision)
    assert_decided_by(decision, "violations")


def test_violation_outranks_quarantine() -> None:
    records = trials(SCATTERED)
    records[0] = trial(SCATTERED[0], index=0, violations=["refund-without-approval"])

    decision = decide(make_spec(), records)

    assert decision.status is Status.FAIL
    assert "refund-without-approval" in decision.reason


def test_violation_fails_when_the_errors_are_within_max_errors() -> None:
    records = [error_trial(index=0)] + [trial(1.0, index=i) for i in range(1, 7)]
    records[3] = trial(1.0, index=3, violations=["leaked-key"])

    decision = decide(make_spec(max_errors=1), records)

    assert decision.status is Status.FAIL


def test_violation_reason_stays_on_one_line() -> None:
    records = trials([1.0] * 7)
    records[0] = trial(1.0, index=0, violations=["multi\nline"])

    decision = decide(make_spec(), records)

    assert decision.status is Status.FAIL
    assert_one_line(decision)


# --- row 3: quarantine (instability) ----------------------------------------------


def test_quarantine_when_the_spread_is_significantly_beyond_flakiness() -> None:
    decision = decide(make_spec(flakiness=0.03), trials(SCATTERED))

    assert decision.status is Status.QUARANTINE
    assert decision.reason.startswith("spread beyond flakiness 0.03: sd 0.18 against 0.022")
    assert "iqr 0.3" in decision.reason and "p = " in decision.reason
    assert "median 0.7" in decision.reason and "k=7" in decision.reason
    assert_one_line(decision)
    assert_decided_by(decision, "spread")


def test_quarantine_outranks_a_median_below_threshold() -> None:
    decision = decide(make_spec(threshold=0.95), trials(SCATTERED))

    assert decision.status is Status.QUARANTINE


def test_an_iqr_of_point_03_up_to_float_error_is_not_above_flakiness_point_03() -> None:
    decision = decide(make_spec(flakiness=0.03, threshold=0.8), trials(TIGHT_AT_F))

    assert decision.stats.iqr is not None and decision.stats.iqr != 0.03  # really float noise
    assert decision.stats.iqr == pytest.approx(0.03)
    assert decision.status is Status.PASS


def test_an_iqr_a_float_error_above_flakiness_is_not_above_it() -> None:
    scores = [0.7, 0.7, 0.7, 0.71, 0.73, 0.73, 0.73]  # iqr 0.73 - 0.7 = 0.030000000000000027

    decision = decide(make_spec(flakiness=0.03, threshold=0.7), trials(scores))

    assert decision.stats.iqr is not None and decision.stats.iqr > 0.03  # the slack is needed
    assert decision.status is Status.PASS


def test_the_eval_own_flakiness_applies() -> None:
    decision = decide(make_spec(flakiness=0.35, threshold=0.6), trials(SCATTERED))

    assert decision.status is Status.PASS


def test_quarantine_when_one_trial_collapses_below_the_fence() -> None:
    decision = decide(make_spec(), trials(COLLAPSED))

    assert decision.stats.iqr == pytest.approx(0.0)  # the IQR alone cannot see it
    assert decision.status is Status.QUARANTINE
    assert "0.35" in decision.reason  # the collapsed score
    assert "0.83" in decision.reason  # the fence: q1 0.92 - 3 x max(0, 0.03)
    assert "trial 6" in decision.reason
    assert_one_line(decision)
    assert_decided_by(decision, "collapse fence")


def test_outlier_fence_zero_turns_the_collapse_rule_off() -> None:
    decision = decide(make_spec(outlier_fence=0), trials(COLLAPSED))

    assert decision.status is Status.PASS
    assert "collapse fence" not in check_names(decision)


def test_a_trial_on_the_fence_has_not_collapsed() -> None:
    # fence = 0.92 - 3 * 0.03 = 0.83 (0.8300000000000001 in floats)
    decision = decide(make_spec(), trials([0.92] * 6 + [0.83]))

    assert decision.status is Status.PASS


def test_the_fence_is_at_least_flakiness_wide() -> None:
    # iqr 0, flakiness 0.1: fence = q1 0.92 - 3 * max(0, 0.1) = 0.62
    spec = make_spec(flakiness=0.1)

    assert decide(spec, trials([0.92] * 6 + [0.65])).status is Status.PASS
    assert decide(spec, trials([0.92] * 6 + [0.6])).status is Status.QUARANTINE


def test_collapse_outranks_a_median_below_threshold() -> None:
    decision = decide(make_spec(threshold=0.95), trials(COLLAPSED))

    assert decision.status is Status.QUARANTINE


def test_min_pass_rate_evals_are_exempt_from_the_iqr_rule() -> None:
    records = binary(12, 8)  # iqr 1.0, median 1.0, Wilson low 0.387

    assert decide(make_spec(k=20), records).status is Status.QUARANTINE
    decision = decide(make_spec(k=20, min_pass_rate=0.3), records)

    assert decision.status is Status.PASS
    assert "iqr" not in check_names(decision) and "collapse fence" not in check_names(decision)


def test_min_pass_rate_evals_are_exempt_from_the_collapse_rule() -> None:
    records = binary(27, 3)  # iqr 0, yet three trials at 0 far below q1 = 1

    assert decide(make_spec(k=30), records).status is Status.QUARANTINE
    assert decide(make_spec(k=30, min_pass_rate=0.7), records).status is Status.PASS


# --- row 4: median below threshold ------------------------------------------------


def test_fail_when_a_stable_median_is_below_threshold() -> None:
    scores = [0.6, 0.6, 0.61, 0.61, 0.61, 0.62, 0.59]

    decision = decide(make_spec(threshold=0.85), trials(scores))

    assert decision.status is Status.FAIL
    assert decision.reason == "median 0.61 < threshold 0.85 (iqr 0.01, k=7)"
    assert_decided_by(decision, "median")


def test_median_equal_to_threshold_up_to_float_error_passes() -> None:
    score = 0.1 + 0.7  # 0.7999999999999999

    decision = decide(make_spec(threshold=0.8), trials([score] * 7))

    assert decision.status is Status.PASS


def test_median_fail_outranks_the_pass_rate_gate_and_budgets() -> None:
    records = with_metrics(binary(2, 5), latency_ms=[9999.0] * 7)

    decision = decide(make_spec(min_pass_rate=0.9, budgets={"p95_latency_ms": 10.0}), records)

    assert decision.status is Status.FAIL
    assert decision.reason.startswith("median 0 < threshold 0.8")


# --- row 5: Wilson lower bound below min_pass_rate ------------------------------


def test_fail_when_wilson_lower_bound_is_below_min_pass_rate() -> None:
    decision = decide(make_spec(k=30, min_pass_rate=0.75), binary(27, 3))

    assert decision.status is Status.FAIL
    assert decision.stats.wilson_low == pytest.approx(0.7438, abs=1e-4)
    assert "27/30" in decision.reason
    assert "0.744" in decision.reason and "0.75" in decision.reason and "0.95" in decision.reason
    assert_one_line(decision)
    assert_decided_by(decision, "wilson lower bound")


def test_pass_when_wilson_lower_bound_reaches_min_pass_rate() -> None:
    decision = decide(make_spec(k=30, min_pass_rate=0.74), binary(27, 3))

    assert decision.status is Status.PASS
    # Pins the checklist and its order: the rules run in the contract's order (§4).
    assert check_names(decision) == ["errors", "violations", "median", "wilson lower bound"]
    assert all(check.ok for check in decision.checks)


def test_a_perfect_seven_of_seven_cannot_prove_a_ninety_percent_pass_rate() -> None:
    decision = decide(make_spec(k=7, min_pass_rate=0.9, adaptive=False), binary(7, 0))

    assert decision.status is Status.FAIL
    assert "0.646" in decision.reason


def test_the_eval_confidence_sets_the_wilson_bound() -> None:
    records = binary(27, 3)

    fixed = {"min_pass_rate": 0.75, "adaptive": False}
    assert decide(make_spec(confidence=0.9, **fixed), records).status is Status.PASS
    assert decide(make_spec(confidence=0.95, **fixed), records).status is Status.FAIL


def test_passed_overrides_the_score_in_the_pass_rate() -> None:
    records = [trial(1.0, index=i, passed=i < 4) for i in range(7)]  # 4/7 passed

    decision = decide(make_spec(min_pass_rate=0.5), records)

    assert decision.stats.pass_rate == pytest.approx(4 / 7)
    assert decision.status is Status.FAIL


def test_wilson_fail_outranks_budgets() -> None:
    records = with_metrics(binary(27, 3), tokens=[10_000.0] * 30)

    decision = decide(make_spec(min_pass_rate=0.75, budgets={"mean_tokens": 10.0}), records)

    assert decision.status is Status.FAIL
    assert "wilson" in decision.reason


# --- row 6: budgets ---------------------------------------------------------------

LATENCIES = [100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0]  # p95 (linear) = 670
BUDGET_CHECKS = {
    "p95_latency_ms": "p95 latency",
    "mean_tokens": "mean tokens",
    "mean_cost_usd": "mean cost",
}  # the name of each budget's check


@pytest.mark.parametrize(
    ("budget", "metric", "values", "limit", "shown"),
    [
        ("p95_latency_ms", "latency_ms", LATENCIES, 650.0, "670"),
        ("mean_tokens", "tokens", [400.0, 420.0, 440.0, 460.0, 480.0, 500.0, 520.0], 450.0, "460"),
        (
            "mean_cost_usd",
            "cost_usd",
            [0.002, 0.003, 0.004, 0.003, 0.002, 0.004, 0.003],
            0.002,
            "0.003",
        ),
    ],
)
def test_fail_when_a_budget_is_exceeded(
    budget: str, metric: str, values: list[float], limit: float, shown: str
) -> None:
    records = with_metrics(trials(STABLE), **{metric: values})

    decision = decide(make_spec(budgets={budget: limit}), records)

    assert decision.status is Status.FAIL
    assert "budget" in decision.reason
    assert shown in decision.reason and f"{limit:g}" in decision.reason
    assert_one_line(decision)
    assert_decided_by(decision, BUDGET_CHECKS[budget])


def test_p95_latency_is_the_linear_95th_percentile() -> None:
    records = with_metrics(trials(STABLE), latency_ms=LATENCIES)

    assert decide(make_spec(budgets={"p95_latency_ms": 670.0}), records).status is Status.PASS
    assert decide(make_spec(budgets={"p95_latency_ms": 669.0}), records).status is Status.FAIL


def test_budgets_within_limits_pass_and_are_checked() -> None:
    records = with_metrics(
        trials(STABLE), latency_ms=LATENCIES, tokens=[400.0] * 7, cost_usd=[0.002] * 7
    )
    spec = make_spec(budgets={"p95_latency_ms": 800.0, "mean_tokens": 500.0, "mean_cost_usd": 0.01})

    decision = decide(spec, records)

    assert decision.status is Status.PASS
    # Pins the order: the budgets are checked last, in this order.
    assert check_names(decision)[-3:] == ["p95 latency", "mean tokens", "mean cost"]
    assert all(check.ok for check in decision.checks)


@pytest.mark.parametrize(
    ("budget", "metric"),
    [("p95_latency_ms", "latency_ms"), ("mean_tokens", "tokens"), ("mean_cost_usd", "cost_usd")],
)
def test_a_budget_without_its_metric_is_an_error(budget: str, metric: str) -> None:
    decision = decide(make_spec(budgets={budget: 1.0}), trials(STABLE))

    assert decision.status is Status.ERROR
    assert budget in decision.reason and f"metrics.{metric}" in decision.reason
    assert_one_line(decision)


# --- row 7: pass ------------------------------------------------------------------


def test_pass_otherwise_with_the_numbers_in_the_reason() -> None:
    decision = decide(make_spec(), trials(STABLE))

    assert decision.status is Status.PASS
    assert decision.reason == "median 0.92 >= threshold 0.8 (iqr 0.01, k=7)"
    # Pins the checklist and its order: the rules run in the contract's order (§4).
    assert check_names(decision) == ["errors", "violations", "spread", "collapse fence", "median"]
    assert all(check.ok for check in decision.checks)


def test_checks_show_actual_against_allowed() -> None:
    decision = decide(make_spec(flakiness=0.03), trials(SCATTERED))

    spread = check_named(decision.checks, "spread")
    assert spread.actual.startswith("sd 0.18, p ") and spread.allowed == ">= 0.0125"
    assert format_check(spread).startswith("FAIL spread sd 0.18, p ")
    assert format_check(spread).endswith(" < 0.0125")


@pytest.mark.parametrize(
    "scores",
    [STABLE, SCATTERED, TIGHT_AT_F, COLLAPSED, [0.1] * 7, [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]],
)
def test_every_decision_has_a_one_line_reason(scores: list[float]) -> None:
    assert_one_line(decide(make_spec(), trials(scores)))


def test_status_labels_are_upper_case_and_values_lower_case() -> None:
    assert [status.value for status in Status] == [
        "pass",
        "fail",
        "quarantine",
        "quarantined",
        "error",
    ]
    assert Status.QUARANTINE.label == "QUARANTINE"


@pytest.mark.parametrize("status", list(Status))
def test_a_status_reads_as_its_value_on_every_python(status: Status) -> None:
    # Python 3.11 changed format() of str-mixin enums; templates and f-strings must not care.
    assert f"{status}" == str(status) == status.value
    assert status.label == status.value.upper()


# --- min_scored and "n of k scored" -------------------------------------------------


def test_the_reason_says_how_many_trials_scored_when_some_errored() -> None:
    records = [error_trial(index=0)] + [trial(0.81, index=i) for i in range(1, 7)]

    decision = decide(make_spec(max_errors=1), records)

    assert decision.status is Status.PASS
    assert decision.reason == "median 0.81 >= threshold 0.8 (iqr 0, 6 of 7 scored)"
    assert check_named(decision.checks, "scored").ok


def test_error_when_fewer_than_min_scored_trials_scored_within_max_errors() -> None:
    records = [error_trial("judge timed out", index=i) for i in range(5)]
    records += [trial(0.92, index=5), trial(0.92, index=6)]

    decision = decide(make_spec(max_errors=5, min_scored=3), records)

    assert decision.status is Status.ERROR
    assert decision.reason.startswith(
        "5 of 7 trials errored, leaving 2 scored, fewer than min_scored 3; trial 0 (seed 1000):"
    )
    assert "judge timed out" in decision.reason
    assert check_named(decision.checks, "errors").ok  # within max_errors: min_scored decided
    assert_decided_by(decision, "scored")


def test_exactly_min_scored_trials_scored_is_enough() -> None:
    records = [error_trial(index=i) for i in range(4)] + [trial(0.9, index=i) for i in (4, 5, 6)]

    decision = decide(make_spec(max_errors=4, min_scored=3), records)

    assert decision.status is Status.PASS
    assert "3 of 7 scored" in decision.reason


def test_min_scored_one_lets_a_single_scored_trial_decide() -> None:
    records = [error_trial(index=i) for i in range(6)] + [trial(0.9, index=6)]

    decision = decide(make_spec(max_errors=6, min_scored=1), records)

    assert decision.status is Status.PASS
    assert "1 of 7 scored" in decision.reason


def test_a_probe_shorter_than_min_scored_is_an_error_even_without_errors() -> None:
    decision = decide(make_spec(k=3, min_scored=5), trials([0.9, 0.9, 0.9]))

    assert decision.status is Status.ERROR
    assert decision.reason == "only 3 scored, fewer than min_scored 5"
    assert_decided_by(decision, "scored")


def test_max_errors_still_decides_first() -> None:
    records = [error_trial(index=i) for i in range(5)] + [trial(0.9, index=i) for i in (5, 6)]

    decision = decide(make_spec(max_errors=1, min_scored=3), records)

    assert "5 of 7 trials errored (max_errors 1)" in decision.reason
    assert_decided_by(decision, "errors")


@pytest.mark.parametrize(
    ("scores", "overrides", "expected"),
    [
        (SCATTERED[1:], {}, "(median 0.775, iqr 0.262, 6 of 7 scored)"),
        (COLLAPSED[1:], {}, "(median 0.92, iqr 0, 6 of 7 scored)"),
        ([0.6] * 6, {"threshold": 0.85}, "median 0.6 < threshold 0.85 (iqr 0, 6 of 7 scored)"),
    ],
)
def test_every_reason_past_the_error_rule_counts_the_scored_trials(
    scores: list[float], overrides: dict[str, float], expected: str
) -> None:
    records = [error_trial(index=0)] + [trial(s, index=i) for i, s in enumerate(scores, 1)]

    decision = decide(make_spec(max_errors=1, **overrides), records)

    assert decision.status is not Status.ERROR
    assert decision.reason.endswith(expected)


def test_violation_wilson_and_budget_reasons_count_the_scored_trials() -> None:
    errored = [error_trial(index=0)]
    violated = errored + [trial(1.0, index=i, violations=["leak"] * (i == 3)) for i in range(1, 7)]
    wilson = errored + [trial(1.0, index=i) for i in range(1, 30)]
    budget = errored + with_metrics([trial(0.92, index=i) for i in range(1, 7)], tokens=[900.0] * 6)

    def reason(records: list[TrialRecord], **overrides: object) -> str:
        return decide(make_spec(max_errors=1, **overrides), records).reason

    assert reason(violated).endswith("(6 of 7 scored)")
    assert reason(wilson, k=30, min_pass_rate=0.95).endswith("(29 of 30 scored)")
    assert "29/29" in reason(wilson, k=30, min_pass_rate=0.95)
    assert reason(budget, budgets={"mean_tokens": 10.0}).endswith("(6 of 7 scored)")


# --- item-aware instability (contract §4) ------------------------------------------------


def item_trials(
    counts: list[int], n: int = 50, *, items: str = "shared", errors: int = 0
) -> list[TrialRecord]:
    """Trials of an accuracy over ``n`` binary items, trial j passing ``counts[j]`` of them.

    ``items``: "shared", every trial runs cases 0..n-1 and passes a seeded
    random choice of them; "nested", trial j passes the first counts[j] (so
    the trials differ by nothing but their counts); "sampled", each trial runs
    cases of its own, as a sampled eval does.
    """
    records = [error_trial(index=i) for i in range(errors)]
    for j, passes in enumerate(counts, start=errors):
        prefix = f"trial{j}-case" if items == "sampled" else "case"
        chosen = range(passes) if items == "nested" else random.Random(j).sample(range(n), passes)
        passed = set(chosen)
        cases = {f"{prefix}-{i}": 1.0 if i in passed else 0.0 for i in range(n)}
        records.append(trial(passes / n, index=j, items=cases))
    return records


HONEST = [45, 44, 46, 45, 43, 47, 41]  # accuracies 0.82..0.94 over 50 items: iqr 0.04 > F


def test_an_accuracy_that_scatters_by_binomial_noise_is_not_quarantined() -> None:
    records = item_trials(HONEST, items="sampled")

    assert decide(make_spec(), trials([r.score or 0 for r in records])).status is (
        Status.QUARANTINE
    )  # what the IQR rule alone would say
    decision = decide(make_spec(), records)

    assert decision.status is Status.PASS
    assert decision.stats.iqr == pytest.approx(0.04)
    # The item eval's checklist: the fence first (it names a collapsed trial), then the test.
    assert check_names(decision) == [
        "errors",
        "violations",
        "collapse fence",
        "item variance",
        "median",
    ]
    check = check_named(decision.checks, "item variance")
    assert check.ok and check.allowed == ">= 0.01"
    assert check.actual.startswith("p ") and check.actual.endswith("(chi-square dispersion)")
    assert decision.stats.item_test == "chi-square dispersion"
    assert decision.stats.item_p is not None and decision.stats.item_p > 0.01
    assert decision.stats.dispersion == pytest.approx(scipy_dispersion(HONEST, [50] * 7), rel=1e-12)
    assert decision.stats.items_per_trial == 50
    assert decision.reason.startswith("median 0.9 >= threshold 0.8 (iqr 0.04, item variance p = ")
    assert decision.reason.endswith(", k=7)")


def scipy_dispersion(passes: list[int], totals: list[int]) -> float:
    """Pearson's chi-square of the k x 2 table, per degree of freedom, from scipy."""
    table = np.column_stack([passes, np.subtract(totals, passes)])
    statistic, _, df, _ = scipy.stats.chi2_contingency(table, correction=False)
    return float(statistic / df)


def test_trials_that_differ_beyond_binomial_noise_are_quarantined_naming_the_test() -> None:
    records = item_trials([45, 46, 44, 45, 33, 34, 32])  # three trials at 0.66, four at 0.9

    decision = decide(make_spec(), records)

    assert decision.status is Status.QUARANTINE
    assert decision.reason.startswith("between-trial variance ")
    assert "x binomial (p = " in decision.reason
    assert "Cochran's Q; median 0.88, 50 items, k=7)" in decision.reason
    assert_decided_by(decision, "item variance")
    assert decision.stats.item_test == "Cochran's Q"
    assert decision.stats.item_p is not None and decision.stats.item_p < 0.01
    assert decision.stats.dispersion is not None and decision.stats.dispersion > 2
    assert_one_line(decision)


def test_the_dispersion_in_the_reason_is_the_statistic_per_degree_of_freedom() -> None:
    decision = decide(make_spec(), item_trials([45, 46, 44, 45, 33, 34, 32], items="sampled"))

    assert decision.stats.dispersion == pytest.approx(
        scipy_dispersion([45, 46, 44, 45, 33, 34, 32], [50] * 7)
    )
    assert f"{decision.stats.dispersion:.1f}x binomial" in decision.reason
    assert "chi-square dispersion" in decision.reason


def test_a_tiny_p_value_is_shown_in_scientific_notation_not_as_zero() -> None:
    decision = decide(make_spec(), item_trials([49, 50, 49, 50, 20, 21, 19]))

    assert decision.stats.item_p is not None and decision.stats.item_p < 1e-6
    assert "p = 0;" not in decision.reason and "e-" in decision.reason


def test_a_collapsed_trial_of_an_item_eval_is_caught_by_the_fence_widened_for_its_items() -> None:
    records = item_trials([45, 44, 46, 45, 43, 47, 10])  # one trial collapses to 0.2

    decision = decide(make_spec(), records)

    assert decision.status is Status.QUARANTINE
    assert decision.reason.startswith("trial 6 (seed 1006) collapsed to 0.2, below the fence")
    assert "2.58 binomial sd of 50 items" in decision.reason
    assert_decided_by(decision, "collapse fence")


def test_the_item_fence_is_wider_than_f_by_the_binomial_noise() -> None:
    records = item_trials([45] * 6 + [29])  # q1 0.9, iqr 0, one trial at 0.58
    pooled = (6 * 45 + 29) / 350
    width = 2.5758293035489 * (pooled * (1 - pooled) / 50) ** 0.5  # 0.129 > F = 0.03
    scores = [record.score or 0.0 for record in records]

    item_fence = check_named(decide(make_spec(), records).checks, "collapse fence")
    score_fence = check_named(decide(make_spec(), trials(scores)).checks, "collapse fence")

    assert item_fence.ok and item_fence.allowed == f">= {fmt(0.9 - 3 * width)}" == ">= 0.514"
    assert not score_fence.ok and score_fence.allowed == ">= 0.81"  # q1 - 3 x F


def test_items_of_a_pass_rate_eval_change_nothing() -> None:
    records = item_trials([45, 46, 44, 45, 33, 34, 32])

    decision = decide(make_spec(min_pass_rate=0.3), records)

    assert "item variance" not in check_names(decision)
    assert "collapse fence" not in check_names(decision)
    assert decision.stats.item_test is None


def test_the_reason_of_an_item_eval_counts_the_scored_trials() -> None:
    decision = decide(make_spec(max_errors=1), item_trials(HONEST[1:], errors=1))

    assert decision.status is Status.PASS
    assert decision.reason.endswith(", 6 of 7 scored)")


def with_items(records: list[TrialRecord], index: int, items: dict[str, float]) -> None:
    records[index] = records[index].model_copy(update={"items": items})


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda r: with_items(r, 3, {}), id="one trial reports no items"),
        pytest.param(
            lambda r: with_items(r, 3, {**r[3].items, "case-0": 0.5}), id="a continuous item"
        ),
        pytest.param(
            lambda r: r.__setitem__(3, r[3].model_copy(update={"score": 0.5})),
            id="the items' mean is not the score",
        ),
    ],
)
def test_evals_whose_items_are_not_an_accuracy_keep_the_spread_rule(
    spoil: Callable[[list[TrialRecord]], None],
) -> None:
    records = item_trials(HONEST)
    spoil(records)

    decision = decide(make_spec(), records)

    assert "spread" in check_names(decision) and "item variance" not in check_names(decision)
    assert decision.stats.item_test is None


def test_continuous_item_scores_over_the_same_ids_get_the_anova_not_the_iqr_rule() -> None:
    records = [trial(0.7, index=j, items={"case-0": 0.6, "case-1": 0.8}) for j in range(7)]

    decision = decide(make_spec(threshold=0.5), records)

    assert check_names(decision) == [
        "errors",
        "violations",
        "collapse fence",
        "item variance",
        "median",
    ]
    assert decision.stats.item_test == "two-way ANOVA"


def test_continuous_item_scores_over_different_ids_keep_the_spread_rule() -> None:
    records = [trial(0.7, index=j, items={f"case-{j}": 0.6, "b": 0.8}) for j in range(7)]

    decision = decide(make_spec(threshold=0.5), records)

    assert check_names(decision) == ["errors", "violations", "spread", "collapse fence", "median"]


def test_items_that_mean_their_score_within_float_slack_count_as_an_accuracy() -> None:
    records = item_trials(HONEST)
    for j, record in enumerate(records):
        records[j] = record.model_copy(update={"score": (record.score or 0) + 1e-12})

    assert decide(make_spec(), records).stats.item_test == "Cochran's Q"


def test_an_item_eval_where_every_item_is_constant_has_nothing_to_test() -> None:
    decision = decide(make_spec(), item_trials([45] * 7, items="nested"))

    assert decision.status is Status.PASS
    assert decision.stats.item_p == 1.0 and decision.stats.dispersion == 0.0


def test_the_item_variance_check_reads_as_one_checklist_line() -> None:
    passing = check_named(decide(make_spec(), item_trials(HONEST)).checks, "item variance")
    failing = check_named(
        decide(make_spec(), item_trials([45, 46, 44, 45, 33, 34, 32])).checks, "item variance"
    )

    assert format_check(passing).startswith("ok   item variance p 0.")
    assert format_check(passing).endswith(" (Cochran's Q) >= 0.01")
    assert format_check(failing).startswith("FAIL item variance p ")
    assert format_check(failing).endswith(" (Cochran's Q) < 0.01")
