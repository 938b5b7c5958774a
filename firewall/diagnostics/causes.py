"""Likely causes of an unstable probe: the hint rules, their thresholds, and rank correlation.

Every hint rule is simple enough to state in one sentence, and a hint is only
given with the evidence that triggered it:

=================  ================================================  ==============
cause              fires when                                        weight
=================  ================================================  ==============
model changed      ``model_id`` takes more than one value             1.0
prompt changed     ``prompt_version`` takes more than one value       1.0
concurrency        Spearman |rho|(score, in_flight) >= 0.7, n >= 5    |rho|
latency            Spearman |rho|(score, latency_ms) >= 0.7, n >= 5   |rho|
errors             any trial errored; the cause is read from how:     0.5 + 0.5 x share
                   an outage's text first (rate limit, 429,
                   timeout, 5xx, connection refused or reset,
                   overloaded), then the same error in at least
                   two trials and every one (a bug or a setup
                   problem), then a mix of scored and errored
warm-up            trial 0 is beyond the others' range by more than   0.8
                   3 x max(IQR of the others, 0.02), or by more
                   than 1 x and it took twice the others' median
                   time (a cold start shows in the clock), with >= 3
                   others
few cases          1-3 cases flip, and at most 20% of the cases,     0.7
                   while the score scatters
two behaviours     the largest gap in the sorted scores leaves >= 2   0.5
                   trials each side, is >= 0.05 and > 3x the wider
                   side's range (not for plain 0/1 scores)
judge              an eval with a judge whose outputs were judged     0.9
                   more than once: the judge holds more of the
                   variance than the model (firewall.judging)
sampling           the model holds more of an eval with a judge's     0.9
                   variance; else some output field drifts            0.4
                   (drift > 0)
=================  ================================================  ==============

Where the split of a judged eval's variance is known, it replaces the guess from
drifting fields: the sampling hint then quotes the split.

Hints are ranked by weight, ties in the order of the table. The weights put a
change of the system under test first (nothing else can be read until it is
fixed), then evidence that grows with its own strength (a correlation, the share
of errors), then the fixed-shape patterns from most to least specific.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence

from firewall import judging
from firewall._stats import EPSILON, iqr
from firewall.diagnostics.drift import DISPLAY_CHARS, case_ids
from firewall.diagnostics.models import CaseFlip, Cause, FieldDrift, Hint
from firewall.diagnostics.text import describe_drift, describe_flip
from firewall.runner.trial import TrialRecord, shorten
from firewall.text import fmt

MIN_CORRELATION = 0.7
MIN_CORRELATION_TRIALS = 5
WARMUP_FLOOR = 0.02
"""Trial 0 must stand out by more than this even when the others agree exactly."""
MAX_FLIPPING_CASES = 3
MAX_FLIPPING_SHARE = 0.2
BIMODAL_MIN_GAP = 0.05
BIMODAL_GAP_RATIO = 3.0
MIN_REPEATED_ERRORS = 2
"""Errored trials it takes to call an error "the same in every trial": one (adaptive K
stops at the first error past max_errors) repeats nothing."""
_RATE_LIMIT = re.compile(r"rate.?limit|\b429\b|too many requests", re.IGNORECASE)
_TIMEOUT = re.compile(r"timed? ?out|timeout", re.IGNORECASE)
_OUTAGE = re.compile(
    r"\b5\d\d\b|unavailable|bad gateway|overloaded|unreachable|"
    r"connection (?:reset|refused|aborted|error)|temporary failure",
    re.IGNORECASE,
)
WARMUP_FENCE = 3.0
"""How far beyond the others trial 0 must be on its score alone: by chance it is the
lowest one probe in k, so merely outside their range is no evidence of a cold start."""
WARMUP_SLOWER = 2.0
"""Or how many times the others' median duration it took, when it is beyond them at all."""


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
        *_source_hints(ordered, drift),
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
    shapes = {re.sub(r"\d+", "#", m) for m in messages}
    every = len(errored) == len(trials)
    # An outage's own words outrank the pattern: a 503 in every trial is still an outage.
    if any(_RATE_LIMIT.search(m) for m in messages):
        cause = "rate limiting: an outside service refused calls"
    elif timeouts:
        cause = "timeouts: a slow or hanging external dependency"
    elif any(_OUTAGE.search(m) for m in messages):
        cause = "an external dependency failing (errors, never low scores)"
    elif every and len(errored) < MIN_REPEATED_ERRORS:
        cause = "one trial, and it errored: too little to tell a bug from an outage"
    elif every and len(shapes) == 1:
        cause = "the same error in every trial: a bug or a setup problem, not flakiness"
    elif every:
        cause = f"every trial errored, in {len(shapes)} ways: a setup problem more than an outage"
    else:
        cause = "intermittent errors: some trials score, others fail"
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
    durations = {t.index: t.duration_s for t, _ in scored}
    others = sorted(d for i, d in durations.items() if i != 0 and d is not None)
    typical = others[len(others) // 2] if others else 0.0
    took = durations.get(0)
    slow = took is not None and typical > 0 and took >= WARMUP_SLOWER * typical
    if beyond <= WARMUP_FENCE * allowed + EPSILON and not slow:
        return None
    clock = (
        f", and it took {fmt(took or 0)} s against their median {fmt(typical)} s" if slow else ""
    )
    return Hint(
        kind=Cause.WARM_UP,
        cause="warm-up: the first trial ran cold (cache, connection, lazy load)",
        weight=0.8,
        evidence=f"trial 0 scored {fmt(first)}, the other {len(rest)} trials "
        f"{fmt(min(rest))}-{fmt(max(rest))}: {fmt(beyond)} beyond their range "
        f"(max(their IQR, {fmt(WARMUP_FLOOR)}) = {fmt(allowed)}){clock}",
    )


def _few_cases_hint(trials: Sequence[TrialRecord], flips: Sequence[CaseFlip]) -> Hint | None:
    cases = len(case_ids(trials))
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


def _source_hints(trials: Sequence[TrialRecord], drift: Sequence[FieldDrift]) -> list[Hint | None]:
    """The judge or the model, from the split of a judged eval's variance; else the
    guess from drifting fields."""
    found = judging.split(trials)
    if found is None:
        return [_sampling_hint(drift)]
    if found.dominant == "judge":
        return [
            Hint(
                kind=Cause.JUDGE,
                cause=f"the judge: it scores the same output differently; {judging.PIN}",
                weight=0.9,
                evidence=found.text(),
            )
        ]
    return [
        Hint(
            kind=Cause.SAMPLING,
            cause="sampling randomness: the outputs themselves differ (temperature, top_p, "
            "unpinned seed, the prompt), not their judge",
            weight=0.9,
            evidence=found.text(),
        )
    ]


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


# --- helpers -----------------------------------------------------------------------------


def _one_line(text: str) -> str:
    """Eval-supplied text cut for a hint: one line whatever the eval printed, and short."""
    return shorten(" ".join(text.split()), DISPLAY_CHARS)


def _scored(trials: Sequence[TrialRecord]) -> list[tuple[TrialRecord, float]]:
    return [(t, t.score) for t in trials if t.error is None and t.score is not None]
