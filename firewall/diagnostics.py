"""Diagnostics that explain an unstable probe: pure functions over its trials, no I/O.

Owns what a report says beyond the decision: the drift of each output field
(with its value distribution), the items (cases) that flip between pass and
fail, a short ranked list of likely causes each citing its numbers, the
budget metrics in the open, and the checklist line of one policy check.

Every hint rule is simple enough to state in one sentence, and a hint is only
given with the evidence that triggered it:

=================  ================================================  ==============
cause              fires when                                        weight
=================  ================================================  ==============
model changed      ``model_id`` takes more than one value             1.0
prompt changed     ``prompt_version`` takes more than one value       1.0
concurrency        Spearman |rho|(score, in_flight) >= 0.7, n >= 5    |rho|
latency            Spearman |rho|(score, latency_ms) >= 0.7, n >= 5   |rho|
errors             any trial errored                                  0.5 + 0.5 x share
warm-up            trial 0 is beyond the others' range by more than   0.8
                   max(IQR of the others, 0.02), with >= 3 others
few cases          1-3 cases flip, and at most 20% of the cases,     0.7
                   while the score scatters
two behaviours     the largest gap in the sorted scores leaves >= 2   0.5
                   trials each side, is >= 0.05 and > 3x the wider
                   side's range (not for plain 0/1 scores)
sampling           some output field drifts (drift > 0)               0.4
=================  ================================================  ==============

Hints are ranked by weight, ties in the order of the table. The weights put a
change of the system under test first (nothing else can be read until it is
fixed), then evidence that grows with its own strength (a correlation, the share
of errors), then the fixed-shape patterns from most to least specific.
"""

from __future__ import annotations

import enum
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, JsonValue

from firewall.policy import Check, fmt
from firewall.stats import EPSILON, drift_rate, iqr, percentile
from firewall.trial import TrialRecord, shorten

__all__ = [
    "CaseFlip",
    "Cause",
    "Diagnosis",
    "FieldDrift",
    "Hint",
    "ValueCount",
    "budget_summary",
    "case_flips",
    "describe_drift",
    "describe_flip",
    "describe_hint",
    "diagnose",
    "field_drift",
    "format_check",
    "hints",
    "spearman",
]

DISPLAY_CHARS = 80
"""Longest value a report shows; the model keeps the whole value."""
MISSING_DISPLAY = "<missing>"
MIN_CORRELATION = 0.7
MIN_CORRELATION_TRIALS = 5
WARMUP_FLOOR = 0.02
"""Trial 0 must stand out by more than this even when the others agree exactly."""
MAX_FLIPPING_CASES = 3
MAX_FLIPPING_SHARE = 0.2
BIMODAL_MIN_GAP = 0.05
BIMODAL_GAP_RATIO = 3.0
_MISSING_KEY = ""  # json.dumps never returns "", so a missing value cannot collide with any value
_RATE_LIMIT = re.compile(r"rate.?limit|\b429\b|too many requests", re.IGNORECASE)
_TIMEOUT = re.compile(r"timed? ?out|timeout", re.IGNORECASE)


class ValueCount(BaseModel):
    """One value of an output field and how many trials returned it."""

    model_config = ConfigDict(frozen=True)

    value: JsonValue
    display: str
    count: int
    missing: bool = False  # the field was absent, which is not the same as a JSON null


class FieldDrift(BaseModel):
    """How much one output field disagreed with its most common value across the trials."""

    model_config = ConfigDict(frozen=True)

    name: str
    drift: float
    trials: int
    distribution: list[ValueCount]


class CaseFlip(BaseModel):
    """A case (item) that passed in some trials and failed in others."""

    model_config = ConfigDict(frozen=True)

    case: str
    pass_rate: float
    passes: int
    trials: int


class Cause(str, enum.Enum):
    """The kinds of likely cause, in their tie-break order."""

    MODEL_CHANGED = "model-changed"
    PROMPT_CHANGED = "prompt-changed"
    CONCURRENCY = "concurrency"
    LATENCY = "latency"
    ERRORS = "errors"
    WARM_UP = "warm-up"
    FEW_CASES = "few-cases"
    BIMODAL = "bimodal"
    SAMPLING = "sampling"


class Hint(BaseModel):
    """A likely cause of the scatter and the numbers that point to it."""

    model_config = ConfigDict(frozen=True)

    kind: Cause
    cause: str
    evidence: str
    weight: float


class Diagnosis(BaseModel):
    """Everything the diagnostics found about one eval's probe."""

    model_config = ConfigDict(frozen=True)

    trials: int
    measured: int
    cases: int
    drift: list[FieldDrift]
    flips: list[CaseFlip]
    hints: list[Hint]
    budgets: dict[str, float | None]

    def drift_rates(self) -> dict[str, float]:
        """Field name -> drift rate, sorted by name, as the history row keeps it."""
        return {entry.name: entry.drift for entry in sorted(self.drift, key=lambda d: d.name)}


def diagnose(
    trials: Sequence[TrialRecord], *, pass_score: float, with_hints: bool = True
) -> Diagnosis:
    """All the diagnostics of one probe; the hints (the costly part) only when asked."""
    drift = field_drift(trials)
    flips = case_flips(trials, pass_score=pass_score)
    return Diagnosis(
        trials=len(trials),
        measured=len(_measured(trials)),
        cases=len(_case_ids(trials)),
        drift=drift,
        flips=flips,
        hints=hints(trials, flips=flips, drift=drift) if with_hints else [],
        budgets=budget_summary(trials),
    )


# --- field drift -------------------------------------------------------------------------


def field_drift(trials: Sequence[TrialRecord]) -> list[FieldDrift]:
    """Per output field of the non-errored trials, its drift and value counts, worst first."""
    measured = _measured(trials)
    names = {name for trial in measured for name in trial.fields}
    entries = [_drift_of(name, measured) for name in names]
    return sorted(entries, key=lambda entry: (-entry.drift, entry.name))


def _drift_of(name: str, trials: Sequence[TrialRecord]) -> FieldDrift:
    # A missing value is a data point: "the model returned nothing" is drift too.
    keys = [canonical(t.fields[name]) if name in t.fields else _MISSING_KEY for t in trials]
    values = {canonical(t.fields[name]): t.fields[name] for t in trials if name in t.fields}
    counts = sorted(Counter(keys).items(), key=lambda pair: (-pair[1], pair[0]))
    distribution = [
        ValueCount(value=None, display=MISSING_DISPLAY, count=count, missing=True)
        if key == _MISSING_KEY
        else ValueCount(value=values[key], display=display_value(values[key]), count=count)
        for key, count in counts
    ]
    return FieldDrift(
        name=name, drift=drift_rate(keys), trials=len(trials), distribution=distribution
    )


def canonical(value: JsonValue) -> str:
    """A value's identity: canonical JSON, so lists and objects compare and True != 1."""
    return json.dumps(value, sort_keys=True, default=repr)


def display_value(value: JsonValue) -> str:
    """A value as a report shows it: JSON on one line, cut to DISPLAY_CHARS."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    return shorten(text, DISPLAY_CHARS)


# --- flipping cases ----------------------------------------------------------------------


def case_flips(trials: Sequence[TrialRecord], *, pass_score: float) -> list[CaseFlip]:
    """The cases that both passed and failed, closest to a coin toss first, then by id.

    A case counts only in the trials that reported it; a case passes in a trial
    when its item score reaches ``pass_score`` (with the usual 1e-9 slack).
    """
    outcomes: dict[str, list[bool]] = {}
    for trial in _measured(trials):
        for case, score in trial.items.items():
            outcomes.setdefault(case, []).append(score >= pass_score - EPSILON)
    flips = [
        CaseFlip(case=case, pass_rate=sum(seen) / len(seen), passes=sum(seen), trials=len(seen))
        for case, seen in outcomes.items()
        if 0 < sum(seen) < len(seen)
    ]
    # |2p - n| / n is |pass_rate - 0.5| doubled, but exact for 3/7 against 4/7.
    return sorted(flips, key=lambda f: (abs(2 * f.passes - f.trials) / f.trials, f.case))


# --- budgets -----------------------------------------------------------------------------


def budget_summary(trials: Sequence[TrialRecord]) -> dict[str, float | None]:
    """p50/p95 latency, mean tokens and mean cost over the non-errored trials reporting them."""

    def series(metric: str) -> list[float]:
        return [t.metrics[metric] for t in _measured(trials) if metric in t.metrics]

    latencies, tokens, costs = series("latency_ms"), series("tokens"), series("cost_usd")
    return {
        "p50_latency_ms": percentile(latencies, 50) if latencies else None,
        "p95_latency_ms": percentile(latencies, 95) if latencies else None,
        "mean_tokens": math.fsum(tokens) / len(tokens) if tokens else None,
        "mean_cost_usd": math.fsum(costs) / len(costs) if costs else None,
    }


# --- correlation -------------------------------------------------------------------------


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (ties get average ranks); None when a side is constant."""
    if len(x) != len(y):
        raise ValueError(f"need paired samples, got {len(x)} and {len(y)} values")
    rank_x, rank_y = _ranks(x), _ranks(y)
    if len(x) < 2 or len(set(rank_x)) == 1 or len(set(rank_y)) == 1:
        return None
    return _pearson(rank_x, rank_y)


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, tied values sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        shared = (start + end) / 2 + 1
        for position in range(start, end + 1):
            ranks[order[position]] = shared
        start = end + 1
    return ranks


def _pearson(x: Sequence[float], y: Sequence[float]) -> float:
    mean_x, mean_y = math.fsum(x) / len(x), math.fsum(y) / len(y)
    dx = [v - mean_x for v in x]
    dy = [v - mean_y for v in y]
    covariance = math.fsum(a * b for a, b in zip(dx, dy, strict=True))
    return covariance / math.sqrt(math.fsum(a * a for a in dx) * math.fsum(b * b for b in dy))


# --- hints -------------------------------------------------------------------------------


def hints(
    trials: Sequence[TrialRecord], *, flips: Sequence[CaseFlip], drift: Sequence[FieldDrift]
) -> list[Hint]:
    """The likely causes the evidence supports, strongest first (see the module's table)."""
    ordered = sorted(trials, key=lambda t: t.index)
    found = [
        _attribution_hint(
            ordered, "model_id", Cause.MODEL_CHANGED, "the model changed during the probe"
        ),
        _attribution_hint(
            ordered, "prompt_version", Cause.PROMPT_CHANGED, "the prompt changed during the probe"
        ),
        _concurrency_hint(ordered),
        _latency_hint(ordered),
        _errors_hint(ordered),
        _warm_up_hint(ordered),
        _few_cases_hint(ordered, flips),
        _bimodal_hint(ordered),
        _sampling_hint(drift),
    ]
    order = list(Cause)
    present = [hint for hint in found if hint is not None]
    return sorted(present, key=lambda hint: (-hint.weight, order.index(hint.kind)))


def _attribution_hint(
    trials: Sequence[TrialRecord], attribute: str, kind: Cause, cause: str
) -> Hint | None:
    # A trial that does not report the attribute is no evidence of a change.
    reported = [(t.index, v) for t in trials if (v := getattr(t, attribute)) is not None]
    change = next(
        (index for (_, before), (index, after) in itertools.pairwise(reported) if after != before),
        None,
    )
    if change is None:
        return None
    counts = Counter(value for _, value in reported)  # insertion order: first seen first
    values = ", ".join(f"{_one_line(value)} ({n} trials)" for value, n in counts.items())
    return Hint(
        kind=kind,
        cause=cause,
        weight=1.0,
        evidence=f"{attribute} took {len(counts)} values: {values}; first change at trial {change}",
    )


def _concurrency_hint(trials: Sequence[TrialRecord]) -> Hint | None:
    pairs = [(float(t.in_flight), score) for t, score in _scored(trials)]
    return _correlation_hint(
        pairs,
        Cause.CONCURRENCY,
        "in_flight",
        "concurrency: trials running at once interfere (shared state, "
        "rate limits, a degraded path under load)",
        lambda up: f"score {up} as more trials run at once",
    )


def _latency_hint(trials: Sequence[TrialRecord]) -> Hint | None:
    pairs = [
        (t.metrics["latency_ms"], score)
        for t, score in _scored(trials)
        if "latency_ms" in t.metrics
    ]
    return _correlation_hint(
        pairs,
        Cause.LATENCY,
        "latency_ms",
        "slow calls: timeouts or truncated output",
        lambda up: f"score {up} as latency grows",
    )


def _correlation_hint(
    pairs: Sequence[tuple[float, float]],
    kind: Cause,
    label: str,
    cause: str,
    trend: Callable[[str], str],
) -> Hint | None:
    if len(pairs) < MIN_CORRELATION_TRIALS:
        return None
    xs, scores = [x for x, _ in pairs], [s for _, s in pairs]
    rho = spearman(xs, scores)
    if rho is None or abs(rho) < MIN_CORRELATION - EPSILON:
        return None
    direction = "rises" if rho > 0 else "falls"
    return Hint(
        kind=kind,
        cause=cause,
        weight=abs(rho),
        evidence=f"{trend(direction)}: Spearman rho {fmt(rho)} over {len(pairs)} trials "
        f"({label} {fmt(min(xs))}-{fmt(max(xs))})",
    )


def _errors_hint(trials: Sequence[TrialRecord]) -> Hint | None:
    errored = [t for t in trials if t.error is not None]
    if not errored:
        return None
    messages = [t.error or "" for t in errored]
    timeouts = sum(bool(_TIMEOUT.search(m)) for m in messages)
    if any(_RATE_LIMIT.search(m) for m in messages):
        cause = "rate limiting: an outside service refused calls"
    elif timeouts:
        cause = "timeouts: a slow or hanging external dependency"
    else:
        cause = "an external dependency failing (errors, never low scores)"
    detail = f" ({timeouts} timed out)" if timeouts else ""
    return Hint(
        kind=Cause.ERRORS,
        cause=cause,
        weight=0.5 + 0.5 * len(errored) / len(trials),
        evidence=f"{len(errored)} of {len(trials)} trials errored{detail}; first, "
        f"trial {errored[0].index}: {_one_line(errored[0].error or '')}",
    )


def _warm_up_hint(trials: Sequence[TrialRecord]) -> Hint | None:
    scored = _scored(trials)
    first = next((score for t, score in scored if t.index == 0), None)
    rest = [score for t, score in scored if t.index != 0]
    if first is None or len(rest) < 3:
        return None
    beyond = max(min(rest) - first, first - max(rest))  # > 0 only outside the others' range
    allowed = max(iqr(rest), WARMUP_FLOOR)
    if beyond <= allowed + EPSILON:
        return None
    return Hint(
        kind=Cause.WARM_UP,
        cause="warm-up: the first trial ran cold (cache, connection, lazy load)",
        weight=0.8,
        evidence=f"trial 0 scored {fmt(first)}, the other {len(rest)} trials "
        f"{fmt(min(rest))}-{fmt(max(rest))}: {fmt(beyond)} beyond their range "
        f"(more than max(their IQR, {fmt(WARMUP_FLOOR)}) = {fmt(allowed)})",
    )


def _few_cases_hint(trials: Sequence[TrialRecord], flips: Sequence[CaseFlip]) -> Hint | None:
    cases = len(_case_ids(trials))
    scores = [score for _, score in _scored(trials)]
    if not flips or not scores or max(scores) - min(scores) <= EPSILON:
        return None
    if len(flips) > MAX_FLIPPING_CASES or len(flips) > MAX_FLIPPING_SHARE * cases + EPSILON:
        return None
    listed = ", ".join(describe_flip(flip) for flip in flips)
    return Hint(
        kind=Cause.FEW_CASES,
        cause="a few cases flip: the scatter comes from them, not from the whole eval",
        weight=0.7,
        evidence=f"{len(flips)} of {cases} cases flip ({listed}); the other "
        f"{cases - len(flips)} give the same verdict in every trial",
    )


def _bimodal_hint(trials: Sequence[TrialRecord]) -> Hint | None:
    scored = sorted(_scored(trials), key=lambda pair: pair[1])
    scores = [score for _, score in scored]
    # Plain tests score only 0 or 1: two values by construction, not two behaviours.
    if len(scores) < 4 or all(score in (0.0, 1.0) for score in scores):
        return None
    gaps = [b - a for a, b in itertools.pairwise(scores)]
    cut = gaps.index(max(gaps)) + 1
    low, high = scores[:cut], scores[cut:]
    gap = scores[cut] - scores[cut - 1]
    spread = max(low[-1] - low[0], high[-1] - high[0])
    if min(len(low), len(high)) < 2 or gap < BIMODAL_MIN_GAP - EPSILON:
        return None
    if gap <= BIMODAL_GAP_RATIO * spread + EPSILON:
        return None
    minority = scored[:cut] if len(low) <= len(high) else scored[cut:]
    indices = ", ".join(str(t.index) for t, _ in sorted(minority, key=lambda p: p[0].index))
    return Hint(
        kind=Cause.BIMODAL,
        cause="two behaviours, not noise: the trials split into two groups",
        weight=0.5,
        evidence=f"{len(low)} trials scored {fmt(low[0])}-{fmt(low[-1])}, {len(high)} "
        f"scored {fmt(high[0])}-{fmt(high[-1])}; the gap {fmt(gap)} is over "
        f"{fmt(BIMODAL_GAP_RATIO)}x the wider group's range {fmt(spread)} "
        f"(smaller group: trials {indices})",
    )


def _sampling_hint(drift: Sequence[FieldDrift]) -> Hint | None:
    drifting = [entry for entry in drift if entry.drift > EPSILON]
    if not drifting:
        return None
    listed = "; ".join(describe_drift(entry, values=2) for entry in drifting[:3])
    more = f"; and {len(drifting) - 3} more" if len(drifting) > 3 else ""
    return Hint(
        kind=Cause.SAMPLING,
        cause="sampling randomness: the output itself varies (temperature, top_p, unpinned seed)",
        weight=0.4,
        evidence=f"{len(drifting)} of {len(drift)} output fields drift: {listed}{more}",
    )


# --- text --------------------------------------------------------------------------------

_NEGATED = {"<=": ">", ">=": "<", "<": ">=", ">": "<=", "==": "!=", "=": "!=", "!=": "="}
_OPERATOR = re.compile(r"^(<=|>=|==|!=|<|>|=)\s*(.*)$", re.DOTALL)


def format_check(check: Check) -> str:
    """One checklist line, actual against allowed: ``ok   iqr 0.012 <= 0.03``.

    A failed check shows the operator that did hold (``FAIL median 0.61 < 0.85``).
    An allowed value without an operator ("none") is shown in brackets.
    """
    mark = "ok  " if check.ok else "FAIL"
    match = _OPERATOR.match(check.allowed)
    if match is None:
        if check.ok and check.actual == check.allowed:
            return f"{mark} {check.name} {check.actual}"
        return f"{mark} {check.name} {check.actual} (allowed {check.allowed})"
    operator, bound = match.groups()
    shown = operator if check.ok else _NEGATED[operator]
    return f"{mark} {check.name} {check.actual} {shown} {bound}"


def describe_hint(hint: Hint) -> str:
    """One line: the cause, then its evidence."""
    return f"{hint.cause}: {hint.evidence}"


def describe_flip(flip: CaseFlip) -> str:
    return f"{flip.case} passed {flip.passes}/{flip.trials}"


def describe_drift(entry: FieldDrift, *, values: int = 3) -> str:
    """``category 0.43 ("billing" x4, "refund" x3)``, the most common values first."""
    shown = ", ".join(f"{v.display} x{v.count}" for v in entry.distribution[:values])
    more = f", +{len(entry.distribution) - values} more" if len(entry.distribution) > values else ""
    return f"{entry.name} {fmt(entry.drift)} ({shown}{more})"


# --- helpers -----------------------------------------------------------------------------


def _one_line(text: str) -> str:
    """Eval-supplied text cut for a hint: one line whatever the eval printed, and short."""
    return shorten(" ".join(text.split()), DISPLAY_CHARS)


def _measured(trials: Sequence[TrialRecord]) -> list[TrialRecord]:
    return [trial for trial in trials if trial.error is None]


def _scored(trials: Sequence[TrialRecord]) -> list[tuple[TrialRecord, float]]:
    return [(t, t.score) for t in trials if t.error is None and t.score is not None]


def _case_ids(trials: Sequence[TrialRecord]) -> set[str]:
    return {case for trial in _measured(trials) for case in trial.items}
