"""The decision: a pure function from an eval's settings and trials to its status.

Rules, first match wins (contract §4): error, violation, instability
(quarantine), median below threshold, Wilson lower bound below
``min_pass_rate``, budget exceeded, pass. Every rule that ran is kept as a
check, passes too, so a report can show actual against allowed.

Instability is judged on what the trials report. Score-only evals: the IQR
against ``flakiness``. Evals whose every trial reports items whose mean is
its score: a test of the trials against the noise of their items, since an
accuracy over 50 items scatters by about 0.04 from that noise alone. Binary
items are tested against binomial noise (``firewall.stats.item_variance``),
continuous ones over the same ids by a two-way ANOVA of the trial effect
(``firewall.stats.trial_anova``). Both keep the collapse fence, the item
evals' widened for the same noise (and checked before the test, so that a
collapse is told by the trial it names).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from statistics import NormalDist

from pydantic import BaseModel, ConfigDict

from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec
from firewall.stats import ANOVA, EPSILON, ItemTest, Stats, item_variance, summarize, trial_anova
from firewall.text import fmt, one_line

ITEM_TEST_LEVEL = 0.01
"""The trials of a binary-item eval are unstable when the p-value of their spread, under
binomial noise alone, is below this (contract §4: "at 1%")."""

ITEM_FENCE_Z = NormalDist().inv_cdf(1 - ITEM_TEST_LEVEL / 2)
"""How many binomial standard deviations of one trial's score an item eval's collapse fence
counts as F at least (2.576, the two-sided 1% normal quantile); see ``_fence_width``."""


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
    return _measure(spec, trials)[0]


def _measure(spec: EvalSpec, trials: Sequence[TrialRecord]) -> tuple[Stats, ItemTest | None]:
    scored = [trial for trial in trials if trial.error is None and trial.score is not None]

    def metric(name: str) -> list[float]:
        return [trial.metrics[name] for trial in scored if name in trial.metrics]

    stats = summarize(
        [trial.score for trial in scored if trial.score is not None],
        [bool(trial.passed) for trial in scored],
        errors=len(trials) - len(scored),
        confidence=spec.confidence,
        latencies_ms=metric("latency_ms"),
        tokens=metric("tokens"),
        costs_usd=metric("cost_usd"),
    )
    # A pass-rate eval is exempt from every instability rule: no test to report either.
    test = item_test(scored) if spec.min_pass_rate is None else None
    if test is None:
        return stats, None
    stats.item_test, stats.item_p = test.name, test.result.p_value
    stats.dispersion, stats.items_per_trial = test.dispersion, test.items
    return stats, test


_BINARY = frozenset((0.0, 1.0))  # 1 == 1.0 == True in a set: any binary number is a member


def item_test(scored: Sequence[TrialRecord]) -> ItemTest | None:
    """The test of the trials against their item noise, when the score is made of items.

    That is when every trial reports items whose mean is its score. Binary items
    (an accuracy) are tested against binomial noise (``item_variance``);
    continuous ones (a judge's 0.7) by a two-way ANOVA of the trial effect
    (``trial_anova``), which needs the same item ids in every trial: without
    them there is no item noise to separate, and the plain IQR rule applies.
    """
    if not scored:
        return None
    binary = True
    for trial in scored:
        values = trial.items.values()
        if not values or trial.score is None:
            return None
        if abs(math.fsum(values) / len(values) - trial.score) > EPSILON:
            return None
        binary = binary and _BINARY.issuperset(values)
    items = [trial.items for trial in scored]
    if binary:
        return item_variance(items)
    if any(trial.keys() != items[0].keys() for trial in items) or len(items) < 2:
        return None
    return trial_anova(items)


def _noise_name(test: ItemTest) -> str:
    return "the items' noise" if test.name == ANOVA else "binomial"


def _p_text(p: float) -> str:
    """Two significant digits (0.42, 0.0031, 2.3e-05), and never rounded up to the level."""
    text = f"{p:.2g}"
    return f"{p:.3g}" if p < ITEM_TEST_LEVEL <= float(text) else text


def _fence_width(spec: EvalSpec, test: ItemTest | None) -> float:
    """The least width the collapse fence counts in ("at least F", contract §4).

    For an item eval, at least ITEM_FENCE_Z binomial standard deviations of a
    trial's score. F is a setting about scores in general: left at 0.03, the
    fence of an accuracy over 20 items at p = 0.95 would quarantine 5% of
    honest probes by itself (2% at 50 items and p = 0.9), the binomial's long
    lower tail crossing it. At 2.58 sd the fence sits 3 x 2.58 = 7.7 sd below
    Q1, where no honest trial was seen in the tests' simulations; a smaller
    collapse is left to the item test, whose variance it raises.
    """
    if test is None:
        return spec.flakiness
    return max(spec.flakiness, ITEM_FENCE_Z * test.noise)


# One instability rule: its check, and the reason to quarantine ("" when the check held);
# None when the rule does not apply. `count` says how many trials scored, for the reason.
_Ruled = tuple[Check, str]


def _iqr_rule(
    spec: EvalSpec, stats: Stats, test: ItemTest | None, trials: Sequence[TrialRecord], count: str
) -> _Ruled:
    assert stats.iqr is not None and stats.median is not None
    stable = stats.iqr <= spec.flakiness + EPSILON
    check = Check(name="iqr", ok=stable, actual=fmt(stats.iqr), allowed=f"<= {fmt(spec.flakiness)}")
    reason = (
        ""
        if stable
        else f"iqr {fmt(stats.iqr)} > flakiness {fmt(spec.flakiness)} "
        f"(median {fmt(stats.median)}, {count})"
    )
    return check, reason


def _item_rule(
    spec: EvalSpec, stats: Stats, test: ItemTest | None, trials: Sequence[TrialRecord], count: str
) -> _Ruled:
    assert test is not None and stats.median is not None
    p_value = _p_text(test.result.p_value)
    stable = test.result.p_value >= ITEM_TEST_LEVEL
    check = Check(
        name="item variance",
        ok=stable,
        actual=f"p {p_value} ({test.name})",
        allowed=f">= {fmt(ITEM_TEST_LEVEL)}",
    )
    reason = (
        ""
        if stable
        else f"between-trial variance {test.dispersion:.1f}x {_noise_name(test)} (p = {p_value}, "
        f"{test.name}; median {fmt(stats.median)}, {fmt(test.items)} items, {count})"
    )
    return check, reason


def _collapse_rule(
    spec: EvalSpec, stats: Stats, test: ItemTest | None, trials: Sequence[TrialRecord], count: str
) -> _Ruled | None:
    if spec.outlier_fence <= 0:
        return None
    assert stats.iqr is not None and stats.q1 is not None and stats.min is not None
    assert stats.median is not None
    width = max(stats.iqr, _fence_width(spec, test))
    fence = stats.q1 - spec.outlier_fence * width
    held = stats.min >= fence - EPSILON
    check = Check(
        name="collapse fence", ok=held, actual=f"min {fmt(stats.min)}", allowed=f">= {fmt(fence)}"
    )
    if held:
        return check, ""
    low = min((t for t in trials if t.score is not None), key=lambda t: t.score or 0.0)
    noise = (
        f" ({ITEM_FENCE_Z:.2f} {_noise_name(test)} sd of {fmt(test.items)} items)"
        if test is not None and width > max(stats.iqr, spec.flakiness)
        else ""
    )
    return check, (
        f"trial {low.index} (seed {low.seed}) collapsed to {fmt(stats.min)}, below the fence "
        f"{fmt(fence)} = q1 {fmt(stats.q1)} - {fmt(spec.outlier_fence)} x {fmt(width)}{noise} "
        f"(median {fmt(stats.median)}, iqr {fmt(stats.iqr)}, {count})"
    )


def decide(spec: EvalSpec, trials: Sequence[TrialRecord]) -> Decision:
    """Apply the rule table to one probe."""
    stats, test = _measure(spec, trials)
    checks: list[Check] = []
    k = len(trials)
    errored = [trial for trial in trials if trial.error is not None]
    scored = k - len(errored)
    # Every reason past row 1 says how many trials it stands on.
    count = f"{scored} of {k} scored" if errored else f"k={k}"

    def verdict(status: Status, reason: str) -> Decision:
        # Trial errors and violation names are eval text and may span lines; a reason may not.
        return Decision(status=status, reason=one_line(reason), stats=stats, checks=tuple(checks))

    # 1. error: the probe could not measure enough.
    first = errored[0] if errored else None
    detail = f"; trial {first.index} (seed {first.seed}): {first.error}" if first else ""
    checks.append(
        Check(
            name="errors",
            ok=len(errored) <= spec.max_errors,
            actual=str(len(errored)),
            allowed=f"<= {spec.max_errors}",
        )
    )
    if len(errored) > spec.max_errors:
        return verdict(
            Status.ERROR,
            f"{len(errored)} of {k} trials errored (max_errors {spec.max_errors}){detail}",
        )
    # Recorded only when it could matter: with every trial scored it holds unless k is small.
    if errored or scored < spec.min_scored or stats.median is None:
        enough = scored >= spec.min_scored and stats.median is not None
        checks.append(
            Check(name="scored", ok=enough, actual=str(scored), allowed=f">= {spec.min_scored}")
        )
        if not enough:
            lost = f"{len(errored)} of {k} trials errored, leaving" if errored else "only"
            return verdict(
                Status.ERROR,
                f"{lost} {scored} scored, fewer than min_scored {spec.min_scored}{detail}",
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
                    name="violations",
                    ok=False,
                    actual=one_line(", ".join(trial.violations)),
                    allowed="none",
                )
            )
            return verdict(
                Status.FAIL,
                f"violation {', '.join(trial.violations)} in trial "
                f"{trial.index} (seed {trial.seed})" + (f" ({count})" if errored else ""),
            )
    checks.append(Check(name="violations", ok=True, actual="0", allowed="0"))

    assert stats.median is not None and stats.iqr is not None and stats.q1 is not None
    assert stats.min is not None
    spread = f"iqr {fmt(stats.iqr)}"

    # 3. instability, unless the eval is judged on its pass rate. An item eval's fence runs
    # first: a collapse its test would see as well is better told by the trial it names.
    if spec.min_pass_rate is None:
        rules = (_iqr_rule, _collapse_rule) if test is None else (_collapse_rule, _item_rule)
        for rule in rules:
            ruled = rule(spec, stats, test, trials, count)
            if ruled is None:
                continue
            check, unstable = ruled
            checks.append(check)
            if unstable:
                return verdict(Status.QUARANTINE, unstable)
        if test is not None:
            spread += f", item variance p = {_p_text(test.result.p_value)}"

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
            f"median {fmt(stats.median)} < threshold {fmt(spec.threshold)} ({spread}, {count})",
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
            passes = round(stats.pass_rate * scored)
            return verdict(
                Status.FAIL,
                f"pass rate {passes}/{scored}: wilson lower "
                f"bound {fmt(stats.wilson_low)} < min_pass_rate "
                f"{fmt(spec.min_pass_rate)} at {fmt(spec.confidence)} confidence"
                + (f" ({count})" if errored else ""),
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
            return verdict(
                Status.FAIL,
                f"{label} {fmt(actual)}{unit} > budget {fmt(limit)}{unit}"
                + (f" ({count})" if errored else ""),
            )

    return verdict(
        Status.PASS,
        f"median {fmt(stats.median)} >= threshold {fmt(spec.threshold)} ({spread}, {count})",
    )


def decide_case(spec: EvalSpec, trials: Sequence[TrialRecord]) -> Decision:
    """A test case of a JUnit suite, decided as a plain test: passed in every trial it ran
    in, PASS; failed in every one, FAIL; both, the classic flaky test, QUARANTINE."""
    stats = measure(spec, trials)
    errored = [trial for trial in trials if trial.error is not None]
    ran = [trial for trial in trials if trial.error is None and trial.score is not None]
    passes = sum(bool(trial.passed) for trial in ran)
    fails = len(ran) - passes
    present = f", in {len(trials)} of {spec.k} trials" if len(trials) < spec.k else ""
    check = Check(
        name="outcomes",
        ok=fails == 0,
        actual=f"{passes} passed, {fails} failed"
        + (f", {len(errored)} errored" if errored else ""),
        allowed="every run passed",
    )

    def verdict(status: Status, reason: str) -> Decision:
        return Decision(status=status, reason=one_line(reason), stats=stats, checks=(check,))

    if len(errored) > spec.max_errors or not ran:
        first = errored[0] if errored else None
        detail = f"; trial {first.index} (seed {first.seed}): {first.error}" if first else ""
        return verdict(
            Status.ERROR,
            f"the suite's run errored in {len(errored)} of {len(trials)} trials{detail}",
        )
    failed = next((trial for trial in ran if not trial.passed), None)
    why = ""
    if failed is not None:
        message = failed.fields.get("failure")
        why = f"; first failure, trial {failed.index} (seed {failed.seed}): {message}"
    if fails == 0:
        return verdict(Status.PASS, f"passed in {passes} of {len(ran)} runs{present}")
    if passes == 0:
        return verdict(Status.FAIL, f"failed in {fails} of {len(ran)} runs{present}{why}")
    return verdict(
        Status.QUARANTINE,
        f"passed {passes} and failed {fails} of {len(ran)} runs on the same code: "
        f"a flaky test{present}{why}",
    )
