"""record_from_payload: a bad trial result is an error that names the problem."""

from __future__ import annotations

import json
from typing import Any

import pytest

from firewall.runner.trial import TrialRecord, record_from_payload


def record(payload: Any, *, pass_score: float = 0.8) -> TrialRecord:
    return record_from_payload(
        payload, index=3, seed=424242, pass_score=pass_score, duration_s=0.25, in_flight=2
    )


def error_of(payload: Any) -> str:
    result = record(payload)
    assert result.error is not None, f"{payload!r} was accepted"
    assert result.score is None and result.passed is None  # never a low score
    assert (result.index, result.seed, result.in_flight) == (3, 424242, 2)
    return result.error


# --- good payloads ---------------------------------------------------------------


def test_a_full_payload_is_kept() -> None:
    payload = {
        "score": 0.83,
        "passed": True,
        "violations": ["pii-in-reply"],
        "metrics": {"latency_ms": 812, "tokens": 420, "cost_usd": 0.002},
        "fields": {"category": "billing", "action": "refund"},
        "items": {"case-001": 1.0, "case-002": 0.0},
        "model_id": "gpt-4o-2024-08-06",
        "prompt_version": "triage-v12",
        "error": None,
    }

    result = record(payload)

    assert result.error is None
    assert result.score == 0.83 and result.passed is True
    assert result.violations == ["pii-in-reply"]
    assert result.metrics == {"latency_ms": 812.0, "tokens": 420.0, "cost_usd": 0.002}
    assert result.fields == {"category": "billing", "action": "refund"}
    assert result.items == {"case-001": 1.0, "case-002": 0.0}
    assert (result.model_id, result.prompt_version) == ("gpt-4o-2024-08-06", "triage-v12")
    assert (result.index, result.seed, result.duration_s, result.in_flight) == (3, 424242, 0.25, 2)


@pytest.mark.parametrize(
    ("score", "pass_score", "passed"),
    [(0.8, 0.8, True), (0.81, 0.8, True), (0.79, 0.8, False), (0.0, 0.0, True), (1.0, 1.0, True)],
)
def test_pass_defaults_to_score_at_least_pass_score(
    score: float, pass_score: float, passed: bool
) -> None:
    assert record({"score": score}, pass_score=pass_score).passed is passed


def test_pass_score_comparison_allows_float_slack() -> None:
    assert record({"score": 0.1 + 0.7}, pass_score=0.8).passed is True


@pytest.mark.parametrize(("score", "passed"), [(0.2, True), (1.0, False)])
def test_passed_overrides_the_score(score: float, passed: bool) -> None:
    result = record({"score": score, "passed": passed})

    assert result.passed is passed
    assert result.score == score


@pytest.mark.parametrize(("passed", "score"), [(True, 1.0), (False, 0.0)])
def test_passed_alone_stands_for_the_score(passed: bool, score: float) -> None:
    result = record({"passed": passed})

    assert (result.score, result.passed, result.error) == (score, passed, None)


@pytest.mark.parametrize("score", [0, 1, 0.0, 1.0, 0.5])
def test_integers_and_bounds_are_valid_scores(score: float) -> None:
    result = record({"score": score})

    assert result.error is None and result.score == score


def test_bool_items_count_as_one_and_zero() -> None:
    assert record({"score": 1, "items": {"a": True, "b": False}}).items == {"a": 1.0, "b": 0.0}


def test_error_null_is_no_error() -> None:
    assert record({"score": 0.5, "error": None}).error is None


# --- the eval's own error --------------------------------------------------------


def test_a_reported_error_is_an_error_never_a_low_score() -> None:
    message = error_of({"error": "judge returned HTTP 529", "score": 0.0})

    assert "judge returned HTTP 529" in message


def test_a_reported_error_keeps_attribution() -> None:
    result = record({"error": "rate limited", "model_id": "m-1", "metrics": {"latency_ms": 30}})

    assert result.error is not None
    assert result.model_id == "m-1" and result.metrics == {"latency_ms": 30.0}


# --- protocol violations ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")],
)
def test_non_finite_scores_are_errors(value: float, shown: str) -> None:
    message = error_of({"score": value})

    assert "score" in message and "finite" in message and shown in message


@pytest.mark.parametrize("text", ['{"score": NaN}', '{"score": Infinity}', '{"score": -Infinity}'])
def test_non_finite_scores_as_python_json_writes_them_are_errors(text: str) -> None:
    assert "finite" in error_of(json.loads(text))


@pytest.mark.parametrize("score", [1.5, -0.1, 2, -1, 1.0000001])
def test_out_of_range_scores_are_errors(score: float) -> None:
    message = error_of({"score": score})

    assert "score" in message and str(score) in message


@pytest.mark.parametrize(
    ("payload", "key", "got"),
    [
        ({"score": "0.9"}, "score", "'0.9'"),
        ({"score": True}, "score", "True"),
        ({"score": False}, "score", "False"),
        ({"score": None}, "score", "required"),
        ({"score": [0.9]}, "score", "[0.9]"),
        ({"score": 0.5, "passed": "yes"}, "passed", "'yes'"),
        ({"score": 0.5, "passed": 1}, "passed", "1"),
        ({"score": 0.5, "violations": "pii-in-reply"}, "violations", "'pii-in-reply'"),
        ({"score": 0.5, "violations": [1]}, "violations.0", "1"),
        ({"score": 0.5, "metrics": {"latency_ms": "fast"}}, "metrics.latency_ms", "'fast'"),
        ({"score": 0.5, "metrics": {"latency_ms": True}}, "metrics.latency_ms", "True"),
        ({"score": 0.5, "metrics": {"latency_ms": float("nan")}}, "metrics.latency_ms", "nan"),
        ({"score": 0.5, "metrics": [1, 2]}, "metrics", "[1, 2]"),
        ({"score": 0.5, "items": {"case-1": "pass"}}, "items.case-1", "pass"),
        ({"score": 0.5, "items": {"case-1": 1.5}}, "items.case-1", "1.5"),
        ({"score": 0.5, "model_id": 4}, "model_id", "4"),
        ({"score": 0.5, "error": 500}, "error", "500"),
    ],
)
def test_wrong_types_are_errors_naming_the_key(payload: dict[str, Any], key: str, got: str) -> None:
    message = error_of(payload)

    assert key in message
    assert got in message


@pytest.mark.parametrize("key", ["scroe", "latency_ms", "Score"])
def test_unknown_keys_are_errors_naming_the_key_and_the_allowed_ones(key: str) -> None:
    message = error_of({"score": 0.5, key: 1})

    assert key in message and "unknown key" in message
    assert "score" in message and "violations" in message


@pytest.mark.parametrize("payload", [{}, {"violations": []}, {"metrics": {"latency_ms": 3}}])
def test_score_is_required_unless_passed_or_error_is_given(payload: dict[str, Any]) -> None:
    message = error_of(payload)

    assert "score" in message and "required" in message


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        ([{"score": 0.9}], "array"),
        (0.9, "number"),
        (1, "number"),
        ("0.9", "string"),
        (None, "null"),
        (True, "boolean"),
    ],
)
def test_non_object_json_is_an_error(payload: Any, kind: str) -> None:
    message = error_of(payload)

    assert "JSON object" in message and kind in message


@pytest.mark.parametrize("score", [0, 1, 0.5, 0.3 + 0.4, 1e-300])
def test_a_bare_score_s_plain_record_is_the_validated_one(score: float) -> None:
    # record_from_payload builds a bare score's record without validating it
    # (trial.scored_record): the same record, field for field, and the same JSON.
    plain = record_from_payload(
        {"score": score}, index=3, seed=11, pass_score=0.5, duration_s=0.25, in_flight=2
    )
    validated = TrialRecord(
        index=3,
        seed=11,
        score=float(score),
        passed=score >= 0.5,
        duration_s=0.25,
        in_flight=2,
        violations=[],
        metrics={},
        fields={},
        items={},
        model_id=None,
        prompt_version=None,
    )
    assert plain == validated
    assert list(plain.__dict__.items()) == list(validated.__dict__.items())
    assert plain.model_fields_set == validated.model_fields_set
    assert plain.model_dump_json() == validated.model_dump_json()
    plain.violations.append("x")  # its lists and dicts are its own
    assert (
        record_from_payload(
            {"score": score}, index=3, seed=11, pass_score=0.5, duration_s=0.25, in_flight=2
        ).violations
        == []
    )
