"""One trial: the result an eval reports, validated, and the record the artefact keeps.

The trial result JSON (contract §3) is parsed here and nowhere else. A payload
that breaks the protocol makes the trial an error whose message names the
problem; it never becomes a low score.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from firewall._stats import EPSILON
from firewall.runner.judgement import Judged

_MAX_FIELD_CHARS = 200


def _as_strict_as_the_validator(schema: dict[str, Any]) -> None:
    """Add to the JSON Schema what the validator checks beyond the fields' types.

    ``_score_or_verdict`` as required keys that are not null; item scores in [0, 1];
    metrics that a double holds (JSON has no infinity, but ``1e400`` parses as one).
    tests/cli/test_schema.py holds the schema and the validator to the same verdicts.
    """
    properties = schema["properties"]
    properties["items"]["additionalProperties"] = {
        "anyOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "boolean"}]
    }
    largest = sys.float_info.max
    properties["metrics"]["additionalProperties"] = {
        "type": "number",
        "minimum": -largest,
        "maximum": largest,
    }
    schema["anyOf"] = [
        {"required": [key], "properties": {key: {"not": {"type": "null"}}}}
        for key in ("score", "passed", "error")
    ]


class TrialPayload(BaseModel):
    """The trial result JSON object an eval reports."""

    # `model_id` is a field of the contract, not pydantic's: pydantic < 2.10 would warn.
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        frozen=True,
        protected_namespaces=(),
        json_schema_extra=_as_strict_as_the_validator,
    )

    score: float | None = Field(default=None, ge=0, le=1)
    passed: bool | None = None
    violations: list[str] = []
    metrics: dict[str, float] = {}
    fields: dict[str, JsonValue] = {}
    items: dict[str, float | bool] = {}
    model_id: str | None = None
    prompt_version: str | None = None
    error: str | None = None
    output: JsonValue = None  # what an eval with a judge yields: its judge scores it

    @model_validator(mode="after")
    def _score_or_verdict(self) -> TrialPayload:
        if (
            self.score is None
            and self.passed is None
            and self.error is None
            and self.output is None
        ):
            raise ValueError("`score` is required unless `passed` or `error` is given")
        for case, value in self.items.items():
            if not isinstance(value, bool) and not 0 <= value <= 1:
                raise ValueError(f"items.{case} must be a score in [0, 1] or a bool, got {value}")
        return self


class SuiteCase(BaseModel):
    """One test case of one run of a JUnit suite (`result = "junit"`)."""

    model_config = ConfigDict(frozen=True)

    id: str
    outcome: Literal["passed", "failed", "error", "skipped"]
    file: str | None = None
    line: int | None = None
    message: str = ""
    # How its id names the test (firewall.runner.junit.Identity): by name, by pytest node
    # id, or by its place alone, which no quarantine may follow.
    identity: Literal["name", "nodeid", "position"] = "name"
    time: float | None = None  # the case's own seconds in this run, from the XML


_EVIDENCE = ("traceback", "output", "import_s", "boot_s", "blocked_s", "judged")


class TrialRecord(BaseModel):
    """One trial as the artefact keeps it: what was run, what came back, how long it took."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    index: int
    seed: int
    score: float | None = None
    passed: bool | None = None
    duration_s: float = 0.0
    in_flight: int = 1
    error: str | None = None
    violations: list[str] = []
    metrics: dict[str, float] = {}
    fields: dict[str, JsonValue] = {}
    items: dict[str, float] = {}
    model_id: str | None = None
    prompt_version: str | None = None
    # An errored trial's evidence: the eval's own frames (a Python eval), and the tail of
    # what it printed on stdout and stderr.
    traceback: str | None = None
    output: str | None = None
    import_s: float | None = None  # importing the eval's module, apart from duration_s
    boot_s: float | None = None  # booting the worker this trial ran in, apart from it too
    # An async trial's longest stretch holding its worker's event loop without awaiting
    # (blocking code in an async def), which paused the trials beside it.
    blocked_s: float | None = None
    # An eval with a judge: the output it yielded and each judgement of it (judgement.py).
    judged: Judged | None = None
    # A suite's trial: its cases, until the probe stage makes each an eval of its own
    # (firewall.pipeline.suites); never written, since no suite's trial reaches a file.
    cases: list[SuiteCase] | None = Field(default=None, exclude=True)

    @model_serializer(mode="wrap")
    def _without_empty_evidence(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Most trials have neither; an artefact of 7,000 trials need not say so 21,000 times.
        data = handler(self)
        if isinstance(data, dict):
            for key in _EVIDENCE:
                if data.get(key) is None:
                    data.pop(key, None)
        return data

    @property
    def errored(self) -> bool:
        return self.error is not None


# The fields a bare score's record sets, as a validated one has them set; the rest default.
_SCORED_SET = frozenset(
    {
        *("index", "seed", "score", "passed", "duration_s", "in_flight"),
        *("violations", "metrics", "fields", "items", "model_id", "prompt_version"),
    }
)


def scored_record(
    index: int, seed: int, score: float, passed: bool, duration_s: float, in_flight: int
) -> TrialRecord:
    """A trial record of a bare score, built as plain data: what ``TrialRecord(...)``
    builds from these values (tests/runner/test_trial.py holds the two equal), at a third
    of the cost, since every value here is of its field's type already. Built as pydantic
    builds a record without validating (``model_construct``), without that method's own
    generic work."""
    record = _new_record(TrialRecord)
    _set(
        record,
        "__dict__",
        {
            "index": index,
            "seed": seed,
            "score": score,
            "passed": passed,
            "duration_s": duration_s,
            "in_flight": in_flight,
            "error": None,
            "violations": [],
            "metrics": {},
            "fields": {},
            "items": {},
            "model_id": None,
            "prompt_version": None,
            "traceback": None,
            "output": None,
            "import_s": None,
            "boot_s": None,
            "blocked_s": None,
            "judged": None,
            "cases": None,
        },
    )
    _set(record, "__pydantic_fields_set__", set(_SCORED_SET))
    _set(record, "__pydantic_extra__", None)
    _set(record, "__pydantic_private__", None)
    return record


_new_record = object.__new__
_set = object.__setattr__

_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_unicode(value: Any) -> Any:
    """The payload with every lone surrogate (JSON's ``"\\ud800"``, or a Python eval's
    string) replaced by U+FFFD: no file can hold one, and an eval's odd text must not
    make its run unwritable."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return _repaired(value)
    except (TypeError, ValueError, RecursionError):
        pass  # not JSON at all: the validation below says what is wrong with it
    return value


def _repaired(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_repaired(key): _repaired(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_repaired(item) for item in value]
    return value


def record_from_payload(
    payload: Any, *, index: int, seed: int, pass_score: float, duration_s: float, in_flight: int
) -> TrialRecord:
    """Validate what an eval reported and turn it into a trial record."""
    if type(payload) is dict and len(payload) == 1:
        # The common case, a bare score: the record the validation below would build, as
        # plain data (it runs once per trial on the orchestrator's busiest thread).
        score = payload.get("score")
        if (type(score) is float or type(score) is int) and 0 <= score <= 1:
            score = float(score)
            return scored_record(
                index, seed, score, score >= pass_score - EPSILON, duration_s, in_flight
            )

    def failed(error: str) -> TrialRecord:
        return error_record(
            index=index, seed=seed, error=error, duration_s=duration_s, in_flight=in_flight
        )

    if not isinstance(payload, dict):
        return failed(f"result must be a JSON object, got {_kind(payload)}")
    payload = _valid_unicode(payload)
    try:
        result = TrialPayload.model_validate(payload)
    except ValidationError as exc:
        return failed(f"invalid trial result: {describe_errors(exc)}")
    if result.error is not None:
        return _with_attribution(failed(f"eval reported: {result.error}"), result)
    if result.score is None and result.passed is None:
        return failed(
            f"the result has an `output` (a {type(result.output).__name__}) and no `score`: "
            "an eval that yields an output names "
            'a judge to score it (`judge = "module:function"`), or returns a score'
        )
    score = result.score if result.score is not None else float(bool(result.passed))
    passed = result.passed if result.passed is not None else score >= pass_score - EPSILON
    return _with_attribution(
        TrialRecord(
            index=index,
            seed=seed,
            duration_s=duration_s,
            in_flight=in_flight,
            score=score,
            passed=passed,
            violations=result.violations,
            fields=result.fields,
            items={case: float(value) for case, value in result.items.items()},
        ),
        result,
    )


def _with_attribution(record: TrialRecord, result: TrialPayload) -> TrialRecord:
    record.metrics = result.metrics
    record.model_id = result.model_id
    record.prompt_version = result.prompt_version
    return record


def error_record(
    *,
    index: int,
    seed: int,
    error: str,
    duration_s: float,
    in_flight: int,
    traceback: str | None = None,
    output: str | None = None,
) -> TrialRecord:
    return TrialRecord(
        index=index,
        seed=seed,
        error=error,
        duration_s=duration_s,
        in_flight=in_flight,
        traceback=traceback,
        output=output or None,
    )


def describe_errors(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"] if part not in ("function-after",))
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            allowed = ", ".join(TrialPayload.model_fields)
            message = f"unknown key (allowed: {allowed})"
        elif error["type"] in ("finite_number",):
            message = f"must be a finite number, got {error.get('input')!r}"
        elif "input" in error and not isinstance(error["input"], dict):
            message = f"{message}, got {shorten(_shown(error['input']))}"
        parts.append(f"{key}: {message}" if key else message)
    return "; ".join(parts)


def _shown(value: Any) -> str:
    """A value as a reason shows it: one holding a non-finite number as JSON spells it
    (``NaN``, ``Infinity``), not with Python's ``nan``, which reads as a broken statistic."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:  # a non-finite number in it (or a cycle, which json.dumps names)
        try:
            return json.dumps(value)
        except (TypeError, ValueError, RecursionError):
            pass
    except (TypeError, RecursionError):
        pass
    return repr(value)


def shorten(text: str, limit: int = _MAX_FIELD_CHARS) -> str:
    """Cut long text for display; the artefact keeps the whole value."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value),
        f"a number ({value!r})" if isinstance(value, (int, float)) else type(value).__name__,
    )
