"""Fuzz tests: whatever an eval reports, a registry holds or a config says, the firewall
answers with a clear error or a valid decision, never a traceback.

Five families, each fed by Hypothesis:

- trial results: JSON-ish payloads (what a command prints or a Python eval returns, once
  the JSON protocol has carried it) through ``record_from_payload``, a command's raw
  stdout and result file through the runner's own parsing, and probes of such trials
  through ``decide`` and ``conclude``;
- registry files: arbitrary bytes, arbitrary JSON, and a valid registry mutated key by
  key, through ``Registry.read`` and ``Registry.edit``;
- config files: TOML documents of plausible and implausible keys and values, written by
  the small TOML writer below, through ``load_config`` and ``discover``;
- the command line: ``firewall run`` on a project whose registry or config is an example;
- every reader of a file (history, probe parts, JUnit reports, result files): any bytes,
  deep nesting and overlong lines among them.

Most examples are a valid input with a key or two broken, so that they get past the
first check; the rest are anything at all. Every run draws the same examples
(``derandomize``, no example database), so CI is reproducible. The inputs that break
the firewall today are pinned apart, at the end, as strict xfails that a fix flips; the
strategies stop short of those inputs (each place names its pin), so that the
properties stay green and keep guarding everything else.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from builders import invoke_split, make_spec
from click.testing import Result
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from firewall.adaptive import conclude, wanted
from firewall.config import ID_PATTERN
from firewall.configfile import load_config
from firewall.discovery import discover
from firewall.errors import ArtefactError, ConfigError, ExitCode, RegistryError
from firewall.lifecycle import Entry
from firewall.policy import Decision, Status, decide
from firewall.runner import to_record
from firewall.runner.command import _result, _suite
from firewall.runner.outcome import Outcome
from firewall.runner.schedule import Task
from firewall.runner.trial import TrialRecord, error_record, record_from_payload
from firewall.spec import EvalSpec, warnings_for
from firewall.store import history as history_module
from firewall.store.history import HistoryRow, LocalHistory
from firewall.store.parts import Probed, load_part
from firewall.store.registry import Registry, parse_registry, render

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

FUZZ = settings(
    database=None,
    derandomize=True,
    deadline=None,
    max_examples=300,
    # The examples write their files into fresh directories of pytest's session-wide temp
    # tree (tmp_path_factory); the function-scoped autouse fixtures only clean the
    # environment, which no example changes.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
END_TO_END = settings(FUZZ, max_examples=25)

# The one confidence below 1 whose Wilson z cannot be computed:
# see test_a_confidence_just_below_one_is_refused_or_honoured.
CONFIDENCE_AT_THE_EDGE = 1 - 2**-53


# --- values of every kind ------------------------------------------------------------

SPECIAL_TEXT = st.sampled_from(
    [
        "",
        " ",
        "::error::forged",
        "::warning file=evals/x.py,line=1::forged",
        "##[error]forged",
        "see ##[set-output name=status]pass",
        "%0A::error::encoded",
        "line one\nline two",
        "carriage\rreturn",
        "\r\n",
        "tab\tstop",
        "\x00nul",
        "\x1b[31mred\x1b[0m",
        "\x85next line",
        "\u2028line separator",
        "\ufeffbom",
        "\ufffe",
        "日本語 é 🙂",
        "a" * 300,
    ]
)
# st.text() never draws a lone surrogate: a JSON escape that makes one is pinned in
# test_a_lone_surrogate_in_a_trial_result_is_refused_or_kept.
TEXT = st.text(max_size=20) | SPECIAL_TEXT
INTS = st.integers(-(2**70), 2**70) | st.sampled_from([0, 1, -1, 2, 3, 2**53 + 1, 10**400])
EDGE_FLOATS = [-0.0, 0.0, 1.0, 5e-324, 1 + 2**-52, 1 - 2**-53, 1e308, math.nan, math.inf, -math.inf]
FLOATS = st.floats() | st.sampled_from(EDGE_FLOATS)
NUMBERS = INTS | FLOATS
UNIT = st.floats(0, 1)

JSON_KEYS = st.sampled_from(["score", "passed", "error", "items", "Score", ""]) | TEXT
JSONISH = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(JSON_KEYS, inner, max_size=4),
    max_leaves=12,
)
HOW_MANY_BREAKS = st.sampled_from([0, 0, 1, 1, 1, 2, 3])
FEW_BREAKS = st.sampled_from([0, 0, 0, 0, 1, 2])  # for the parts of a table: each may break


@st.composite
def broken(
    draw: st.DrawFn,
    valid: st.SearchStrategy[dict[str, Any]],
    breaks: Mapping[str, st.SearchStrategy[Any]],
    how_many: st.SearchStrategy[int] = HOW_MANY_BREAKS,
) -> dict[str, Any]:
    """A valid table with none, one or a few of its keys given a wrong value, dropped, or
    added (``breaks`` has unknown keys too): near enough to valid to get past the first
    check, so that the checks behind it are fuzzed as well."""
    table = dict(draw(valid))
    for _ in range(draw(how_many)):
        key = draw(st.sampled_from(sorted(breaks)))
        if key in table and draw(st.integers(0, 3)) == 0:
            del table[key]
        else:
            table[key] = draw(breaks[key])
    return table


# --- a. trial results ----------------------------------------------------------------

# Metric values stop at 1e300: sums of values near the float limit are pinned in
# test_metrics_near_the_float_limit_are_refused_or_summed.
METRIC_NAMES = st.sampled_from(["latency_ms", "tokens", "cost_usd"]) | TEXT
METRIC_VALUES = st.floats(-1e300, 1e300) | st.integers(-(10**6), 10**12)
METRICS = st.dictionaries(METRIC_NAMES, METRIC_VALUES, max_size=3)
NOT_HUGE = st.floats().filter(lambda x: not math.isfinite(x) or abs(x) <= 1e300)
VALID_PAYLOADS = st.fixed_dictionaries(
    {"score": UNIT | st.sampled_from([0, 1, -0.0])},
    optional={
        "passed": st.booleans(),
        "error": st.one_of(st.none(), st.none(), st.none(), TEXT),
        "violations": st.lists(TEXT, max_size=2),
        "metrics": METRICS,
        "fields": st.dictionaries(TEXT, JSONISH, max_size=3),
        "items": st.dictionaries(TEXT, UNIT | st.booleans(), max_size=5),
        "model_id": st.none() | TEXT,
        "prompt_version": st.none() | TEXT,
    },
)
PAYLOAD_BREAKS = {
    "score": st.sampled_from([1 + 2**-52, -1e-9, 2, True, "0.5", None, 10**400]) | FLOATS | JSONISH,
    "passed": JSONISH,
    "error": JSONISH,
    "violations": JSONISH | st.lists(JSONISH, min_size=1, max_size=2),
    "metrics": JSONISH | st.dictionaries(METRIC_NAMES, NOT_HUGE | INTS | TEXT, max_size=2),
    "fields": JSONISH,
    "items": JSONISH | st.dictionaries(TEXT, NUMBERS | TEXT, max_size=3),
    "model_id": JSONISH,
    "prompt_version": JSONISH,
    "Score": JSONISH,
    "extra": JSONISH,
}
NEAR_PAYLOADS = broken(VALID_PAYLOADS, PAYLOAD_BREAKS)
PAYLOADS = st.one_of(NEAR_PAYLOADS, NEAR_PAYLOADS, NEAR_PAYLOADS, JSONISH)


def record(payload: Any, *, index: int = 3, pass_score: float = 0.8) -> TrialRecord:
    return record_from_payload(
        payload, index=index, seed=1000 + index, pass_score=pass_score, duration_s=0.5, in_flight=2
    )


def assert_sound_record(trial: TrialRecord) -> None:
    """An errored trial says why and has no score; a scored one has a score in [0, 1]."""
    assert isinstance(trial, TrialRecord)
    if trial.error is not None:
        assert trial.error.strip(), "an error says what went wrong"
        assert trial.score is None and trial.passed is None, "an error is never a low score"
    else:
        assert trial.score is not None and 0 <= trial.score <= 1
        assert isinstance(trial.passed, bool)
        assert all(0 <= value <= 1 for value in trial.items.values())
        assert all(math.isfinite(value) for value in trial.metrics.values())
    trial.model_dump_json()  # the artefact can keep it


@FUZZ
@given(PAYLOADS)
def test_any_payload_becomes_a_trial_record(payload: Any) -> None:
    # The runner calls this outside its guard (firewall.runner.Runner._slot): an exception
    # here would end a slot's thread and leave the run waiting for its trial for ever.
    trial = record(payload)
    event("errored" if trial.errored else "scored")
    assert_sound_record(trial)


def json_lines(noise: Sequence[str], payload: Any, newline: str, encoding: str) -> bytes:
    """What a chatty command prints: some lines, then its result as the last line."""
    text = newline.join([*noise, json.dumps(payload)]) + newline
    return text.encode(encoding, errors="replace")


ENCODINGS = st.sampled_from(["utf-8", "utf-8", "utf-8", "utf-8-sig", "utf-16", "utf-32", "latin-1"])
STDOUT = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    st.builds(json_lines, st.lists(TEXT, max_size=3), PAYLOADS, SPECIAL_TEXT, ENCODINGS),
    st.builds(lambda value: repr(value).encode(), NUMBERS),
)
RESULT_FILES = st.one_of(
    st.none(), st.none(), st.binary(max_size=100), PAYLOADS.map(lambda p: json.dumps(p).encode())
)


@FUZZ
@given(
    stdout=STDOUT,
    written=RESULT_FILES,
    status=st.integers(0, 255),
    stderr=st.binary(max_size=100) | SPECIAL_TEXT.map(str.encode),
)
def test_any_command_output_becomes_a_trial_record(
    tmp_path_factory: pytest.TempPathFactory,
    stdout: bytes,
    written: bytes | None,
    status: int,
    stderr: bytes,
) -> None:
    result_path = tmp_path_factory.mktemp("trial") / "result.json"
    if written is not None:
        result_path.write_bytes(written)
    outcome = _result(result_path, stdout, status, stderr)
    assert isinstance(outcome, Outcome)
    if outcome.error is not None:  # else its payload is whatever JSON it reported, null too
        assert outcome.payload is None
        assert f"exit status {status}" in outcome.error
        assert len(outcome.error.splitlines()) == 1, "a trial's error is one line"
    spec = make_spec(id="chatty", kind="command", target="./chatty")
    trial = to_record(Task(spec=spec, index=0, seed=7, k=7), outcome, 0.25, 1)
    event("errored" if trial.errored else "scored")
    assert_sound_record(trial)


CONFIDENCES = st.floats(0, 1, exclude_min=True, exclude_max=True).filter(
    lambda confidence: confidence != CONFIDENCE_AT_THE_EDGE
)
BUDGETS = st.fixed_dictionaries(
    {},
    optional={
        "p95_latency_ms": st.floats(1e-9, 1e6),
        "mean_tokens": st.floats(1e-9, 1e6),
        "mean_cost_usd": st.floats(0, 10),
    },
)


@st.composite
def specs(draw: st.DrawFn) -> EvalSpec:
    """An eval's settings, anywhere a validated config lets them be."""
    k = draw(st.integers(3, 12))
    threshold = draw(UNIT)
    return make_spec(
        k=k,
        max_k=draw(st.integers(k, 20)),
        threshold=threshold,
        pass_score=draw(st.just(threshold) | UNIT),
        flakiness=draw(st.sampled_from([0.0, 0.03]) | UNIT),
        # Finite: an infinite fence is pinned in test_an_infinite_outlier_fence_is_...
        outlier_fence=draw(st.sampled_from([0.0, 3.0]) | st.floats(0, 10)),
        max_errors=draw(st.integers(0, 4)),
        min_scored=draw(st.sampled_from([1, 3]) | st.integers(1, 8)),
        adaptive=draw(st.booleans()),
        min_pass_rate=draw(st.none() | UNIT),
        confidence=draw(st.just(0.95) | CONFIDENCES),
        budgets=draw(st.one_of(st.just({}), st.just({}), BUDGETS)),
    )


def binary_items(count: st.SearchStrategy[int]) -> st.SearchStrategy[dict[str, Any]]:
    """A trial that scores an accuracy over ``count`` pass/fail cases, as item evals do."""
    return count.flatmap(
        lambda n: st.lists(st.booleans(), min_size=n, max_size=n).map(
            lambda bits: {
                "score": sum(bits) / len(bits),
                "items": {f"case-{i:03}": bit for i, bit in enumerate(bits)},
            }
        )
    )


SCORED = st.fixed_dictionaries(
    {"score": UNIT | st.sampled_from([0.0, 0.5, 0.8, 0.9, 1.0])},
    optional={"passed": st.booleans(), "metrics": METRICS},
)
VIOLATED = st.fixed_dictionaries({"score": UNIT, "violations": st.lists(TEXT, min_size=1)})


@st.composite
def probes(draw: st.DrawFn) -> tuple[EvalSpec, list[TrialRecord]]:
    """An eval and the trials of one probe of it: scores, item accuracies, errors, junk."""
    spec = draw(specs())
    items = st.integers(1, 40)
    same_items = binary_items(st.just(draw(items)))  # one case list: Cochran's Q
    trial = draw(
        st.sampled_from(
            [
                SCORED,
                same_items,
                binary_items(items),  # case lists of many lengths: the dispersion test
                st.one_of(SCORED, SCORED, SCORED, same_items, VIOLATED, PAYLOADS),
            ]
        )
    )
    size = draw(st.one_of(st.sampled_from([0, 1, 2]), st.integers(3, 20), st.integers(3, 20)))
    payloads = draw(st.lists(trial, min_size=size, max_size=size))
    records = [record(p, index=i, pass_score=spec.pass_score) for i, p in enumerate(payloads)]
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # crashed, timed out, killed
        position = draw(st.integers(0, len(records)))
        message = draw(TEXT.filter(str.strip))
        records.insert(
            position,
            error_record(index=position, seed=position, error=message, duration_s=0, in_flight=1),
        )
    return spec, records


def assert_sound_decision(decision: Decision) -> None:
    assert isinstance(decision, Decision)
    assert decision.status in Status and decision.status is not Status.QUARANTINED
    assert decision.reason.splitlines() == [decision.reason], "a reason is one line"
    assert "nan" not in decision.reason, decision.reason


@FUZZ
@given(probes())
def test_any_probe_gets_a_decision_with_a_one_line_reason(
    probe: tuple[EvalSpec, list[TrialRecord]],
) -> None:
    spec, trials = probe
    decision = decide(spec, trials)
    event(decision.status.value)
    assert_sound_decision(decision)
    concluded = conclude(spec, trials)
    if concluded is not None:
        decision, stop = concluded
        assert_sound_decision(decision)
        assert stop.trials == len(trials)
    more = wanted(spec, trials)
    assert 0 <= more <= max(spec.k, spec.max_k, len(trials))


# --- b. registry files ----------------------------------------------------------------

VALID_ENTRY: dict[str, Any] = {
    "since": "2026-11-29T21:05:00Z",
    "source": "auto",
    "reason": "iqr 0.21 > 0.03 (median 0.74, k=7)",
    "median": 0.74,
    "iqr": 0.21,
    "k": 7,
    "git_sha": "0123456789abcdef",
    "issue": 42,
    "stable_streak": 1,
    "clean_trials": 7,
    "last_probe": "2026-11-30T03:00:00Z",
    "review_by": "2026-12-29T21:05:00Z",
    "owner": "alice",
}
VALID_IDS = st.sampled_from(["tone", "triage", "suite/case-1", "a.b_c-d"]) | st.from_regex(
    r"[A-Za-z0-9._/-]{1,12}", fullmatch=True
)
BAD_IDS = st.sampled_from(["x y", "", "é", "a\nb", "::error::x"]) | TEXT
EVAL_IDS = st.one_of(VALID_IDS, VALID_IDS, VALID_IDS, BAD_IDS)
ZONES: st.SearchStrategy[dt.tzinfo | None] = st.one_of(
    st.none(),
    st.just(dt.timezone.utc),
    st.integers(-1439, 1439).map(lambda minutes: dt.timezone(dt.timedelta(minutes=minutes))),
)
# Years 2 to 9998: an offset that pushes a time past year 1 or 9999 is pinned in
# test_a_registry_time_past_the_calendar_is_a_registry_error.
DATETIMES = st.datetimes(
    min_value=dt.datetime(2, 1, 1),
    max_value=dt.datetime(9998, 12, 31),
    # hypothesis's overloads take zones that may be None only without bounds; the strategy
    # itself takes both (it draws naive and aware times between the bounds).
    timezones=ZONES,  # type: ignore[arg-type]
)
TIMES = st.one_of(
    DATETIMES.map(dt.datetime.isoformat),
    st.sampled_from(
        [
            "2026-11-29",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-11-29T21:05:60Z",
            "2026-11-29T21:05:00+24:00",
            "2026-11-29 21:05:00Z",
            "2026-11-29T21:05:00.123456789Z",
            "1764450300",
            "yesterday",
        ]
    ),
    JSONISH,
)
OWNER_NAMES = st.sampled_from(
    ["alice", "@alice", "@org/team", "-alice", "a--b", "a" * 40, "@org/", "o/t/x", " alice", "a\n"]
)
ENTRY_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "since": TIMES,
    "last_probe": TIMES,
    "review_by": TIMES,
    "source": st.sampled_from(["auto", "manual", "Auto", ""]) | JSONISH,
    "reason": TEXT | JSONISH,
    "owner": OWNER_NAMES | JSONISH,
}
SCHEMA_VERSIONS = st.sampled_from([0, 2, "1", 1.0, True, None, -1, 10**30]) | JSONISH

Document = dict[str, Any]
Mutation = Callable[[st.DrawFn, Document], None]


def _an_entry(draw: st.DrawFn, document: Document) -> dict[str, Any] | None:
    evals = document.get("evals")
    if not isinstance(evals, dict) or not evals:
        return None
    entry = evals[draw(st.sampled_from(sorted(evals)))]
    return entry if isinstance(entry, dict) else None


def _set_a_field(draw: st.DrawFn, document: Document) -> None:
    entry = _an_entry(draw, document)
    if entry is not None:
        key = draw(st.sampled_from([*VALID_ENTRY, "extra"]))
        entry[key] = draw(ENTRY_VALUES.get(key, NUMBERS | JSONISH))


def _drop_a_field(draw: st.DrawFn, document: Document) -> None:
    entry = _an_entry(draw, document)
    if entry is not None:
        entry.pop(draw(st.sampled_from(sorted(VALID_ENTRY))), None)


def _replace_an_entry(draw: st.DrawFn, document: Document) -> None:
    evals = document.get("evals")
    if isinstance(evals, dict) and evals:
        evals[draw(st.sampled_from(sorted(evals)))] = draw(JSONISH)


def _change_the_top(draw: st.DrawFn, document: Document) -> None:
    key = draw(st.sampled_from(["schema_version", "evals", "extra"]))
    document[key] = draw(SCHEMA_VERSIONS if key == "schema_version" else JSONISH)


def _drop_from_the_top(draw: st.DrawFn, document: Document) -> None:
    document.pop(draw(st.sampled_from(["schema_version", "evals"])), None)


MUTATIONS: list[Mutation] = [
    _set_a_field,
    _set_a_field,
    _set_a_field,
    _set_a_field,
    _drop_a_field,
    _replace_an_entry,
    _change_the_top,
    _drop_from_the_top,
]


@st.composite
def registry_documents(draw: st.DrawFn) -> Document:
    """A valid registry, then a few mutations of it (often none)."""
    ids = draw(st.lists(EVAL_IDS, max_size=3, unique=True))
    document: Document = {"schema_version": 1, "evals": {i: dict(VALID_ENTRY) for i in ids}}
    for _ in range(draw(HOW_MANY_BREAKS)):
        draw(st.sampled_from(MUTATIONS))(draw, document)
    return document


@st.composite
def registry_files(draw: st.DrawFn) -> bytes:
    """A registry document as some editor saved it: indented or not, in some encoding,
    now and then cut short."""
    document = draw(st.one_of(registry_documents(), registry_documents(), JSONISH))
    text = json.dumps(document, indent=draw(st.sampled_from([None, 2])))
    raw = text.encode(draw(ENCODINGS), errors="replace")
    if draw(st.integers(0, 9)) == 0:
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


def assert_refused(exc: RegistryError, path: Path) -> None:
    # One line too, but for keys with line breaks in them:
    # see test_a_registry_key_with_a_line_break_is_named_on_one_line.
    assert str(path) in str(exc), "the message names the file"
    assert exc.exit_code == ExitCode.USAGE


def read_registry(path: Path) -> dict[str, Entry] | None:
    """The entries of the registry at ``path``, or None when it was refused, as it must be:
    with a RegistryError naming the file, the file left as it was."""
    before = path.read_bytes()
    try:
        entries = Registry(path).read()
    except RegistryError as exc:
        assert_refused(exc, path)
        with pytest.raises(RegistryError), Registry(path).edit() as refused:
            refused.clear()
        assert path.read_bytes() == before, "a registry that does not parse is never overwritten"
        return None
    assert all(re.fullmatch(ID_PATTERN, eval_id) for eval_id in entries)
    assert all(isinstance(entry, Entry) for entry in entries.values())
    return entries


@FUZZ
@given(st.one_of(st.binary(max_size=300), registry_files(), registry_files(), registry_files()))
def test_any_registry_file_is_read_or_refused_by_name(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes
) -> None:
    path = tmp_path_factory.mktemp("registry") / "quarantine.json"
    path.write_bytes(raw)
    entries = read_registry(path)
    event("refused" if entries is None else "read")
    if entries is None:
        return
    # What was read is written back as it reads, and an edit of it goes through.
    assert parse_registry(render(entries), source=str(path)) == entries
    added = Entry(
        since=dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc), source="manual", reason=""
    )
    with Registry(path).edit() as edited:
        edited["fuzz-added"] = added
    assert Registry(path).read() == {**entries, "fuzz-added": added}


@FUZZ
@given(st.one_of(registry_documents(), registry_documents(), JSONISH))
def test_any_json_document_is_parsed_or_refused_by_name(document: Any) -> None:
    source = "state/quarantine.json"
    try:
        entries = parse_registry(json.dumps(document), source=source)
    except RegistryError as exc:
        event("refused")
        assert_refused(exc, Path(source))
    else:
        event("read")
        assert parse_registry(render(entries), source=source) == entries


# --- c. config files ------------------------------------------------------------------

# TOML has no null; its scalars add times and dates. Integers stop short of 4300 digits,
# which are pinned in test_a_toml_integer_too_long_to_convert_is_a_config_error.
TOML_SCALARS = st.booleans() | NUMBERS | TEXT | DATETIMES | st.dates() | st.times()
TOML_VALUES = st.recursive(
    TOML_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_string(text: str) -> str:
    """A TOML basic string: quotes and backslashes escaped, every control character as
    \\uXXXX (TOML allows none of them raw, not even a tab in a key)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\u{ord(m[0]):04x}", escaped) + '"'


def toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)  # 1e+16, 5e-324, -0.0: all TOML floats
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{toml_key(key)} = {toml_value(item)}" for key, item in value.items())
        return "{" + ", ".join(pairs) + "}"
    raise TypeError(f"no TOML for {value!r}")


def is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def to_toml(document: dict[str, Any], table: str = "") -> str:
    """``document`` as TOML under ``table``: its plain keys first, then a ``[table.key]``
    for each table in it and a ``[[table.key]]`` for each array of tables, as people write
    ``[nightly]`` and ``[[evals]]``; anything deeper inline."""
    lines = [f"[{table}]"] if table else []
    nested = []
    for key, value in document.items():
        if isinstance(value, dict) or is_table_array(value):
            nested.append((key, value))
        else:
            lines.append(f"{toml_key(key)} = {toml_value(value)}")
    for key, value in nested:
        name = f"{table}.{toml_key(key)}" if table else toml_key(key)
        for item in value if isinstance(value, list) else [value]:
            lines.append(f"[[{name}]]" if isinstance(value, list) else f"[{name}]")
            lines.extend(f"{toml_key(k)} = {toml_value(v)}" for k, v in item.items())
    return "\n".join(lines) + "\n"


def normalised(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


@settings(FUZZ, max_examples=100)
@given(st.dictionaries(TEXT, TOML_VALUES, max_size=5), st.sampled_from(["", "tool.firewall"]))
def test_the_toml_writer_writes_what_tomllib_reads(document: dict[str, Any], table: str) -> None:
    read = tomllib.loads(to_toml(document, table))
    for part in table.split(".") if table else []:
        read = read[part]
    assert normalised(read) == normalised(document)


COMMANDS = st.sampled_from(
    [
        "echo 0.9",
        "echo 0.5",
        'echo \'{"score": 0.7, "violations": ["::error::forged"]}\'',
        "echo '##[error]x'; echo 0.95",
        'echo \'{"error": "judge down"}\'',
        'echo \'{"score": 0.9, "items": {"a": 1, "b": 0}}\'',
        "echo oops >&2; exit 2",
        "exit 1",
        "echo '{\"score\": 1}' > {result}",
    ]
)
TARGETS = st.sampled_from(["json:loads", "evals.missing:fn", "math:floor"])
FILES = st.sampled_from(["quarantine.json", "state/q.json", "report.json", "", "."])
# Names that do not exist in a fresh project, and "." (which holds no module): discovery
# imports every module under `paths`, so no example may name another directory ("/").
PATHS = st.lists(st.sampled_from(["evals", "examples/evals", "missing", "."]), max_size=2)
LABELS = st.lists(st.sampled_from(["flaky-eval", "evals", "a b"]), min_size=1, max_size=2)
VALID_OPTIONS = {  # the keys an eval and the top level share
    "threshold": UNIT,
    "flakiness": UNIT,
    "outlier_fence": st.floats(0, 10),
    "timeout": st.floats(0.001, 3600),
    "max_errors": st.integers(0, 5),
    "min_scored": st.integers(1, 8),
    "adaptive": st.booleans(),
}


@st.composite
def eval_entries(draw: st.DrawFn, counts: st.SearchStrategy[int]) -> dict[str, Any]:
    """One valid ``[[evals]]`` table: an id, a command or a Python target, some options."""
    kind = draw(st.sampled_from(["command", "python"]))
    entry: dict[str, Any] = {
        "id": draw(VALID_IDS),
        kind: draw(COMMANDS if kind == "command" else TARGETS),
    }
    options = st.fixed_dictionaries(
        {},
        optional={
            **VALID_OPTIONS,
            "k": counts,
            "max_k": st.integers(3, 12),
            "result": st.sampled_from(["json", "exit-code"]),
            "min_pass_rate": UNIT,
            "pass_score": UNIT,
            "confidence": CONFIDENCES,
            "budgets": BUDGETS,
            "regression": st.fixed_dictionaries({"max_drop": UNIT}),
            "blocking": st.booleans(),
            "tags": st.lists(st.sampled_from(["triage", "judge"]), max_size=2),
            "owner": st.sampled_from(["alice", "@alice", "@org/team"]),
        },
    )
    return {**entry, **draw(options)}


def config_documents(*, safe: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Valid config tables with a few keys broken, and unknown keys added.

    ``safe`` documents are for ``firewall run`` to run, so even their broken values keep
    to harmless commands, Python targets and files, and to a few trials: a broken ``k``
    is out of range or of the wrong type, never 5000. Documents that are only loaded
    never run anything, and get any value at all, but for ``paths``.
    """
    counts = st.integers(3, 8) if safe else st.integers(3, 30)
    junk = TOML_VALUES
    wrong_kind = st.booleans() | st.lists(st.integers(), max_size=2) | DATETIMES
    if safe:
        bad_counts: st.SearchStrategy[Any] = st.sampled_from([-1, 0, 2, 10_001, 2**63]) | wrong_kind
        # A timeout past what poll() takes is pinned in
        # test_a_timeout_too_long_for_poll_is_refused_or_honoured.
        bad_timeouts = st.sampled_from([0, -1, -0.0, math.nan, 1e-300, 86400]) | wrong_kind
        bad_text: st.SearchStrategy[Any] = NUMBERS | wrong_kind
    else:
        bad_counts = bad_timeouts = st.one_of(NUMBERS, junk)
        bad_text = TEXT | NUMBERS | junk
    bad_numbers = st.one_of(NUMBERS, junk)
    shared_breaks = {
        "k": bad_counts,
        "max_k": bad_counts,
        "threshold": bad_numbers,
        "flakiness": bad_numbers,
        "outlier_fence": bad_numbers,
        "timeout": bad_timeouts,
        "max_errors": bad_numbers,
        "min_scored": bad_numbers,
        "adaptive": junk,
        "thresold": junk,
    }
    entry_breaks = {
        **shared_breaks,
        "id": BAD_IDS | junk,
        "command": bad_text,
        "python": bad_text | st.sampled_from(["a:b", "a.b:", ":f", "os.path"]),
        "inspect": TEXT,
        "result": st.sampled_from(["junit", "JSON", ""]) | junk,
        "min_pass_rate": bad_numbers,
        "pass_score": bad_numbers,
        "confidence": NUMBERS.filter(lambda c: c != CONFIDENCE_AT_THE_EDGE) | junk,
        "budgets": junk | st.fixed_dictionaries({"p95_latency_ms": NUMBERS}),
        "regression": junk | st.fixed_dictionaries({"max_drop": NUMBERS}),
        "blocking": junk,
        "tags": junk,
        "owner": OWNER_NAMES | TEXT | junk,
    }
    top_breaks = {
        **shared_breaks,
        "seed": st.sampled_from(["Random", "", -1, 1.5]) | junk,
        "concurrency": st.sampled_from([0, -1, 513, 1.5]) | wrong_kind,
        "registry": bad_text,
        "history": bad_text,
        "report": bad_text,
        "paths": wrong_kind | st.lists(st.integers(), min_size=1, max_size=2),
        "nightly": junk | st.fixed_dictionaries({"k": bad_numbers, "release_after": bad_numbers}),
        "github": junk | st.fixed_dictionaries({"labels": junk, "budget": bad_numbers}),
        "state": junk | st.fixed_dictionaries({"remote": TEXT, "branch": TEXT}),
        "evals": junk,
    }
    entry = broken(eval_entries(counts), entry_breaks, FEW_BREAKS)
    valid = st.fixed_dictionaries(
        {"evals": st.lists(entry, min_size=1 if safe else 0, max_size=3)},
        optional={
            **VALID_OPTIONS,
            "k": counts,
            "max_k": st.integers(3, 12) if safe else st.integers(3, 40),
            "seed": st.integers(0, 2**32) | st.just("random"),
            "concurrency": st.integers(1, 16),
            "registry": FILES,
            "history": FILES,
            "report": FILES,
            "paths": PATHS,
            "nightly": st.fixed_dictionaries(
                {},
                optional={
                    "k": st.integers(3, 30),
                    "release_after": st.integers(1, 5),
                    "review_days": st.integers(1, 60),
                },
            ),
            "github": st.fixed_dictionaries(
                {},
                optional={"issues": st.booleans(), "labels": LABELS, "budget": st.floats(0.1, 60)},
            ),
            "state": st.fixed_dictionaries(
                {},
                optional={
                    "remote": st.sampled_from(["", "origin"]),
                    "branch": st.sampled_from(["firewall-state", "fw/state"]),
                },
            ),
        },
    )
    return broken(valid, top_breaks)


def in_pyproject(document: dict[str, Any]) -> str:
    return '[project]\nname = "demo"\n\n' + to_toml(document, "tool.firewall")


# Deferred, so that a failure's report names the strategy instead of printing its tree.
LOADED_DOCUMENTS = st.deferred(lambda: config_documents(safe=False))
RUN_DOCUMENTS = st.deferred(lambda: config_documents(safe=True))
TOML_LINES = st.sampled_from(
    ["k = 3", "[nightly]", "[[evals]]", 'id = "a"', 'command = "x"', "k = ", '"', "[", "= 1"]
)
CONFIG_FILES = st.one_of(
    st.builds(lambda doc: ("firewall.toml", to_toml(doc)), LOADED_DOCUMENTS),
    st.builds(lambda doc: ("firewall.toml", to_toml(doc)), LOADED_DOCUMENTS),
    st.builds(lambda doc: ("pyproject.toml", in_pyproject(doc)), LOADED_DOCUMENTS),
    st.tuples(st.just("firewall.toml"), st.lists(TOML_LINES | TEXT).map("\n".join)),
    st.tuples(st.sampled_from(["firewall.toml", "pyproject.toml"]), st.text(max_size=200)),
    st.tuples(st.just("firewall.toml"), st.binary(max_size=200)),
)
# A probe every spec can be decided on, whatever its settings.
PROBE = [record({"score": 0.9 - 0.01 * (i % 3)}, index=i) for i in range(7)]


@FUZZ
@given(CONFIG_FILES)
def test_any_config_file_is_loaded_or_refused_by_name(
    tmp_path_factory: pytest.TempPathFactory, named: tuple[str, str | bytes]
) -> None:
    name, content = named
    project = tmp_path_factory.mktemp("config")
    path = project / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    try:
        specs = discover(load_config(path, project), project)
    except ConfigError as exc:
        event("refused")
        assert name in str(exc), "the message names the file"
        assert exc.exit_code == ExitCode.USAGE
        return
    event(f"loaded, {min(len(specs), 1)}+ evals")
    for spec in specs:
        assert isinstance(spec, EvalSpec)
        assert all(isinstance(note, str) for note in warnings_for(spec))
        decision = decide(spec, PROBE)
        assert decision.reason.splitlines() == [decision.reason]
        conclude(spec, PROBE)


# --- d. the command line --------------------------------------------------------------

DOCUMENTED_EXIT_CODES = {
    ExitCode.OK,
    ExitCode.FAIL,
    ExitCode.USAGE,
    ExitCode.ERROR,
    ExitCode.NOTHING_SELECTED,
}
PLAIN_CONFIG = """\
k = 3
[state]
remote = ""
[[evals]]
id = "tone"
command = "echo 0.9"
[[evals]]
id = "triage"
command = "echo 0.85"
"""


@contextmanager
def inside(directory: Path) -> Iterator[Path]:
    """The working directory is ``directory`` for the block, as it is for a user's run."""
    before = Path.cwd()
    os.chdir(directory)
    try:
        yield directory
    finally:
        os.chdir(before)


def assert_clean_exit(exit_code: int, shown: str) -> None:
    assert exit_code in DOCUMENTED_EXIT_CODES, shown
    assert "Traceback" not in shown and "internal error" not in shown, shown


def assert_clean_run(result: Result) -> None:
    assert_clean_exit(result.exit_code, result.stdout + result.stderr)


@END_TO_END
@given(registry_files())
def test_firewall_run_honours_or_refuses_any_registry(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes
) -> None:
    with inside(tmp_path_factory.mktemp("project")) as project:
        (project / "firewall.toml").write_text(PLAIN_CONFIG, encoding="utf-8")
        (project / "quarantine.json").write_bytes(raw)
        result = invoke_split("run", "--no-issues")
    event(f"exit {result.exit_code}")
    assert_clean_run(result)


@END_TO_END
@given(RUN_DOCUMENTS)
def test_firewall_run_honours_or_refuses_any_config(
    tmp_path_factory: pytest.TempPathFactory, document: dict[str, Any]
) -> None:
    with inside(tmp_path_factory.mktemp("project")) as project:
        (project / "firewall.toml").write_text(to_toml(document), encoding="utf-8")
        result = invoke_split("run", "--no-issues")
    event(f"exit {result.exit_code}")
    assert_clean_run(result)


# --- every reader of a file: any bytes in, a value or the documented error out -------
# Whatever a file holds (garbage, a JSON document nested past Python's recursion limit,
# a line longer than the readers hold), its reader answers with what it could read or
# with the error it documents, naming the file: never another exception.


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


DEEP_DOCUMENTS = st.sampled_from([b"[" * 100_000, nested(100_000), nested(900), b"{" * 50_000])
ROW_LINES = st.one_of(
    st.builds(
        lambda eval_id, run, day: json.dumps(
            {
                "eval_id": eval_id,
                "run_id": f"run-{run}",
                "build_ts": f"2026-11-{day:02d}T00:00:00Z",
                "median": 0.5,
            },
            separators=(",", ":"),
        ).encode(),
        st.sampled_from(["tone", "triage", "a"]),
        st.integers(0, 3),
        st.integers(1, 28),
    ),
    st.binary(max_size=80),
    DEEP_DOCUMENTS,
    st.sampled_from([b"", b" ", b"{}", b"null", b'{"eval_id": 5}', b"x" * 300]),
)
HISTORY_FILES = st.builds(
    lambda lines, tail: b"\n".join(lines) + (b"\n" if tail else b""),
    st.lists(ROW_LINES, max_size=8),
    st.booleans(),
)


def plain_rows(raw: bytes, cap: int) -> list[HistoryRow]:
    """The rows of a history file as a plain reading of its lines finds them."""
    rows = []
    for line in raw.split(b"\n"):
        if len(line) > cap:
            continue
        try:
            row = HistoryRow.from_json(json.loads(line.decode("utf-8")))
        except (ValueError, RecursionError):
            continue
        if row is not None:
            rows.append(row)
    return rows


@FUZZ
@given(raw=HISTORY_FILES, chunk=st.sampled_from([7, 64, 1 << 18]), cap=st.sampled_from([50, 200]))
def test_any_history_file_reads_as_the_rows_its_lines_hold(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    raw: bytes,
    chunk: int,
    cap: int,
) -> None:
    # A small line cap and small blocks, so that lines over the cap and lines cut by a
    # block's edge are common: a line over the cap is skipped, whichever way it is read.
    monkeypatch.setattr(history_module, "MAX_LINE_BYTES", cap)
    path = tmp_path_factory.mktemp("history") / "history.jsonl"
    path.write_bytes(raw)
    warned: list[str] = []
    store = LocalHistory(path, warn=warned.append)
    expected = plain_rows(raw, cap)
    assert list(store.scan()) == expected
    assert list(store.scan({"tone"})) == [row for row in expected if row.eval_id == "tone"]
    since = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
    assert store.recent(since=since, chunk=chunk) == expected
    last = list(itertools.takewhile(lambda row: row.run_id == expected[-1].run_id, expected[::-1]))
    assert store.last_run(chunk=chunk) == last[::-1]
    assert len(warned) <= 1, "a history's skipped lines are said once"
    event(f"{len(expected)} rows, {'warned' if warned else 'quiet'}")


PART_FILES = st.one_of(
    st.binary(max_size=200),
    DEEP_DOCUMENTS,
    st.builds(
        lambda inside: (
            b'{"schema_version":1,"kind":"firewall-probe-part","base_seed":1,"started_at":'
            b'"2026-11-29T21:05:00Z","finished_at":"2026-11-29T21:05:00Z","complete":true,'
            b'"specs":[],"trials":' + inside + b"}"
        ),
        st.one_of(DEEP_DOCUMENTS, st.just(b"{}"), JSONISH.map(lambda v: json.dumps(v).encode())),
    ),
)


@FUZZ
@given(PART_FILES)
def test_any_probe_part_is_read_or_refused_by_name(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes
) -> None:
    path = tmp_path_factory.mktemp("part") / "part-1.json"
    path.write_bytes(raw)
    try:
        part = load_part(path)
    except ArtefactError as exc:
        event("refused")
        assert str(path) in str(exc) and exc.exit_code == ExitCode.USAGE
    else:
        event("read")
        assert isinstance(part, Probed)


JUNIT_FILES = st.one_of(
    st.binary(max_size=200),
    st.sampled_from(
        [
            b"<testsuite>" + b"<a>" * 100_000 + b"</a>" * 100_000 + b"</testsuite>",
            b'<testsuite><testcase name="t"/>' + b"<a>" * 50_000,
            b'<?xml version="1.0"?><testsuites><testsuite name="pytest"><testcase '
            b'classname="tests.test_x" name="test_y"><failure message="no"/></testcase>'
            b"</testsuite></testsuites>",
        ]
    ),
    st.builds(
        lambda name, mark: (
            f'<testsuite><testcase classname="c" name={json.dumps(name)}>{mark}</testcase>'
            "</testsuite>"
        ).encode("utf-8", "replace"),
        TEXT,
        st.sampled_from(["", "<failure/>", "<error/>", "<skipped/>", "<failure>"]),
    ),
)


@FUZZ
@given(JUNIT_FILES, st.integers(0, 255))
def test_any_junit_report_becomes_cases_or_an_errored_trial(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes, status: int
) -> None:
    directory = tmp_path_factory.mktemp("suite")
    path = directory / "junit.xml"
    path.write_bytes(raw)
    outcome = _suite(path, status, b"", directory)
    assert isinstance(outcome, Outcome)
    assert (outcome.error is None) != (outcome.payload is None)
    event("errored" if outcome.error is not None else "scored")


@FUZZ
@given(DEEP_DOCUMENTS | st.binary(max_size=100), st.sampled_from(["stdout", "result file"]))
def test_any_deep_or_garbage_result_is_an_errored_trial_or_a_record(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes, where: str
) -> None:
    result_path = tmp_path_factory.mktemp("trial") / "result.json"
    if where == "result file":
        result_path.write_bytes(raw)
    outcome = _result(result_path, raw if where == "stdout" else b"", 0, b"")
    spec = make_spec(id="deep", kind="command", target="./deep")
    assert_sound_record(to_record(Task(spec=spec, index=0, seed=7, k=7), outcome, 0.25, 1))


# --- what breaks the firewall today ---------------------------------------------------
# Each of these is a traceback (exit 4), an "internal error" of the runner, or a message
# or reason that breaks its own rules, for an input the fuzz tests above could draw.
# A fix flips its test.

DEEP = 100_000  # far past Python's recursion limit


def one_eval(command: str, **settings: str) -> str:
    """A config of one command eval, with the global ``settings`` given."""
    lines = ["k = 3", *(f"{key} = {value}" for key, value in settings.items())]
    lines += ["[state]", 'remote = ""', "[[evals]]", 'id = "demo"']
    return "\n".join([*lines, f"command = {toml_string(command)}"]) + "\n"


def run_with_config(project: Path, config: str, *args: str) -> Result:
    with inside(project):
        (project / "firewall.toml").write_text(config, encoding="utf-8")
        return invoke_split(*args)


def test_a_lone_surrogate_in_a_trial_result_is_refused_or_kept(project: Path) -> None:
    command = """printf '%s\\n' '{"score": 0.9, "fields": {"reply": "\\ud800"}}'"""
    assert_clean_run(run_with_config(project, one_eval(command), "run", "--no-issues"))


def test_a_deeply_nested_registry_is_a_registry_error() -> None:
    with pytest.raises(RegistryError, match=r"quarantine\.json"):
        parse_registry(b"[" * DEEP, source="quarantine.json")


def test_a_registry_key_with_a_line_break_is_named_on_one_line() -> None:
    document = {"schema_version": 1, "evals": {"tone": {**VALID_ENTRY, "a\n::error::x": 1}}}
    with pytest.raises(RegistryError) as refused:
        parse_registry(json.dumps(document), source="quarantine.json")
    assert str(refused.value).splitlines() == [str(refused.value)]


@pytest.mark.parametrize("where", ["stdout", "result file"])
def test_a_deeply_nested_command_result_is_an_errored_trial(tmp_path: Path, where: str) -> None:
    result_path = tmp_path / "result.json"
    if where == "result file":
        result_path.write_bytes(b"[" * DEEP)
    outcome = _result(result_path, b"[" * DEEP if where == "stdout" else b"", 0, b"")
    assert outcome.error is not None and "exit status 0" in outcome.error


def test_a_deeply_nested_config_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "firewall.toml"
    path.write_text("a = " + "[" * 2000 + "]" * 2000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"firewall\.toml"):
        load_config(path, tmp_path)


def test_a_toml_integer_too_long_to_convert_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "firewall.toml"
    path.write_text("k = " + "9" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"firewall\.toml"):
        load_config(path, tmp_path)


@pytest.mark.parametrize("timeout", ["inf", "1e10"])
def test_a_timeout_too_long_for_poll_is_refused_or_honoured(project: Path, timeout: str) -> None:
    (project / "firewall.toml").write_text(one_eval("echo 0.9", timeout=timeout))
    # In a process of its own: today's failure leaves the trial's shell and pipes behind.
    ran = subprocess.run(
        [sys.executable, "-m", "firewall", "run", "--no-issues"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert_clean_exit(ran.returncode, ran.stdout + ran.stderr)


def test_a_confidence_just_below_one_is_refused_or_honoured(project: Path) -> None:
    config = one_eval("echo 0.9") + f"confidence = {CONFIDENCE_AT_THE_EDGE!r}\n"
    assert_clean_run(run_with_config(project, config, "run", "--no-issues"))


def test_an_infinite_outlier_fence_is_refused_or_honoured(project: Path) -> None:
    config = one_eval("echo 0.9", outlier_fence="inf", flakiness="0")
    result = run_with_config(project, config, "run", "--no-issues")
    assert_clean_run(result)
    assert "nan" not in result.stdout


def test_firewall_list_shows_a_large_pass_rate_gate(project: Path) -> None:
    config = one_eval("echo 0.9") + "k = 1100\nmax_k = 1100\nmin_pass_rate = 0.5\n"
    assert_clean_run(run_with_config(project, config, "list"))


@pytest.mark.parametrize("since", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"])
def test_a_registry_time_past_the_calendar_is_a_registry_error(since: str) -> None:
    document = {"schema_version": 1, "evals": {"tone": {**VALID_ENTRY, "since": since}}}
    with pytest.raises(RegistryError, match=r"quarantine\.json"):
        parse_registry(json.dumps(document), source="quarantine.json")


def test_metrics_near_the_float_limit_are_refused_or_summed() -> None:
    trials = [record({"score": 0.9, "metrics": {"tokens": 1e308}}, index=i) for i in range(3)]
    assert_sound_decision(decide(make_spec(k=3), trials))


def test_a_violation_name_with_a_line_break_stays_on_one_row() -> None:
    payload = {"score": 0.9, "violations": ["pii\n::error::forged"]}
    decision = decide(make_spec(k=3), [record(payload, index=i) for i in range(3)])
    assert all(check.actual.splitlines() == [check.actual] for check in decision.checks)
