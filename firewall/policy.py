"""The decision: a pure function from an eval's settings and trials to its status.

Rules, first match wins (contract §4): error, violation, instability
(quarantine), median below threshold, Wilson lower bound below
``min_pass_rate``, budget exceeded, pass. Every rule that ran is kept as a
check, passes too, so a report can show actual against allowed.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec
from firewall.stats import EPSILON, Stats, summarize
from firewall.text import fmt, one_line


class Status(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    QUARANTINE = "quarantine"
    QUARANTINED = "quarantined"
    ERROR = "error"

    def __str__(self) -> str:
        # The value, as format() gives on 3.10 and str() would not: the same on every Python.
        return self.value

    @property
    def label(self) -> str:
        return self.value.upper()


class Check(BaseModel):
    """One rule as it ran: its name, whether it held, and the numbers behind it."""

    model_config = ConfigDict(frozen=True)

    name: str
    ok: bool
    actual: str
    allowed: str


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True)

    status: Status
    reason: str
    stats: Stats
    checks: tuple[Check, ...] = ()


_BUDGET_METRICS = {
    "p95_latency_ms": ("latency_ms", "p95 latency", "ms"),
    "mean_tokens": ("tokens", "mean tokens", ""),
    "mean_cost_usd": ("cost_usd", "mean cost", " USD"),
}


def measure(spec: EvalSpec, trials: Sequence[TrialRecord]) -> Stats:
    """The statistics of one probe, over the trials that did not error."""
    scored = [trial for trial in trials if trial.error is None and trial.score is not None]

    def metric(name: str) -> list[float]:
        return [trial.metrics[name] for trial in scored if name in trial.metrics]

    return summarize(
        [trial.score for trial in scored if trial.score is not None],
        [bool(trial.passed) for trial in scored],
        errors=len(trials) - len(scored),
        confidence=spec.confidence,
        latencies_ms=metric("latency_ms"),
        tokens=metric("tokens"),
        costs_usd=metric("cost_usd"),
    )


def decide(spec: EvalSpec, trials: Sequence[TrialRecord]) -> Decision:
    """Apply the rule table to one probe."""
    stats = measure(spec, trials)
    checks: list[Check] = []
    k = len(trials)

    def verdict(status: Status, reason: str) -> Decision:
        # Trial errors and violation names are eval text and may span lines; a reason may not.
        return Decision(status=status, reason=one_line(reason), stats=stats, checks=tuple(checks))

    # 1. error: the probe could not measure enough.
    errored = [trial for trial in trials if trial.error is not None]
    checks.append(
        Check(
            name="errors",
            ok=len(errored) <= spec.max_errors,
            actual=str(len(errored)),
            allowed=f"<= {spec.max_errors}",
        )
    )
    if len(errored) > spec.max_errors or stats.median is None:
        first = errored[0] if errored else None
        detail = f"; trial {first.index} (seed {first.seed}): {first.error}" if first else ""
        return verdict(
            Status.ERROR,
            f"{len(errored)} of {k} trials errored (max_errors {spec.max_errors}){detail}",
        )
    for budget, (metric, _, _) in _BUDGET_METRICS.items():
        if getattr(spec.budgets, budget) is not None and getattr(stats, budget) is None:
            return verdict(
                Status.ERROR, f"budget {budget} is set but no trial reported metrics.{metric}"
            )

    # 2. a broken hard invariant is never averaged away.
    for trial in trials:
        if trial.violations:
            checks.append(
                Check(
                    name="violations", ok=False, actual=", ".join(trial.violations), allowed="none"
                )
            )
            return verdict(
                Status.FAIL,
                f"violation {', '.join(trial.violations)} in trial "
                f"{trial.index} (seed {trial.seed})",
            )
    checks.append(Check(name="violations", ok=True, actual="0", allowed="0"))

    assert stats.median is not None and stats.iqr is not None and stats.q1 is not None
    assert stats.min is not None
    numbers = f"(median {fmt(stats.median)}, iqr {fmt(stats.iqr)}, k={k})"

    # 3. instability, unless the eval is judged on its pass rate.
    if spec.min_pass_rate is None:
        stable = stats.iqr <= spec.flakiness + EPSILON
        checks.append(
            Check(name="iqr", ok=stable, actual=fmt(stats.iqr), allowed=f"<= {fmt(spec.flakiness)}")
        )
        if not stable:
            return verdict(
                Status.QUARANTINE,
                f"iqr {fmt(stats.iqr)} > flakiness "
                f"{fmt(spec.flakiness)} (median {fmt(stats.median)}, k={k})",
            )
        if spec.outlier_fence > 0:
            fence = stats.q1 - spec.outlier_fence * max(stats.iqr, spec.flakiness)
            held = stats.min >= fence - EPSILON
            checks.append(
                Check(
                    name="collapse fence",
                    ok=held,
                    actual=f"min {fmt(stats.min)}",
                    allowed=f">= {fmt(fence)}",
                )
            )
            if not held:
                low = min((t for t in trials if t.score is not None), key=lambda t: t.score or 0.0)
                return verdict(
                    Status.QUARANTINE,
                    f"trial {low.index} (seed {low.seed}) collapsed "
                    f"to {fmt(stats.min)}, below the fence {fmt(fence)} = q1 "
                    f"{fmt(stats.q1)} - {fmt(spec.outlier_fence)} x "
                    f"{fmt(max(stats.iqr, spec.flakiness))} {numbers}",
                )

    # 4. stable and below the bar: a regression.
    reached = stats.median >= spec.threshold - EPSILON
    checks.append(
        Check(
            name="median", ok=reached, actual=fmt(stats.median), allowed=f">= {fmt(spec.threshold)}"
        )
    )
    if not reached:
        return verdict(
            Status.FAIL,
            f"median {fmt(stats.median)} < threshold "
            f"{fmt(spec.threshold)} (iqr {fmt(stats.iqr)}, k={k})",
        )

    # 5. the pass-rate gate, on the Wilson lower bound.
    if spec.min_pass_rate is not None:
        assert stats.wilson_low is not None and stats.pass_rate is not None
        held = stats.wilson_low >= spec.min_pass_rate - EPSILON
        checks.append(
            Check(
                name="wilson lower bound",
                ok=held,
                actual=fmt(stats.wilson_low),
                allowed=f">= {fmt(spec.min_pass_rate)}",
            )
        )
        if not held:
            passes = round(stats.pass_rate * (k - stats.errors))
            return verdict(
                Status.FAIL,
                f"pass rate {passes}/{k - stats.errors}: wilson lower "
                f"bound {fmt(stats.wilson_low)} < min_pass_rate "
                f"{fmt(spec.min_pass_rate)} at {fmt(spec.confidence)} confidence",
            )

    # 6. budgets.
    for budget, (_, label, unit) in _BUDGET_METRICS.items():
        limit = getattr(spec.budgets, budget)
        if limit is None:
            continue
        actual = getattr(stats, budget)
        held = actual <= limit + EPSILON
        checks.append(
            Check(
                name=label, ok=held, actual=f"{fmt(actual)}{unit}", allowed=f"<= {fmt(limit)}{unit}"
            )
        )
        if not held:
            return verdict(Status.FAIL, f"{label} {fmt(actual)}{unit} > budget {fmt(limit)}{unit}")

    return verdict(
        Status.PASS,
        f"median {fmt(stats.median)} >= threshold "
        f"{fmt(spec.threshold)} (iqr {fmt(stats.iqr)}, k={k})",
    )
