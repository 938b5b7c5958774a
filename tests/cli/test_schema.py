"""`firewall schema`: JSON Schema 2020-12 documents, and the trial result's is the validator's."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import jsonschema
import pytest
from builders import error_trial, invoke_split, make_artefact, make_report, trials
from hypothesis import given, settings
from hypothesis import strategies as st

from firewall.lifecycle import Entry
from firewall.policy import Status
from firewall.runner.trial import record_from_payload
from firewall.store.registry import render

DIALECT = "https://json-schema.org/draft/2020-12/schema"
NAMES = ("artefact", "registry", "trial-result")


def printed_schema(*which: str) -> Any:
    result = invoke_split("schema", *which)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def trial_result() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(printed_schema("trial-result"))


def test_each_schema_is_a_2020_12_schema_with_an_id_of_its_own() -> None:
    everything = printed_schema()
    assert set(everything) == set(NAMES)
    ids = set()
    for name in NAMES:
        document = printed_schema(name)
        assert document == everything[name]
        assert document["$schema"] == DIALECT
        jsonschema.Draft202012Validator.check_schema(document)  # raises if not a valid schema
        ids.add(document["$id"])
    assert ids == {f"urn:flakiness-firewall:schema:{name}:v1" for name in NAMES}


def test_the_files_the_firewall_writes_fit_their_schemas() -> None:
    artefact = make_artefact(
        make_report("steady", Status.PASS, trials=trials([0.9] * 3, duration_s=0.5)),
        make_report("outage", Status.ERROR, trials=[error_trial()]),
        finished_at=None,
    )
    jsonschema.validate(json.loads(artefact.to_json()), printed_schema("artefact"))
    since = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc)
    registry = render(
        {
            "triage-tone": Entry(since=since, source="auto", reason="iqr 0.21 > 0.03", k=7),
            "judge": Entry(since=since, source="manual", reason="flaky judge", review_by=since),
        }
    )
    jsonschema.validate(json.loads(registry), printed_schema("registry"))


def firewall_accepts(payload: Any) -> bool:
    """Whether the firewall takes ``payload`` as a trial result, as a command eval's would be."""
    record = record_from_payload(
        payload, index=0, seed=1, pass_score=0.5, duration_s=0.0, in_flight=1
    )
    if record.error is None:
        return True
    # A result that reports an error is a valid result of a trial that could not be measured.
    reported = payload.get("error") if isinstance(payload, dict) else None
    return isinstance(reported, str) and record.error == f"eval reported: {reported}"


CONTRACT_EXAMPLE = """{"score": 0.83, "passed": true, "violations": ["pii-in-reply"],
 "metrics": {"latency_ms": 812, "tokens": 420, "cost_usd": 0.002},
 "fields": {"category": "billing", "action": "refund"},
 "items": {"case-001": 1.0, "case-002": 0.0},
 "model_id": "gpt-4o-2024-08-06", "prompt_version": "triage-v12", "error": null}"""

# JSON texts, parsed as the runner parses a command's result (json.loads). Numbers beyond
# a double's range in `fields` are left out: `1e400` parses as an infinity, which the
# firewall refuses and no JSON Schema can tell from an integer of 400 digits, which it takes.
VALID = [
    CONTRACT_EXAMPLE,
    '{"score": 0.83}',
    '{"score": 0}',
    '{"score": 1}',
    '{"score": -0.0}',
    '{"score": 1e-300}',
    '{"passed": true}',
    '{"passed": false, "score": 0.99}',
    '{"error": "judge timed out"}',
    '{"error": ""}',
    '{"score": null, "passed": true}',
    '{"error": null, "passed": false}',
    '{"score": null, "passed": null, "error": "outage"}',
    '{"score": 0.5, "items": {"a": true, "b": 0, "c": 1.0, "d": 0.25}}',
    '{"score": 0.5, "metrics": {"big": 1e308, "negative": -3, "int": 100000000000000000000}}',
    '{"score": 0.5, "fields": {"a": [1, {"b": null}], "c": "x", "d": 1e308, "e": false}}',
    '{"score": 0.5, "violations": [], "metrics": {}, "fields": {}, "items": {}}',
    '{"score": 0.5, "model_id": null, "prompt_version": "v1"}',
]
INVALID = [
    "{}",
    '{"score": null}',
    '{"passed": null}',
    '{"error": null}',
    '{"score": null, "passed": null, "error": null}',
    '{"violations": ["pii"]}',
    '{"score": 1.5}',
    '{"score": 1.0000001}',
    '{"score": -0.1}',
    '{"score": 1e400}',
    '{"score": true}',
    '{"score": "0.5"}',
    '{"score": [0.5]}',
    '{"passed": "yes"}',
    '{"passed": 1}',
    '{"error": false}',
    '{"error": {"message": "outage"}}',
    '{"score": 0.5, "metrics": {"x": 1e400}}',
    '{"score": 0.5, "metrics": {"x": -1e400}}',
    '{"score": 0.5, "metrics": {"x": 1' + "0" * 400 + "}}",
    '{"score": 0.5, "metrics": {"x": true}}',
    '{"score": 0.5, "metrics": {"x": "1"}}',
    '{"score": 0.5, "metrics": {"x": null}}',
    '{"score": 0.5, "metrics": []}',
    '{"score": 0.5, "items": {"a": 2}}',
    '{"score": 0.5, "items": {"a": -1}}',
    '{"score": 0.5, "items": {"a": "1"}}',
    '{"score": 0.5, "items": {"a": null}}',
    '{"score": 0.5, "items": null}',
    '{"score": 0.5, "violations": "pii"}',
    '{"score": 0.5, "violations": [1]}',
    '{"score": 0.5, "violations": null}',
    '{"score": 0.5, "fields": []}',
    '{"score": 0.5, "model_id": 4}',
    '{"score": 0.5, "prompt_version": ["v1"]}',
    '{"score": 0.5, "error": 503}',
    '{"score": 0.5, "extra": 1}',
    '{"Score": 0.5}',
    "[0.5]",
    "0.5",
    '"0.5"',
    "true",
    "null",
]


@pytest.mark.parametrize("text", VALID)
def test_what_the_firewall_accepts_the_schema_accepts(
    trial_result: jsonschema.Draft202012Validator, text: str
) -> None:
    payload = json.loads(text)
    assert firewall_accepts(payload)
    assert list(trial_result.iter_errors(payload)) == []


@pytest.mark.parametrize("text", INVALID)
def test_what_the_firewall_refuses_the_schema_refuses(
    trial_result: jsonschema.Draft202012Validator, text: str
) -> None:
    payload = json.loads(text)
    assert not firewall_accepts(payload)
    assert not trial_result.is_valid(payload)


LABELS = st.text(max_size=6)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | FINITE | LABELS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(LABELS, inner, max_size=3),
    max_leaves=8,
)
SCORES = st.floats(0, 1) | st.integers(0, 1)
# Values the firewall takes, key by key ...
GOOD = {
    "score": st.none() | SCORES,
    "passed": st.none() | st.booleans(),
    "violations": st.lists(LABELS, max_size=3),
    "metrics": st.dictionaries(LABELS, FINITE | st.integers(-(2**53), 2**53), max_size=3),
    "fields": st.dictionaries(LABELS, JSON, max_size=3),
    "items": st.dictionaries(LABELS, st.booleans() | SCORES, max_size=3),
    "model_id": st.none() | LABELS,
    "prompt_version": st.none() | LABELS,
    "error": st.none() | LABELS,
}
# ... and values just outside, key by key, for one key of such a payload.
OUT_OF_RANGE = (
    st.floats(1, 2, exclude_min=True)
    | st.floats(-1, 0, exclude_max=True)
    | st.integers(2, 9)
    | st.integers(-9, -1)
)
BAD = {
    "score": OUT_OF_RANGE | st.booleans() | LABELS,
    "passed": st.integers(0, 1) | LABELS,
    "violations": st.lists(st.integers() | st.none(), min_size=1, max_size=2) | LABELS,
    "metrics": st.dictionaries(LABELS, st.booleans() | LABELS | st.none(), min_size=1),
    "fields": st.lists(JSON, max_size=2) | LABELS,
    "items": st.dictionaries(LABELS, OUT_OF_RANGE | LABELS | st.none(), min_size=1, max_size=2),
    "model_id": st.integers() | st.booleans(),
    "prompt_version": st.integers() | st.lists(LABELS, max_size=1),
    "error": st.booleans() | st.integers(),
    "extra": JSON,
}
# Valid when a score, a verdict or an error is there and not null.
GOOD_PAYLOADS = st.fixed_dictionaries({}, optional=GOOD)
SCORED = st.fixed_dictionaries(
    {"score": SCORES}, optional={key: values for key, values in GOOD.items() if key != "score"}
)
ONE_BAD_KEY = st.sampled_from(list(BAD)).flatmap(
    lambda key: st.builds(lambda good, bad: {**good, key: bad}, SCORED, BAD[key] | JSON)
)
PAYLOADS = GOOD_PAYLOADS | ONE_BAD_KEY | JSON


@settings(max_examples=400, deadline=None, database=None)
@given(payload=PAYLOADS)
def test_the_schema_and_the_firewall_agree_on_any_payload(
    trial_result: jsonschema.Draft202012Validator, payload: Any
) -> None:
    parsed = json.loads(json.dumps(payload))
    assert trial_result.is_valid(parsed) == firewall_accepts(parsed)
