"""The decision: a pure function from an eval's settings and trials to its status.

Rules, first match wins (contract §4): error, violation, instability
(quarantine), median below threshold, Wilson lower bound below
``min_pass_rate``, budget exceeded, pass. Every rule that ran is kept as a
check, passes too, so a report can show actual against allowed.

Instability is judged on what the trials report. Score-only evals: a test that
the trials' standard deviation exceeds the one an IQR of ``flakiness`` has under
normal noise (``firewall._stats.spread_test``), at a stated level per probe
(``SPREAD_LEVEL``, split over the looks of an adaptive probe), over the trials
inside the collapse fence. Evals whose every trial reports items whose mean is
its score: a test of the trials against the noise of their items, since an
accuracy over 50 items scatters by about 0.04 from that noise alone. Binary
items are tested against binomial noise (``firewall._stats.item_variance``),
continuous ones over the same ids by a two-way ANOVA of the trial effect
(``firewall._stats.trial_anova``). Both keep the collapse fence, the item
evals' widened for the same noise (and checked before the test, so that a
collapse is told by the trial it names). The fence stretches with the number of
trials (``fence_multiplier``) so that its false alarms per probe do not grow with K,
even under heavy tails.
"""

from __future__ import annotations

import enum
import functools
import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from firewall import judging
from firewall._stats import (
    ANOVA,
    CLUSTERED,
    EPSILON,
    GROUPED,
    IQR_PER_SD,
    ChiSquare,
    ItemTest,
    Stats,
    group_test,
    grouped,
    item_variance,
    sample_sd,
    spread_test,
    summarize,
    t_isf,
    t_sf,
    trial_anova,
    wilson_interval,
    wilson_looks_pass,
)
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec
from firewall.text import fmt, one_line

ITEM_TEST_LEVEL = 0.01
"""The trials of a binary-item eval are unstable when the p-value of their spread, under
binomial noise alone, is below this (contract §4: "at 1%")."""

ITEM_FENCE_Z = NormalDist().inv_cdf(1 - ITEM_TEST_LEVEL / 2)
"""How many binomial standard deviations of one trial's score an item eval's collapse fence
counts as F at least (2.576, the two-sided 1% normal quantile); see ``_fence_width``."""


SPREAD_LEVEL = 0.05
"""The spread test's level: an eval whose true IQR is exactly F (normal noise) is
quarantined by it in this share of probes, and less below F (1.6% at 0.9 F, k = 7).
Under adaptive K the level is split evenly over the looks a probe may take
(``spread_level``: Bonferroni), so that the whole probe, however often it is extended,
keeps it."""

FENCE_REFERENCE_K = 7
"""The number of trials at which the collapse fence is the contract's literal formula,
``q1 - outlier_fence x max(iqr, F)`` (the default k)."""

HEAVY_TAIL_DF = 3
"""The tails the fence is sized for: Student's t on 3 degrees of freedom. Its false
alarms per probe are held at their k = 7 rate for every K (``fence_multiplier``), so a
heavy-tailed honest eval is not quarantined more often for being probed longer; a
normal one, whose tails are thinner, less often."""

GUARD_FENCE = 3.0
"""The fence that keeps a collapse out of the spread test when the collapse rule is off
(``outlier_fence = 0``): a collapse then counts for neither rule."""


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


def _measure(
    spec: EvalSpec, trials: Sequence[TrialRecord]
) -> tuple[Stats, ItemTest | None, ChiSquare | None]:
    scored = [trial for trial in trials if trial.error is None and trial.score is not None]

    def metric(name: str) -> list[float]:
        return [trial.metrics[name] for trial in scored if name in trial.metrics]

    scores = [trial.score for trial in scored if trial.score is not None]
    stats = summarize(
        scores,
        [bool(trial.passed) for trial in scored],
        errors=len(trials) - len(scored),
        confidence=spec.confidence,
        latencies_ms=metric("latency_ms"),
        tokens=metric("tokens"),
        costs_usd=metric("cost_usd"),
    )
    if spec.min_pass_rate is not None:  # exempt from every instability rule: no test to report
        return stats, None, None
    test = item_test(scored)
    if test is not None:
        stats.item_test, stats.item_p = test.name, test.result.p_value
        stats.dispersion, stats.items_per_trial = test.dispersion, test.items
        stats.groups_per_trial = test.groups or None
        return stats, test, None
    low, high = guard(spec, stats, len(scores))
    inside = [score for score in scores if low - EPSILON <= score <= high + EPSILON]
    spread = spread_test(inside, spec.flakiness)
    stats.sd, stats.spread_p = sample_sd(inside), spread.p_value if spread.df else None
    return stats, None, spread


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
    groups = grouped(items) if len(items) >= 2 else None
    if groups is not None:
        return group_test(groups, binary=binary)
    if binary:
        return item_variance(items)
    if any(trial.keys() != items[0].keys() for trial in items) or len(items) < 2:
        return None
    return trial_anova(items)


def _noise_name(test: ItemTest) -> str:
    if test.name in (GROUPED, CLUSTERED):
        return "the groups' noise"
    return "the items' noise" if test.name == ANOVA else "binomial"


def _p_text(p: float, level: float = ITEM_TEST_LEVEL) -> str:
    """Two significant digits (0.42, 0.0031, 2.3e-05), and never rounded up to the level."""
    text = f"{p:.2g}"
    return f"{p:.3g}" if p < level <= float(text) else text


def _fence_width(flakiness: float, test: ItemTest | None) -> float:
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
        return flakiness
    return max(flakiness, ITEM_FENCE_Z * test.noise)


def extension_step(spec: EvalSpec) -> int:
    """How many trials an adaptive extension adds at a time (``firewall.adaptive``)."""
    return max(2, math.ceil(spec.k / 3))


def looks(spec: EvalSpec) -> int:
    """How many times a probe of the eval may be judged: once at k for a fixed probe;
    at k and after each extension up to max_k for an adaptive one."""
    fixed = not spec.adaptive or spec.result == "junit" or spec.suite is not None
    if fixed or spec.max_k <= spec.k:
        return 1
    return 1 + math.ceil((spec.max_k - spec.k) / extension_step(spec))


def spread_level(spec: EvalSpec) -> float:
    """The level of the spread test at each look: ``SPREAD_LEVEL`` over the looks."""
    return SPREAD_LEVEL / looks(spec)


@functools.lru_cache(maxsize=4096)
def fence_multiplier(outlier_fence: float, scored: int) -> float:
    """How many widths below Q1 the collapse fence sits for a probe of ``scored`` trials.

    ``outlier_fence`` at k = 7 (the contract's formula); elsewhere the multiplier at
    which a Student's t (3 df) eval of the same IQR has as often a trial below the fence
    in one probe as at k = 7. At the default 3.0 that per-probe chance is 4.4% for a t
    eval whose IQR is the width (far less when F sets the width, and for normal noise
    1 in 120,000), and the multiplier is 2.1 at k = 3, 4.1 at k = 15, 5.3 at 30. A fixed
    multiplier lets the chance grow with K, since each trial is one more draw from the
    tail (Student's t, sd 0.02 with F = 0.03: 1.0% of probes at k = 7, 2.2% at 15, 5.1%
    at 30; stretched, 0.9%, 1.0%, 1.0%: ``benchmarks/decisions.py --only spread``).
    """
    if outlier_fence <= 0 or scored == FENCE_REFERENCE_K:
        return outlier_fence
    iqr_t = 2 * t_isf(0.25, HEAVY_TAIL_DF)  # the t distribution's IQR, in its own scale
    tail = t_sf((0.5 + outlier_fence) * iqr_t, HEAVY_TAIL_DF)  # one trial below, at k = 7
    per_trial = -math.expm1(FENCE_REFERENCE_K / scored * math.log1p(-tail))
    return t_isf(per_trial, HEAVY_TAIL_DF) / iqr_t - 0.5


@dataclass(frozen=True)
class Fence:
    """The collapse fence of a probe: ``at = q1 - multiplier x width``."""

    at: float
    multiplier: float
    width: float


def fence_of(spec: EvalSpec, stats: Stats, test: ItemTest | None, scored: int) -> Fence | None:
    """The probe's collapse fence; None when the rule is off (``outlier_fence = 0``)."""
    if stats.q1 is None or stats.iqr is None:
        return None
    return fence_at(stats.q1, stats.iqr, spec.flakiness, spec.outlier_fence, scored, test)


def guard(spec: EvalSpec, stats: Stats, scored: int) -> tuple[float, float]:
    """The trials the spread test counts: from the collapse fence (below it, a collapse,
    the fence's business) to as far above Q3 (a trial that far above the rest is no
    scatter of the kind F bounds, as it never was for the IQR: one pass among failures
    leaves a plain test broken, not flaky). With the collapse rule off, at
    ``GUARD_FENCE``: a collapse then counts for neither rule."""
    fence = spec.outlier_fence if spec.outlier_fence > 0 else GUARD_FENCE
    if stats.q1 is None or stats.q3 is None or stats.iqr is None:
        return -math.inf, math.inf
    multiplier = fence_multiplier(fence, scored)
    width = max(stats.iqr, spec.flakiness)
    return stats.q1 - multiplier * width, stats.q3 + multiplier * width


def fence_at(
    q1: float,
    iqr: float,
    flakiness: float,
    outlier_fence: float,
    scored: int,
    test: ItemTest | None,
) -> Fence | None:
    """``q1 - multiplier x max(iqr, width)``: the width at least F (for an item eval at
    least its noise, ``_fence_width``), the multiplier ``outlier_fence``, stretched with
    the count for a score-only eval (``fence_multiplier``); an item eval's noise is
    the binomial's or the ANOVA's, whose thin tails its width is already sized for.
    None when the rule is off."""
    if outlier_fence <= 0:
        return None
    multiplier = outlier_fence if test is not None else fence_multiplier(outlier_fence, scored)
    width = max(iqr, _fence_width(flakiness, test))
    return Fence(q1 - multiplier * width, multiplier, width)


# One instability rule: its check, and the reason to quarantine ("" when the check held);
# None when the rule does not apply.
_Ruled = tuple[Check, str]


def _spread_rule(probe: Probe) -> _Ruled | None:
    """A score-only eval: quarantined when its trials' sd (inside the collapse fence) is
    significantly above the sd an IQR of F has under normal noise (``spread_test``)."""
    spec, stats, spread = probe.spec, probe.stats, probe.spread_result
    if spread is None or not spread.df:
        return None
    assert stats.median is not None and stats.iqr is not None and stats.sd is not None
    level = spread_level(spec)
    p_value = _p_text(spread.p_value, level)
    stable = spread.p_value >= level
    check = Check(
        name="spread",
        ok=stable,
        actual=f"sd {fmt(stats.sd)}, p {p_value}",
        allowed=f">= {level:.3g}",
    )
    if stable:
        return check, ""
    inside = spread.df + 1
    kept = f", {inside} trials inside the fence" if inside < probe.scored else ""
    return check, (
        f"spread beyond flakiness {fmt(spec.flakiness)}: sd {fmt(stats.sd)} against "
        f"{fmt(spec.flakiness / IQR_PER_SD)} (an iqr of {fmt(spec.flakiness)} in normal noise), "
        f"p = {p_value} < {level:.3g} (median {fmt(stats.median)}, iqr {fmt(stats.iqr)}"
        f"{kept}, {probe.count})"
    )


def _item_rule(probe: Probe) -> _Ruled | None:
    test, stats = probe.test, probe.stats
    if test is None:
        return None
    assert stats.median is not None
    p_value = _p_text(test.result.p_value)
    stable = test.result.p_value >= ITEM_TEST_LEVEL
    check = Check(
        name="item variance",
        ok=stable,
        actual=f"p {p_value} ({test.name})",
        allowed=f">= {fmt(ITEM_TEST_LEVEL)}",
    )
    if stable:
        return check, ""
    groups = f" in {fmt(test.groups)} groups" if test.groups else ""
    reason = (
        f"between-trial variance {test.dispersion:.1f}x {_noise_name(test)} (p = {p_value}, "
        f"{test.name}; median {fmt(stats.median)}, {fmt(test.items)} items{groups}, "
        f"{probe.count}){_looks_grouped(probe)}"
    )
    return check, reason


def _looks_grouped(probe: Probe) -> str:
    """A note for an item test that quarantined items named without groups, when their ids
    look grouped all the same (``doc3-q1``, ``doc3-q2``, ...): items that share a document
    or a conversation are not independent, and the test of independent items calls their
    shared noise instability."""
    if probe.test is None or probe.test.groups:
        return ""
    ids = [item for trial in probe.trials for item in trial.items]
    found = apparent_groups(ids)
    if found is None:
        return ""
    name, size = found
    return (
        f"; the item ids look grouped ({name!r} and others hold {size} each): if items in a "
        f"group share their noise, name them {name}/<item> to test by group"
    )


_SEPARATORS = re.compile(r"[-_.:#]")


def apparent_groups(ids: Sequence[str]) -> tuple[str, int] | None:
    """A prefix the item ids share in groups of two or more, cut at their last separator
    (``doc3-q1`` -> ``doc3``), when it splits them into two groups or more and most ids
    are in a group of two or more: the first such prefix and its typical group size."""
    unique = list(dict.fromkeys(ids))
    prefixes: dict[str, int] = {}
    for item in unique:
        cuts = [m.start() for m in _SEPARATORS.finditer(item)]
        if not cuts or cuts[-1] == 0:
            return None
        prefixes[item[: cuts[-1]]] = prefixes.get(item[: cuts[-1]], 0) + 1
    grouped_ids = sum(n for n in prefixes.values() if n >= 2)
    if len(prefixes) < 2 or grouped_ids < 0.8 * len(unique) or len(prefixes) == len(unique):
        return None
    size = round(statistics.median(prefixes.values()))
    return (next(iter(prefixes)), size) if size >= 2 else None


def _collapse_rule(probe: Probe) -> _Ruled | None:
    spec, stats, test, fence = probe.spec, probe.stats, probe.test, probe.fence
    if fence is None:
        return None
    assert stats.iqr is not None and stats.q1 is not None and stats.min is not None
    assert stats.median is not None
    held = stats.min >= fence.at - EPSILON
    check = Check(
        name="collapse fence",
        ok=held,
        actual=f"min {fmt(stats.min)}",
        allowed=f">= {fmt(fence.at)}",
    )
    if held:
        return check, ""
    low = min((t for t in probe.trials if t.score is not None), key=lambda t: t.score or 0.0)
    noise = (
        f" ({ITEM_FENCE_Z:.2f} {_noise_name(test)} sd of {fmt(test.items)} items)"
        if test is not None and fence.width > max(stats.iqr, spec.flakiness)
        else ""
    )
    stretched = (
        f" (outlier_fence {fmt(spec.outlier_fence)} at k={FENCE_REFERENCE_K}, stretched for "
        f"{probe.scored} trials)"
        if fence.multiplier != spec.outlier_fence
        else ""
    )
    return check, (
        f"trial {low.index} (seed {low.seed}) collapsed to {fmt(stats.min)}, below the fence "
        f"{fmt(fence.at)} = q1 {fmt(stats.q1)} - {fmt(fence.multiplier)} x {fmt(fence.width)}"
        f"{noise}{stretched} (median {fmt(stats.median)}, iqr {fmt(stats.iqr)}, {probe.count})"
    )


def _judge_rule(probe: Probe) -> _Ruled | None:
    """An eval with a judge whose outputs were judged more than once: the judge alone
    must not scatter beyond F (``firewall.judging``)."""
    spec = probe.spec
    found = judging.split(probe.trials) if spec.judge is not None else None
    if found is None:
        return None
    scatters = judging.judge_scatters(spec.flakiness, found)
    check = Check(
        name="judge",
        ok=not scatters,
        actual=f"iqr {fmt(found.judge_iqr)} ({found.share('judge'):.0%} of the variance)",
        allowed=f"<= {fmt(spec.flakiness)}",
    )
    return check, judging.judge_reason(spec.flakiness, found, probe.count) if scatters else ""


@dataclass(frozen=True)
class Probe:
    """What every rule reads: the eval's settings, its trials and their statistics."""

    spec: EvalSpec
    trials: Sequence[TrialRecord]
    stats: Stats
    test: ItemTest | None  # the item test, for an eval whose trials report items
    spread_result: ChiSquare | None  # the spread test, for a score-only eval
    # Worked out once by ``_decide``, as the probe is made: a cached_property takes a lock
    # at its first read on Python 3.11, which cost more than the list.
    errored: list[TrialRecord]

    @property
    def fence(self) -> Fence | None:  # read by the collapse rule alone, once
        return fence_of(self.spec, self.stats, self.test, self.scored)

    @property
    def scored(self) -> int:
        return len(self.trials) - len(self.errored)

    @property
    def count(self) -> str:
        """How many trials a reason stands on (every reason past row 1 says it)."""
        k = len(self.trials)
        return f"{self.scored} of {k} scored" if self.errored else f"k={k}"

    @property
    def count_if_errored(self) -> str:
        """The count, where a reason gives it only when some trials errored."""
        return f" ({self.count})" if self.errored else ""

    @property
    def first_error(self) -> str:
        first = self.errored[0] if self.errored else None
        return f"; trial {first.index} (seed {first.seed}): {first.error}" if first else ""

    @property
    def spread(self) -> str:
        assert self.stats.iqr is not None
        spread = f"iqr {fmt(self.stats.iqr)}"
        if self.test is not None:
            spread += f", item variance p = {_p_text(self.test.result.p_value)}"
        return spread


class Ruling(NamedTuple):
    """What one rule found: the checks it ran, and the status and reason if it decides.
    A named tuple: eight are made per decision, and a frozen dataclass costs three times
    as much to make."""

    checks: tuple[Check, ...] = ()
    status: Status | None = None  # None: the rule held, and the walk goes on
    reason: str = ""


Rule = Callable[[Probe], Ruling]


def _too_many_errors(probe: Probe) -> Ruling:
    """Row 1, error: more trials errored than ``max_errors`` allows."""
    spec, errored = probe.spec, len(probe.errored)
    check = Check(
        name="errors",
        ok=errored <= spec.max_errors,
        actual=str(errored),
        allowed=f"<= {spec.max_errors}",
    )
    if check.ok:
        return Ruling((check,))
    return Ruling(
        (check,),
        Status.ERROR,
        f"{errored} of {len(probe.trials)} trials errored "
        f"(max_errors {spec.max_errors}){probe.first_error}",
    )


def _too_few_scored(probe: Probe) -> Ruling:
    """Row 1, error: fewer trials scored than ``min_scored``.

    Recorded only when it could matter: with every trial scored it holds unless k is small.
    """
    spec, stats, scored = probe.spec, probe.stats, probe.scored
    if not probe.errored and scored >= spec.min_scored and stats.median is not None:
        return Ruling()
    enough = scored >= spec.min_scored and stats.median is not None
    check = Check(name="scored", ok=enough, actual=str(scored), allowed=f">= {spec.min_scored}")
    if enough:
        return Ruling((check,))
    lost = (
        f"{len(probe.errored)} of {len(probe.trials)} trials errored, leaving"
        if probe.errored
        else "only"
    )
    return Ruling(
        (check,),
        Status.ERROR,
        f"{lost} {scored} scored, fewer than min_scored {spec.min_scored}{probe.first_error}",
    )


def _budget_unmeasured(probe: Probe) -> Ruling:
    """Row 1, error: a budget is set, but no trial reported the metric it bounds."""
    for budget, (metric, _, _) in _BUDGET_METRICS.items():
        if getattr(probe.spec.budgets, budget) is not None and getattr(probe.stats, budget) is None:
            return Ruling(
                (), Status.ERROR, f"budget {budget} is set but no trial reported metrics.{metric}"
            )
    return Ruling()


def _violation(probe: Probe) -> Ruling:
    """Row 2, fail: a broken hard invariant is never averaged away."""
    for trial in probe.trials:
        if trial.violations:
            names = ", ".join(trial.violations)
            check = Check(name="violations", ok=False, actual=one_line(names), allowed="none")
            return Ruling(
                (check,),
                Status.FAIL,
                f"violation {names} in trial {trial.index} (seed {trial.seed})"
                + probe.count_if_errored,
            )
    return Ruling((Check(name="violations", ok=True, actual="0", allowed="0"),))


def _instability(probe: Probe) -> Ruling:
    """Row 3, quarantine: the trials scatter, unless the eval is judged on its pass rate.

    An item eval's fence runs first: a collapse its test would see as well is better
    told by the trial it names.
    """
    if probe.spec.min_pass_rate is not None:
        return Ruling()
    spec, trials = probe.spec, probe.trials
    rules: tuple[Callable[[Probe], _Ruled | None], ...] = (
        (_spread_rule, _collapse_rule) if probe.test is None else (_collapse_rule, _item_rule)
    )
    # An eval with a judge: the judge's rule first when the judge is the larger source.
    rules = (_judge_rule, *rules) if judging.judge_leads(spec, trials) else (*rules, _judge_rule)
    checks: list[Check] = []
    for rule in rules:
        ruled = rule(probe)
        if ruled is None:
            continue
        check, unstable = ruled
        checks.append(check)
        if unstable:
            reason = judging.attributed(unstable, spec, trials)
            return Ruling(tuple(checks), Status.QUARANTINE, reason)
    return Ruling(tuple(checks))


def _below_threshold(probe: Probe) -> Ruling:
    """Row 4, fail: stable, and the median below the bar: a regression."""
    spec, median = probe.spec, probe.stats.median
    assert median is not None
    reached = median >= spec.threshold - EPSILON
    check = Check(
        name="median", ok=reached, actual=fmt(median), allowed=f">= {fmt(spec.threshold)}"
    )
    if reached:
        return Ruling((check,))
    return Ruling(
        (check,),
        Status.FAIL,
        f"median {fmt(median)} < threshold {fmt(spec.threshold)} ({probe.spread}, {probe.count})",
    )


def _pass_rate_bound(probe: Probe) -> Ruling:
    """Row 5, fail: the Wilson lower bound of the pass rate below ``min_pass_rate``, at the
    eval's confidence, or under adaptive K at the confidence its looks leave each one
    (``gate_confidence``)."""
    spec, stats = probe.spec, probe.stats
    if spec.min_pass_rate is None:
        return Ruling()
    assert stats.wilson_low is not None and stats.pass_rate is not None
    passes = round(stats.pass_rate * probe.scored)
    confidence = gate_confidence(spec)
    low = stats.wilson_low
    if confidence != spec.confidence:
        low = wilson_interval(passes, probe.scored, confidence)[0]
    held = low >= spec.min_pass_rate - EPSILON
    check = Check(
        name="wilson lower bound",
        ok=held,
        actual=fmt(low),
        allowed=f">= {fmt(spec.min_pass_rate)}",
    )
    if held:
        return Ruling((check,))
    return Ruling(
        (check,),
        Status.FAIL,
        f"pass rate {passes}/{probe.scored}: wilson lower "
        f"bound {fmt(low)} < min_pass_rate "
        f"{fmt(spec.min_pass_rate)} at {confidence_text(spec)}" + probe.count_if_errored,
    )


def gate_confidence(spec: EvalSpec) -> float:
    """The confidence of the pass-rate gate's Wilson bound at each look: the eval's, or
    under adaptive K the least strict one at which an eval whose true rate is exactly
    ``min_pass_rate`` passes at most (1 - confidence) / 2 of its probes over all the looks
    it may take, found exactly (``_spent_confidence``): extending a probe whose rate clears
    the bar while its bound does not must not pass such an eval more often than one look
    would."""
    n = looks(spec)
    if n == 1 or spec.min_pass_rate is None:
        return spec.confidence
    return _spent_confidence(
        spec.k, spec.max_k, extension_step(spec), spec.min_pass_rate, spec.confidence, n
    )


@functools.lru_cache(maxsize=1024)
def _spent_confidence(
    k: int, max_k: int, step: int, bar: float, confidence: float, n: int
) -> float:
    """The one-sided error (1 - confidence) / 2 spent over the looks: the largest per-look
    error, between the Bonferroni share (error / looks, always within it) and the whole,
    whose looks together pass an eval at the bar at most the whole error's share of the
    time (``wilson_looks_pass`` at rate = bar, where the chance of a false pass is
    greatest), by bisection."""
    error = (1 - confidence) / 2

    def passes(share: float) -> float:
        # Never below the eval's own confidence: 1 - 2 * error rounds a tiny one to 0.
        return wilson_looks_pass(k, max_k, step, bar, max(1 - 2 * share, confidence), bar)

    low, high = error / n, error
    if passes(high) <= error:
        return confidence
    for _ in range(40):
        middle = (low + high) / 2
        if passes(middle) <= error:
            low = middle
        else:
            high = middle
    return max(1 - 2 * low, confidence)


def confidence_text(spec: EvalSpec) -> str:
    """``0.95 confidence``, or ``0.9711 confidence (0.95 spent over 4 looks)`` under
    adaptive K."""
    n = looks(spec)
    if n == 1:
        return f"{fmt(spec.confidence)} confidence"
    return f"{gate_confidence(spec):.4g} confidence ({fmt(spec.confidence)} spent over {n} looks)"


def _over_budget(probe: Probe) -> Ruling:
    """Row 6, fail: a budget exceeded (p95 latency, mean tokens, mean cost)."""
    checks: list[Check] = []
    for budget, (_, label, unit) in _BUDGET_METRICS.items():
        limit = getattr(probe.spec.budgets, budget)
        if limit is None:
            continue
        actual = getattr(probe.stats, budget)
        held = actual <= limit + EPSILON
        checks.append(
            Check(
                name=label, ok=held, actual=f"{fmt(actual)}{unit}", allowed=f"<= {fmt(limit)}{unit}"
            )
        )
        if not held:
            return Ruling(
                tuple(checks),
                Status.FAIL,
                f"{label} {fmt(actual)}{unit} > budget {fmt(limit)}{unit}" + probe.count_if_errored,
            )
    return Ruling(tuple(checks))


RULES: tuple[Rule, ...] = (
    _too_many_errors,  # 1. error
    _too_few_scored,  # 1. error
    _budget_unmeasured,  # 1. error
    _violation,  # 2. fail
    _instability,  # 3. quarantine
    _below_threshold,  # 4. fail
    _pass_rate_bound,  # 5. fail
    _over_budget,  # 6. fail
)
"""The rule table, walked in order: the first rule that decides wins, and every check
that ran is kept. A new rule is one function here."""


def decide(spec: EvalSpec, trials: Sequence[TrialRecord]) -> Decision:
    """Apply the rule table to one probe; a plain test's decision is told as one (``as_plain``)."""
    decision = _decide(spec, trials)
    return as_plain(spec, trials, decision) if is_plain_test(spec) else decision


def _decide(spec: EvalSpec, trials: Sequence[TrialRecord]) -> Decision:
    stats, test, spread = _measure(spec, trials)
    errored = [trial for trial in trials if trial.error is not None]
    probe = Probe(spec, trials, stats, test, spread, errored)
    checks: list[Check] = []
    for rule in RULES:
        ruling = rule(probe)
        checks.extend(ruling.checks)
        if ruling.status is not None:
            return _decision(probe, ruling.status, ruling.reason, checks)
    assert stats.median is not None  # row 1 errs a probe without one
    reason = (
        f"median {fmt(stats.median)} >= threshold {fmt(spec.threshold)} "
        f"({probe.spread}, {probe.count})"
    )
    return _decision(probe, Status.PASS, reason, checks)


def _decision(probe: Probe, status: Status, reason: str, checks: list[Check]) -> Decision:
    # Trial errors and violation names are eval text and may span lines; a reason may not.
    return Decision(status=status, reason=one_line(reason), stats=probe.stats, checks=tuple(checks))


# --- plain tests -------------------------------------------------------------------------
# A plain test passes or fails in each run: a JUnit suite's case, a command whose exit status
# is its verdict (`result = "exit-code"`), a test the pytest plugin probed (an exit-code eval
# too). Whichever door it came in by, its decision reads the same: how many runs passed and
# failed, what that makes it, and the first failure's own message; and its checklist counts
# runs, with no fence arithmetic, which a score of 0 or 1 has nothing to show with.

FAILURE_CHARS = 300
"""How much of a failed run's message a reason quotes: the end, where a command's output
says what went wrong."""

_FENCE_CHECKS = frozenset(("violations", "spread", "collapse fence", "median"))


def is_plain_test(spec: EvalSpec) -> bool:
    """Whether each trial of the eval is a pass or a fail: a suite's case, an exit-code command."""
    return spec.suite is not None or spec.result == "exit-code"


def decide_case(spec: EvalSpec, trials: Sequence[TrialRecord]) -> Decision:
    """A test case of a JUnit suite, decided as a plain test, by the rule table as every
    plain test is (contract §3): passed in every run, PASS; failed in every one, or in so
    many that its median is a failure, FAIL; passed and failed on the same code otherwise,
    the classic flaky test, QUARANTINE. A suite's run that wrote no report errs the case."""
    stats = measure(spec, trials)
    errored = [trial for trial in trials if trial.error is not None]
    ran = _ran(trials)
    errors = Check(
        name="errors",
        ok=len(errored) <= spec.max_errors,
        actual=str(len(errored)),
        allowed=f"<= {spec.max_errors}",
    )
    if len(errored) > spec.max_errors or not ran:
        first = errored[0] if errored else None
        detail = f"; trial {first.index} (seed {first.seed}): {first.error}" if first else ""
        return Decision(
            status=Status.ERROR,
            reason=one_line(
                f"the suite's run errored in {len(errored)} of {len(trials)} trials{detail}"
            ),
            stats=stats,
            checks=(errors,),
        )
    # One test, one rule, whichever door: a case is decided by the rule table as an
    # exit-code command or the plugin's test is, on the runs it was in.
    return decide(spec.model_copy(update={"min_scored": min(spec.min_scored, len(ran))}), trials)


def as_plain(spec: EvalSpec, trials: Sequence[TrialRecord], decision: Decision) -> Decision:
    """A plain test's decision by the rule table, told as a plain test's: the same status,
    its runs for a reason, its checklist without the fence. An error keeps its own words."""
    failed = {check.name for check in decision.checks if not check.ok}
    if decision.status is Status.ERROR or "violations" in failed:
        return decision  # no plain test reports a violation; were one to, its words stand
    kept = [check for check in decision.checks if check.name not in _FENCE_CHECKS]
    return _plain(spec, trials, decision.status, decision.stats, kept, failed=failed)


def failure_message(trial: TrialRecord) -> str | None:
    """What a plain test's failed run said: a JUnit case's failure message, else the end
    of what the command printed (through the pytest plugin, pytest's assertion line).

    Whole lines from the end, up to FAILURE_CHARS, without the rules test runners draw
    (``==== 1 failed in 0.2s ====``, ``--- stderr ---``): the last lines say what failed.
    """
    text = trial.fields.get("failure")
    if not isinstance(text, str) or not text.strip():
        text = trial.output or ""
    lines = [" ".join(line.split()) for line in text.splitlines() if not _RULE.match(line)]
    lines = [line for line in lines if line]
    kept: list[str] = []
    for line in reversed(lines):
        if kept and sum(len(k) + 3 for k in kept) + len(line) > FAILURE_CHARS:
            break
        kept.append(line if len(line) <= FAILURE_CHARS else "…" + line[-FAILURE_CHARS:])
    if not kept:
        return None
    return " | ".join(["…"] * (len(kept) < len(lines)) + kept[::-1])


_RULE = re.compile(r"\s*[-=_*#~]{3,}(?:.*[-=_*#~]{3,})?\s*$")


def _ran(trials: Sequence[TrialRecord]) -> list[TrialRecord]:
    return [trial for trial in trials if trial.error is None and trial.score is not None]


def _plain(
    spec: EvalSpec,
    trials: Sequence[TrialRecord],
    status: Status,
    stats: Stats,
    checks: list[Check],
    *,
    failed: set[str],
) -> Decision:
    """ "passed N and failed M of K runs on the same code: a flaky test; first failure, trial
    I (seed S): <message>", and the checklist line ``FAIL flaky: passed N, failed M of K``.

    ``checks`` are the rule table's that stay (errors, a pass rate's lower bound); ``failed``
    names the rule table's checks that failed. The runs' own line fails where the runs
    decided: flaky, or failing every run (a JUnit case) or most (the median's rule)."""
    ran = _ran(trials)
    passes = sum(bool(trial.passed) for trial in ran)
    fails = len(ran) - passes
    gated = "wilson lower bound" in failed
    broken = status is Status.FAIL and not gated and passes > 0  # the median's rule, mixed runs
    decided = status is Status.QUARANTINE or (status is Status.FAIL and not gated)
    counted = [f"{word} {n}" for word, n in (("passed", passes), ("failed", fails)) if n]
    runs = Check(
        name="flaky" if status is Status.QUARANTINE else "runs",
        ok=not decided,
        actual=f"{', '.join(counted) or 'passed 0'} of {len(ran)}",
        allowed="",
    )
    at = next((i for i, check in enumerate(checks) if check.name not in ("errors", "scored")), None)
    checks.insert(len(checks) if at is None else at, runs)
    reason = _plain_head(spec, trials, ran, passes)
    reason += _plain_clause(spec, status, checks, broken=broken, fails=fails)
    failure = next((trial for trial in ran if not trial.passed), None)
    if failure is not None:
        message = failure_message(failure)
        reason += f"; first failure, trial {failure.index} (seed {failure.seed})"
        reason += f": {message}" if message else ""
    return Decision(status=status, reason=one_line(reason), stats=stats, checks=tuple(checks))


def _plain_head(
    spec: EvalSpec, trials: Sequence[TrialRecord], ran: Sequence[TrialRecord], passes: int
) -> str:
    """How the runs went: "passed N and failed M of K runs on the same code", and how many
    trials a case was missing from or errored in."""
    fails, errored = len(ran) - passes, len(trials) - len(ran)
    if not fails:
        head = f"passed in {passes} of {len(ran)} runs"
    elif not passes:
        head = f"failed in {fails} of {len(ran)} runs"
    else:
        head = f"passed {passes} and failed {fails} of {len(ran)} runs on the same code"
    if spec.suite is not None and len(trials) < spec.k:  # a case missing from some runs
        head += f", in {len(trials)} of {spec.k} trials"
    if errored:
        head += f" ({errored} of {len(trials)} trials errored)"
    return head


def _plain_clause(
    spec: EvalSpec, status: Status, checks: Sequence[Check], *, broken: bool, fails: int
) -> str:
    """What the runs make the test, where the count alone does not say."""
    if status is Status.QUARANTINE:
        return ": a flaky test"
    if broken:
        return ": most runs failed, a broken test more than a flaky one"
    gate = next((check for check in checks if check.name == "wilson lower bound"), None)
    if gate is not None:
        assert spec.min_pass_rate is not None
        held = ">=" if gate.ok else "<"
        return f": wilson lower bound {gate.actual} {held} min_pass_rate {fmt(spec.min_pass_rate)}"
    if status is Status.PASS and fails:
        return f": outlier_fence {fmt(spec.outlier_fence)} counts no failure among passes as flaky"
    return ""
