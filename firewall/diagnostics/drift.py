"""What the trials' data shows directly: field drift, flipping cases, budget metrics.

Also the two ways of writing a value (its identity and its display) and the
filters over trials that the rest of the package shares.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence

from pydantic import JsonValue

from firewall._stats import EPSILON, drift_rate, percentile
from firewall.diagnostics.models import CaseFlip, FieldDrift, ValueCount
from firewall.runner.trial import TrialRecord, shorten

DISPLAY_CHARS = 80
"""Longest value a report shows; the model keeps the whole value."""
MISSING_DISPLAY = "<missing>"
_MISSING_KEY = ""  # json.dumps never returns "", so a missing value cannot collide with any value


# --- field drift -------------------------------------------------------------------------


def field_drift(trials: Sequence[TrialRecord]) -> list[FieldDrift]:
    """Per output field of the non-errored trials, its drift and value counts, worst first."""
    ok = measured(trials)
    names = {name for trial in ok for name in trial.fields}
    entries = [_drift_of(name, ok) for name in names]
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
    for trial in measured(trials):
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
        return [t.metrics[metric] for t in measured(trials) if metric in t.metrics]

    latencies, tokens, costs = series("latency_ms"), series("tokens"), series("cost_usd")
    return {
        "p50_latency_ms": percentile(latencies, 50) if latencies else None,
        "p95_latency_ms": percentile(latencies, 95) if latencies else None,
        "mean_tokens": math.fsum(tokens) / len(tokens) if tokens else None,
        "mean_cost_usd": math.fsum(costs) / len(costs) if costs else None,
    }


# --- shared filters ----------------------------------------------------------------------


def measured(trials: Sequence[TrialRecord]) -> list[TrialRecord]:
    """The trials that did not error: the only ones whose data means anything."""
    return [trial for trial in trials if trial.error is None]


def case_ids(trials: Sequence[TrialRecord]) -> set[str]:
    """Every case (item) id the non-errored trials reported."""
    return {case for trial in measured(trials) for case in trial.items}
