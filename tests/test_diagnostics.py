"""firewall.diagnostics: drift, flips, hints and their absence, the checklist line, budgets.

Oracles where they exist: scipy.stats.spearmanr for the rank correlation, numpy
for the budget percentiles and means, firewall.policy.decide for real checks.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import scipy.stats
from builders import error_trial, make_spec, trial, trials, with_metrics
from pydantic import JsonValue

from firewall.diagnostics import (
    DISPLAY_CHARS,
    MISSING_DISPLAY,
    CaseFlip,
    Cause,
    Diagnosis,
    FieldDrift,
    Hint,
    budget_summary,
    case_flips,
    describe_drift,
    describe_flip,
    describe_hint,
    diagnose,
    field_drift,
    format_check,
    hints,
    spearman,
)
from firewall.policy import Check, decide
from firewall.runner.trial import TrialRecord

STABLE = [0.81, 0.80, 0.82, 0.81, 0.80, 0.82, 0.81]


def with_fields(values: list[Any], name: str = "category") -> list[TrialRecord]:
    """One trial per value; the sentinel ``...`` leaves the field out of that trial."""
    return [
        trial(0.8, index=i, fields={} if value is ... else {name: value})
        for i, value in enumerate(values)
    ]


def only(entries: list[FieldDrift]) -> FieldDrift:
    assert len(entries) == 1
    return entries[0]


def counts(entry: FieldDrift) -> dict[str, int]:
    return {value.display: value.count for value in entry.distribution}


def all_hints(records: list[TrialRecord], pass_score: float = 0.8) -> list[Hint]:
    return diagnose(records, pass_score=pass_score).hints


def kinds(records: list[TrialRecord], pass_score: float = 0.8) -> list[Cause]:
    return [hint.kind for hint in all_hints(records, pass_score)]


def hint_of(records: list[TrialRecord], kind: Cause) -> Hint:
    found = [hint for hint in all_hints(records) if hint.kind is kind]
    assert len(found) == 1, kinds(records)
    return found[0]


# --- field drift -------------------------------------------------------------------------


def test_agreeing_field_has_no_drift() -> None:
    entry = only(field_drift(with_fields(["billing"] * 5)))
    assert (entry.name, entry.drift, entry.trials) == ("category", 0.0, 5)
    assert counts(entry) == {'"billing"': 5}


def test_drift_is_the_share_disagreeing_with_the_most_common_value() -> None:
    entry = only(field_drift(with_fields(["billing"] * 4 + ["refund"] * 2 + ["other"])))
    assert entry.drift == pytest.approx(3 / 7)
    assert [(v.value, v.count) for v in entry.distribution] == [
        ("billing", 4),
        ("refund", 2),
        ("other", 1),
    ]


def test_a_missing_value_counts_as_a_value() -> None:
    entry = only(field_drift(with_fields(["billing", "billing", "billing", "refund", ...])))
    assert entry.drift == pytest.approx(0.4)
    missing = [v for v in entry.distribution if v.missing]
    assert len(missing) == 1
    assert (missing[0].display, missing[0].count, missing[0].value) == (MISSING_DISPLAY, 1, None)


def test_missing_can_be_the_most_common_value() -> None:
    entry = only(field_drift(with_fields([..., ..., ..., "a", "a"])))
    assert entry.drift == pytest.approx(0.4)
    assert entry.distribution[0].missing and entry.distribution[0].count == 3


def test_null_and_missing_are_different_values() -> None:
    entry = only(field_drift(with_fields([None, None, ...])))
    assert entry.drift == pytest.approx(1 / 3)
    assert counts(entry) == {"null": 2, MISSING_DISPLAY: 1}
    assert [v.missing for v in entry.distribution] == [False, True]


def test_true_one_and_one_point_zero_are_three_values() -> None:
    # Python's True == 1 == 1.0 would merge them; canonical JSON does not.
    entry = only(field_drift(with_fields([True, 1, 1.0])))
    assert entry.drift == pytest.approx(2 / 3)
    assert sorted(counts(entry)) == ["1", "1.0", "true"]
    assert all(v.count == 1 for v in entry.distribution)


def test_objects_compare_by_content_and_lists_by_order() -> None:
    objects = only(field_drift(with_fields([{"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}])))
    assert objects.drift == 0.0
    lists = only(field_drift(with_fields([[1, 2], [2, 1]])))
    assert lists.drift == pytest.approx(0.5)


def test_nested_values_are_kept_whole() -> None:
    value: JsonValue = {"parts": [{"id": "p-1", "ok": True}, None], "n": 2.5}
    entry = only(field_drift(with_fields([value, value])))
    assert entry.distribution[0].value == value
    assert entry.distribution[0].display == '{"n": 2.5, "parts": [{"id": "p-1", "ok": true}, null]}'


def test_a_long_value_is_cut_for_display_only() -> None:
    long = "x" * 500 + "\nsecond line"
    entry = only(field_drift(with_fields([long, long])))
    shown = entry.distribution[0]
    assert shown.value == long
    assert len(shown.display) == DISPLAY_CHARS and shown.display.endswith("…")
    assert "\n" not in shown.display


def test_non_ascii_is_shown_as_written() -> None:
    entry = only(field_drift(with_fields(["Kratzer ü"])))
    assert entry.distribution[0].display == '"Kratzer ü"'


def test_errored_trials_are_not_compared() -> None:
    records = [*with_fields(["a", "a"]), error_trial(index=2)]
    entry = only(field_drift(records))
    assert (entry.drift, entry.trials) == (0.0, 2)


def test_fields_are_listed_worst_first_then_by_name() -> None:
    records = [trial(0.8, index=i, fields={"b": i % 2, "a": i % 2, "c": "same"}) for i in range(4)]
    assert [(e.name, e.drift) for e in field_drift(records)] == [("a", 0.5), ("b", 0.5), ("c", 0.0)]


def test_no_fields_means_no_drift_entries() -> None:
    assert field_drift(trials(STABLE)) == []
    assert field_drift([]) == []


def test_describe_drift_shows_the_most_common_values() -> None:
    entry = only(field_drift(with_fields(["a"] * 3 + ["b"] * 2 + ["c", "d"])))
    assert describe_drift(entry, values=2) == 'category 0.571 ("a" x3, "b" x2, +2 more)'


def test_a_diagnosis_of_odd_values_survives_a_json_round_trip() -> None:
    records = with_fields([{"k": [1, None]}, True, 1, 1.0, None, ..., "é" * 200])
    diagnosis = diagnose(records, pass_score=0.8)
    again = Diagnosis.model_validate_json(diagnosis.model_dump_json())
    assert again == diagnosis
    assert diagnosis.drift_rates() == {"category": pytest.approx(6 / 7)}


# --- flipping cases ----------------------------------------------------------------------


def with_items(rows: list[dict[str, float]]) -> list[TrialRecord]:
    return [trial(0.8, index=i, items=items) for i, items in enumerate(rows)]


def test_cases_that_passed_and_failed_are_flips_closest_to_a_coin_toss_first() -> None:
    rows = [
        {"always": 1.0, "never": 0.0, "b-half": 1.0, "a-half": 0.0, "mostly": 1.0},
        {"always": 1.0, "never": 0.0, "b-half": 0.0, "a-half": 1.0, "mostly": 1.0},
        {"always": 1.0, "never": 0.0, "b-half": 1.0, "a-half": 0.0, "mostly": 1.0},
        {"always": 1.0, "never": 0.0, "b-half": 0.0, "a-half": 1.0, "mostly": 0.0},
    ]
    assert case_flips(with_items(rows), pass_score=0.5) == [
        CaseFlip(case="a-half", pass_rate=0.5, passes=2, trials=4),
        CaseFlip(case="b-half", pass_rate=0.5, passes=2, trials=4),
        CaseFlip(case="mostly", pass_rate=0.75, passes=3, trials=4),
    ]


def test_an_item_passes_at_the_pass_score_given() -> None:
    records = with_items([{"c": 0.6}, {"c": 0.9}])
    assert case_flips(records, pass_score=0.5) == []
    assert [f.passes for f in case_flips(records, pass_score=0.7)] == [1]


def test_an_item_on_the_pass_score_passes_with_float_slack() -> None:
    records = with_items([{"c": 0.8 - 1e-12}, {"c": 0.9}])
    assert case_flips(records, pass_score=0.8) == []


def test_a_case_counts_only_in_the_trials_that_reported_it() -> None:
    records = [*with_items([{"c": 1.0}, {"c": 0.0}, {}]), error_trial(index=3)]
    assert case_flips(records, pass_score=0.5) == [
        CaseFlip(case="c", pass_rate=0.5, passes=1, trials=2)
    ]


def test_describe_flip() -> None:
    assert describe_flip(CaseFlip(case="case-7", pass_rate=3 / 7, passes=3, trials=7)) == (
        "case-7 passed 3/7"
    )


# --- Spearman ----------------------------------------------------------------------------


def spearman_cases() -> list[tuple[list[float], list[float]]]:
    rng = np.random.default_rng(20261129)
    cases: list[tuple[list[float], list[float]]] = [
        ([1, 2, 3, 4, 4, 3, 2], [0.9, 0.8, 0.6, 0.5, 0.52, 0.61, 0.79]),
        ([1, 1, 2, 2, 3], [0.5, 0.5, 0.5, 0.9, 0.9]),
        ([3, 1, 2], [0.1, 0.3, 0.2]),
    ]
    for size in (5, 7, 15, 40):
        cases.append((rng.uniform(0, 1, size).tolist(), rng.uniform(0, 1, size).tolist()))
        cases.append(
            (
                rng.integers(1, 5, size).astype(float).tolist(),
                rng.integers(0, 4, size).astype(float).tolist(),
            )
        )
    return cases


@pytest.mark.parametrize(("x", "y"), spearman_cases())
def test_spearman_matches_scipy(x: list[float], y: list[float]) -> None:
    expected = scipy.stats.spearmanr(x, y).statistic
    assert spearman(x, y) == pytest.approx(expected, abs=1e-12)


def test_spearman_is_undefined_for_a_constant_side_or_one_pair() -> None:
    assert spearman([4, 4, 4, 4, 4], [0.1, 0.2, 0.3, 0.4, 0.5]) is None
    assert spearman([1, 2, 3], [0.5, 0.5, 0.5]) is None
    assert spearman([1], [0.5]) is None
    assert spearman([], []) is None


def test_spearman_needs_pairs() -> None:
    with pytest.raises(ValueError, match="paired"):
        spearman([1, 2], [0.5])


# --- hints: each rule and its absence ----------------------------------------------------


def test_a_stable_probe_gets_no_hints() -> None:
    assert all_hints(trials(STABLE)) == []


def test_no_trials_or_only_errors_do_not_crash() -> None:
    assert diagnose([], pass_score=0.8).hints == []
    records = [error_trial("boom", index=i) for i in range(3)]
    assert kinds(records) == [Cause.ERRORS]


def test_a_model_change_names_the_values_and_the_trial() -> None:
    records = [
        trial(score, index=i, model_id="gpt-a" if i < 3 else "gpt-b")
        for i, score in enumerate(STABLE)
    ]
    hint = hint_of(records, Cause.MODEL_CHANGED)
    assert hint.weight == 1.0
    assert hint.evidence == (
        "model_id took 2 values: gpt-a (3 trials), gpt-b (4 trials); first change at trial 3"
    )


def test_a_prompt_change_is_its_own_hint() -> None:
    records = [
        trial(score, index=i, prompt_version="v1" if i != 5 else "v2")
        for i, score in enumerate(STABLE)
    ]
    hint = hint_of(records, Cause.PROMPT_CHANGED)
    assert "first change at trial 5" in hint.evidence
    assert Cause.MODEL_CHANGED not in kinds(records)


def test_no_change_hint_for_one_model_or_unreported_attribution() -> None:
    same = [trial(s, index=i, model_id="gpt-a") for i, s in enumerate(STABLE)]
    assert Cause.MODEL_CHANGED not in kinds(same)
    # Trials that do not say which model ran are no evidence of a change.
    partial = [trial(s, index=i, model_id="gpt-a" if i % 2 else None) for i, s in enumerate(STABLE)]
    assert Cause.MODEL_CHANGED not in kinds(partial)


def test_the_change_is_found_in_trial_order_whatever_the_list_order() -> None:
    records = [trial(s, index=i, model_id="a" if i < 4 else "b") for i, s in enumerate(STABLE)]
    hint = hint_of(list(reversed(records)), Cause.MODEL_CHANGED)
    assert hint.evidence.endswith("first change at trial 4")


def test_attribution_values_are_shown_on_one_line() -> None:
    records = [trial(s, index=i, model_id="a\nb" if i else "c") for i, s in enumerate(STABLE)]
    assert "a b (6 trials)" in hint_of(records, Cause.MODEL_CHANGED).evidence


def test_errors_are_counted_and_the_first_is_quoted() -> None:
    records = [
        *trials(STABLE[:5]),
        error_trial("eval reported: upstream 503\nretry later", index=5),
        error_trial("eval reported: upstream 503", index=6),
    ]
    hint = hint_of(records, Cause.ERRORS)
    assert hint.evidence == (
        "2 of 7 trials errored; first, trial 5: eval reported: upstream 503 retry later"
    )
    assert hint.cause.startswith("an external dependency")
    assert hint.weight == pytest.approx(0.5 + 0.5 * 2 / 7)


def test_timeouts_and_rate_limits_name_their_cause() -> None:
    timeout = [
        *trials(STABLE[:6]),
        error_trial("timed out after 60 s; the command was killed", index=6),
    ]
    hint = hint_of(timeout, Cause.ERRORS)
    assert hint.cause.startswith("timeouts") and "(1 timed out)" in hint.evidence
    too_many = error_trial("eval reported: HTTP 429 Too Many Requests", index=6)
    limited = [*trials(STABLE[:6]), too_many]
    assert hint_of(limited, Cause.ERRORS).cause.startswith("rate limiting")


def test_a_long_error_is_cut_in_the_evidence() -> None:
    records = [*trials(STABLE[:6]), error_trial("e" * 1000, index=6)]
    assert len(hint_of(records, Cause.ERRORS).evidence) < 200


def test_a_cold_first_trial_is_a_warm_up_hint() -> None:
    records = trials([0.42, *STABLE[1:]])
    hint = hint_of(records, Cause.WARM_UP)
    assert hint.evidence.startswith("trial 0 scored 0.42, the other 6 trials 0.8-0.82: 0.38 beyond")
    assert "= 0.02)" in hint.evidence


def test_a_high_first_trial_is_a_warm_up_hint_too() -> None:
    assert Cause.WARM_UP in kinds(trials([0.99, *STABLE[1:]]))


def test_no_warm_up_hint_when_trial_0_is_not_apart() -> None:
    inside = trials([0.81, *STABLE[1:]])
    just_beyond = trials([0.835, *STABLE[1:]])  # 0.015 beyond, under the 0.02 floor
    within_iqr = trials([0.9, 0.2, 0.35, 0.5, 0.65, 0.8])  # 0.1 beyond, the others' IQR 0.3
    late_outlier = trials([*STABLE[:3], 0.42, *STABLE[4:]])  # trial 3, not trial 0
    for records in (inside, just_beyond, within_iqr, late_outlier):
        assert Cause.WARM_UP not in kinds(records)


def test_no_warm_up_hint_without_trial_0_or_enough_others() -> None:
    errored_first = [error_trial(index=0), *[trial(s, index=i) for i, s in enumerate(STABLE)][1:]]
    assert Cause.WARM_UP not in kinds(errored_first)
    assert Cause.WARM_UP not in kinds(trials([0.42, 0.81, 0.8]))


def concurrent(scores: list[float], in_flight: list[int]) -> list[TrialRecord]:
    return [
        trial(s, index=i, in_flight=n)
        for i, (s, n) in enumerate(zip(scores, in_flight, strict=True))
    ]


def test_score_falling_with_concurrency_is_a_hint_with_scipys_rho() -> None:
    in_flight = [1, 2, 3, 4, 4, 3, 2]
    scores = [0.9, 0.8, 0.6, 0.5, 0.52, 0.61, 0.79]
    hint = hint_of(concurrent(scores, in_flight), Cause.CONCURRENCY)
    rho = scipy.stats.spearmanr(in_flight, scores).statistic
    assert hint.weight == pytest.approx(abs(rho))
    assert hint.evidence.startswith("score falls as more trials run at once: Spearman rho -0.9")
    assert hint.evidence.endswith("over 7 trials (in_flight 1-4)")


def test_no_concurrency_hint_when_in_flight_is_constant_or_unrelated_or_scarce() -> None:
    scores = [0.9, 0.8, 0.6, 0.5, 0.52, 0.61, 0.79]
    assert Cause.CONCURRENCY not in kinds(concurrent(scores, [4] * 7))
    unrelated = [1, 4, 2, 3, 1, 4, 2]
    assert abs(scipy.stats.spearmanr(unrelated, scores).statistic) < 0.7
    assert Cause.CONCURRENCY not in kinds(concurrent(scores, unrelated))
    assert Cause.CONCURRENCY not in kinds(concurrent(scores[:4], [1, 2, 3, 4]))


def test_score_following_latency_is_a_hint() -> None:
    scores = [0.9, 0.85, 0.6, 0.55, 0.8, 0.7, 0.65]
    latency = [100.0, 150.0, 900.0, 1200.0, 200.0, 400.0, 600.0]
    hint = hint_of(with_metrics(trials(scores), latency_ms=latency), Cause.LATENCY)
    assert hint.weight == pytest.approx(1.0)
    assert hint.evidence == (
        "score falls as latency grows: Spearman rho -1 over 7 trials (latency_ms 100-1200)"
    )


def test_no_latency_hint_without_enough_latency_metrics() -> None:
    scores = [0.9, 0.85, 0.6, 0.55, 0.8, 0.7, 0.65]
    assert Cause.LATENCY not in kinds(trials(scores))
    some = with_metrics(trials(scores[:4]), latency_ms=[100.0, 150.0, 900.0, 1200.0])
    assert Cause.LATENCY not in kinds([*some, *trials(scores[4:])])


def itemised(scores: list[float], flipping: int, cases: int) -> list[TrialRecord]:
    """Trials whose first ``flipping`` cases alternate and the rest always pass."""
    return [
        trial(
            score,
            index=i,
            items={f"case-{c:02}": float(c >= flipping or (i + c) % 2 == 0) for c in range(cases)},
        )
        for i, score in enumerate(scores)
    ]


SCATTERED = [0.9, 0.6, 0.9, 0.6, 0.9, 0.6, 0.9]


def test_scatter_from_a_few_cases_is_a_hint_naming_them() -> None:
    hint = hint_of(itemised(SCATTERED, flipping=2, cases=10), Cause.FEW_CASES)
    assert hint.evidence == (
        "2 of 10 cases flip (case-00 passed 4/7, case-01 passed 3/7); "
        "the other 8 give the same verdict in every trial"
    )


def test_no_few_cases_hint_without_items_or_with_many_flips() -> None:
    assert Cause.FEW_CASES not in kinds(trials(SCATTERED))
    assert Cause.FEW_CASES not in kinds(itemised(SCATTERED, flipping=4, cases=40))  # > 3 cases
    assert Cause.FEW_CASES not in kinds(itemised(SCATTERED, flipping=1, cases=4))  # > 20%


def test_no_few_cases_hint_when_the_score_does_not_scatter() -> None:
    assert Cause.FEW_CASES not in kinds(itemised([0.8] * 7, flipping=1, cases=10))


def test_two_groups_of_scores_are_a_bimodal_hint() -> None:
    scores = [0.8, 0.42, 0.81, 0.4, 0.79, 0.8, 0.41]
    hint = hint_of(trials(scores), Cause.BIMODAL)
    assert hint.evidence == (
        "3 trials scored 0.4-0.42, 4 scored 0.79-0.81; the gap 0.37 is over 3x the wider "
        "group's range 0.02 (smaller group: trials 1, 3, 6)"
    )


def test_no_bimodal_hint_for_noise_a_single_outlier_binary_scores_or_a_small_gap() -> None:
    noise = [0.2, 0.35, 0.5, 0.6, 0.72, 0.9, 0.4]
    single = [0.8, 0.81, 0.79, 0.8, 0.2, 0.81, 0.8]
    binary = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    small_gap = [0.80, 0.80, 0.80, 0.84, 0.84, 0.84]
    for scores in (noise, single, binary, small_gap):
        assert Cause.BIMODAL not in kinds(trials(scores)), scores


def test_drifting_fields_are_a_sampling_hint() -> None:
    records = with_fields(["billing"] * 5 + ["refund"] * 2)
    hint = hint_of(records, Cause.SAMPLING)
    assert hint.evidence == '1 of 1 output fields drift: category 0.286 ("billing" x5, "refund" x2)'
    assert Cause.SAMPLING not in kinds(with_fields(["billing"] * 7))


def test_hints_are_ranked_by_weight_then_by_cause_order() -> None:
    scores = [0.42, *STABLE[1:]]  # warm-up (0.8)
    records = [
        trial(s, index=i, model_id="a" if i < 3 else "b", fields={"f": i % 2})  # 1.0, 0.4
        for i, s in enumerate(scores)
    ]
    records.append(error_trial("boom", index=7))  # errors: 0.5 + 0.5 / 8
    ranked = all_hints(records)
    assert [h.kind for h in ranked] == [
        Cause.MODEL_CHANGED,
        Cause.WARM_UP,
        Cause.ERRORS,
        Cause.SAMPLING,
    ]
    assert [h.weight for h in ranked] == sorted((h.weight for h in ranked), reverse=True)


def test_hints_can_be_called_alone_with_precomputed_flips_and_drift() -> None:
    records = with_fields(["a", "b", "a"])
    drift = field_drift(records)
    assert [h.kind for h in hints(records, flips=[], drift=drift)] == [Cause.SAMPLING]


def test_describe_hint() -> None:
    hint = Hint(kind=Cause.ERRORS, cause="rate limiting", evidence="2 of 7 errored", weight=0.6)
    assert describe_hint(hint) == "rate limiting: 2 of 7 errored"


# --- the checklist line ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "line"),
    [
        (Check(name="iqr", ok=True, actual="0.012", allowed="<= 0.03"), "ok   iqr 0.012 <= 0.03"),
        (Check(name="iqr", ok=False, actual="0.21", allowed="<= 0.03"), "FAIL iqr 0.21 > 0.03"),
        (
            Check(name="median", ok=False, actual="0.61", allowed=">= 0.85"),
            "FAIL median 0.61 < 0.85",
        ),
        (Check(name="median", ok=True, actual="0.9", allowed=">= 0.85"), "ok   median 0.9 >= 0.85"),
        (
            Check(name="collapse fence", ok=False, actual="min 0.35", allowed=">= 0.7"),
            "FAIL collapse fence min 0.35 < 0.7",
        ),
        (
            Check(name="p95 latency", ok=False, actual="612ms", allowed="<= 500ms"),
            "FAIL p95 latency 612ms > 500ms",
        ),
        (Check(name="x", ok=False, actual="1", allowed="< 1"), "FAIL x 1 >= 1"),
        (Check(name="x", ok=False, actual="2", allowed="> 2"), "FAIL x 2 <= 2"),
        (Check(name="violations", ok=True, actual="0", allowed="0"), "ok   violations 0"),
        (
            Check(name="violations", ok=False, actual="pii-in-reply", allowed="none"),
            "FAIL violations pii-in-reply (allowed none)",
        ),
    ],
)
def test_format_check(check: Check, line: str) -> None:
    assert format_check(check) == line


def test_every_check_the_policy_makes_formats_as_a_checklist_line() -> None:
    spec = make_spec(threshold=0.85, budgets={"p95_latency_ms": 500})
    records = with_metrics(trials(STABLE), latency_ms=[400.0] * 6 + [900.0])
    lines = [format_check(check) for check in decide(spec, records).checks]
    assert lines == [
        "ok   errors 0 <= 0",
        "ok   violations 0",
        "ok   spread sd 0.008, p 0.99 >= 0.0125",
        "ok   collapse fence min 0.8 >= 0.715",
        "FAIL median 0.81 < 0.85",
    ]


# --- budgets -----------------------------------------------------------------------------


def test_budgets_match_numpy_over_the_trials_that_report_them() -> None:
    latency = [120.0, 340.0, 95.0, 800.0, 410.0, 230.0]
    tokens = [400.0, 420.0, 380.0, 500.0, 410.0, 390.0]
    records = with_metrics(trials(STABLE[:6]), latency_ms=latency, tokens=tokens)
    records += [trial(0.8, index=6, metrics={"cost_usd": 0.002}), error_trial(index=7)]
    records[7] = records[7].model_copy(update={"metrics": {"latency_ms": 99999.0}})
    summary = budget_summary(records)
    assert summary["p50_latency_ms"] == pytest.approx(np.percentile(latency, 50))
    assert summary["p95_latency_ms"] == pytest.approx(np.percentile(latency, 95))
    assert summary["mean_tokens"] == pytest.approx(np.mean(tokens))
    assert summary["mean_cost_usd"] == pytest.approx(0.002)


def test_budgets_are_none_when_no_trial_reports_them() -> None:
    assert budget_summary(trials(STABLE)) == {
        "p50_latency_ms": None,
        "p95_latency_ms": None,
        "mean_tokens": None,
        "mean_cost_usd": None,
    }


# --- the bundle --------------------------------------------------------------------------


def test_diagnose_bundles_everything_for_one_eval() -> None:
    records = [*itemised(SCATTERED, flipping=1, cases=10), error_trial(index=7)]
    records = [
        r.model_copy(update={"fields": {"f": "x"}}) if r.error is None else r for r in records
    ]
    diagnosis = diagnose(records, pass_score=0.5)
    assert (diagnosis.trials, diagnosis.measured, diagnosis.cases) == (8, 7, 10)
    assert [f.case for f in diagnosis.flips] == ["case-00"]
    assert diagnosis.drift_rates() == {"f": 0.0}
    assert diagnosis.budgets["p95_latency_ms"] is None
    assert [h.kind for h in diagnosis.hints] == [Cause.FEW_CASES, Cause.ERRORS, Cause.BIMODAL]


def test_the_same_error_in_every_trial_is_a_bug_or_setup_not_an_outage() -> None:
    records = [error_trial(f"KeyError: 'b' (trial {i})", index=i) for i in range(7)]
    hint = hint_of(records, Cause.ERRORS)
    assert hint.cause == "the same error in every trial: a bug or a setup problem, not flakiness"


def test_one_errored_trial_is_not_the_same_error_in_every_trial() -> None:
    # Adaptive K stops at the first error past max_errors: one trial, nothing repeated.
    judge = [error_trial("judge answered HTTP 503 Service Unavailable", index=0)]
    assert hint_of(judge, Cause.ERRORS).cause == (
        "an external dependency failing (errors, never low scores)"
    )
    bug = [error_trial("KeyError: 'b'", index=0)]
    assert hint_of(bug, Cause.ERRORS).cause == (
        "one trial, and it errored: too little to tell a bug from an outage"
    )
    twice = [error_trial("KeyError: 'b'", index=i) for i in range(2)]
    assert hint_of(twice, Cause.ERRORS).cause.startswith("the same error in every trial")


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        ("judge: 503 Service Unavailable", "an external dependency failing"),
        ("upstream 502 Bad Gateway", "an external dependency failing"),
        ("HTTP 429 Too Many Requests", "rate limiting"),
        ("openai.RateLimitError: rate limit reached", "rate limiting"),
        ("timed out after 30 s; the command was killed", "timeouts"),
        ("ConnectionRefusedError: [Errno 111] Connection refused", "an external dependency"),
        ("ConnectionResetError: Connection reset by peer", "an external dependency failing"),
        ("anthropic.APIStatusError: Overloaded", "an external dependency failing"),
    ],
)
def test_an_outage_s_text_wins_even_when_every_trial_says_it(message: str, cause: str) -> None:
    records = [error_trial(message, index=i) for i in range(7)]
    assert hint_of(records, Cause.ERRORS).cause.startswith(cause)


def test_an_outage_needs_its_text_or_a_mix_of_results() -> None:
    different = [error_trial("KeyError: 'b'", index=0), error_trial("NameError: x", index=1)]
    assert hint_of(different, Cause.ERRORS).cause.startswith("every trial errored, in 2 ways")
    mixed = [*trials(STABLE[:5]), error_trial("ValueError: bad", index=5)]
    assert hint_of(mixed, Cause.ERRORS).cause.startswith("intermittent errors")
    gateway = [*trials(STABLE[:5]), error_trial("502 Bad Gateway", index=5)]
    assert hint_of(gateway, Cause.ERRORS).cause.startswith("an external dependency failing")


def test_trial_0_merely_outside_the_others_is_chance_unless_its_clock_says_cold() -> None:
    scores = [0.76, *STABLE[1:]]  # 0.04 below the others: 2 x max(IQR, 0.02), not 3 x
    assert Cause.WARM_UP not in kinds(trials(scores))
    timed = [
        trial(score, index=i, duration_s=3.0 if i == 0 else 1.0) for i, score in enumerate(scores)
    ]
    hint = hint_of(timed, Cause.WARM_UP)
    assert hint.evidence.endswith(", and it took 3 s against their median 1 s")


def test_honest_probes_rarely_get_a_warm_up_hint() -> None:
    rng = random.Random(11)
    fired = sum(
        Cause.WARM_UP in kinds(trials([round(rng.gauss(0.85, 0.03), 4) for _ in range(7)]))
        for _ in range(2000)
    )
    # Trial 0 is the lowest of 7 one probe in seven: outside the others' range by more than
    # their IQR 7% of the time at sd 0.03 (the old rule), by three times it 0.3%.
    assert fired / 2000 < 0.01
