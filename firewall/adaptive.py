"""Adaptive K: stop a probe once its decision is settled, add trials where it is close.

Contract §4. Two pure functions of an eval's settings and the trials it has so
far. ``wanted`` says how many trials the probe should have in all (the runner
keeps handing out trials until it has them), and ``conclude`` decides a probe
that ended, with how many trials the decision took and why it stopped.

**Curtailment** is exact: short of ``k``, a probe stops only when no scores the
remaining trials could report would change the decision. That is so

- when more trials errored than ``max_errors`` allows, or too few can still
  score to reach ``min_scored`` (ERROR);
- when a trial broke a hard invariant (FAIL: a violation is never averaged away);
- when even the tightest completion keeps the spread test significant (QUARANTINE):
  ``r`` more scores cannot lower the sum of squared deviations of the trials already
  in (they add to it, least when each falls on the mean), and fewer degrees of freedom
  only lower the bar, so the trials surely inside any completion's fence, tested on
  k - 1 degrees of freedom, bound every completion (``_spread_settled``);
- when a pass-rate gate's Wilson lower bound stays below the bar even if every
  remaining trial passes (FAIL), or above it even if every one fails (PASS).

It does not wait for what only a trial that runs can show: one of the trials not
run might have errored or broken an invariant, and no probe could ever stop
early if that counted. An item eval's test over unseen items has no closed form,
so item evals stop early only for errors and violations.

**Extension**: a probe that ends close to a line gets ``ceil(k / 3)`` more
trials (at least 2) at a time, up to ``max_k``, and is judged again only once
they are all in (a look per block). Close means a stable spread test with p
below ``NEAR_SPREAD_P`` (a quarantine is not extended: its test is significant at
a level already split over every look the probe may take,
``firewall.policy.spread_level``); an item test between p = 0.001 and 0.05; a pass-rate whose point
estimate clears ``min_pass_rate`` while its lower bound does not; or a median
within two standard errors of T. ``benchmarks/decisions.py`` measures what these
lines do. With ``adaptive = false`` a probe runs ``k`` trials and is decided by
the fixed rule, exactly.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from firewall._stats import (
    EPSILON,
    IQR_PER_SD,
    Stats,
    quartiles,
    sorted_iqr,
    sorted_median,
    spread_from_squares,
    wilson_interval,
    wilson_looks_pass,
)
from firewall.policy import (
    GUARD_FENCE,
    Check,
    Decision,
    Status,
    as_plain,
    decide,
    decide_case,
    extension_step,
    fence_multiplier,
    gate_confidence,
    is_plain_test,
    item_test,
    looks,
    measure,
    spread_level,
)
from firewall.runner.schedule import Seen
from firewall.runner.trial import TrialRecord
from firewall.spec import MAX_POWER_K, RELIABLE, EvalSpec
from firewall.spec import power_notes as spec_power_notes
from firewall.text import fmt, one_line

NEAR_SPREAD_P = 0.3
"""A stable spread test with p below this is close to its line (an eval at 0.9 F, k = 7,
is extended in about 1 probe in 5; at 0.45 F almost never)."""
NEAR_ITEM_P = (0.001, 0.05)
"""An item test's p-value in this range is close to its 1% level."""
NEAR_MEDIAN_SE = 2.0
"""A median within this many standard errors of the threshold is close to it."""
_MEDIAN_SE = math.sqrt(math.pi / 2)  # the median's standard error, in sd / sqrt(n) (normal)

StopReason = Literal["fixed", "settled", "planned", "extended", "max_k", "interrupted"]


class Stop(BaseModel):
    """How many trials a decision took, and why the probe stopped there.

    ``why``: ``fixed`` (adaptive K is off: k trials), ``settled`` (stopped short
    of k: no scores of the rest could change the decision), ``planned`` (k
    trials, not close to a line), ``extended`` (more than k, until the decision
    was clear), ``max_k`` (still close to a line at max_k), ``interrupted`` (cut
    short while it was close to a line).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    trials: int
    planned: int
    why: StopReason
    near: str = ""  # what the decision was close to, for extended, max_k and interrupted


def step(spec: EvalSpec) -> int:
    """How many trials an extension adds at a time."""
    return extension_step(spec)


def wanted(spec: EvalSpec, trials: Sequence[TrialRecord]) -> int:
    """How many trials the probe should have in all, given the ones it has."""
    n = len(trials)
    if not spec.adaptive or spec.result == "junit":  # a suite's run serves every case: k
        return spec.k
    if n < spec.k:
        return n if settle(spec, trials) is not None else spec.k
    if n >= spec.max_k:
        return n
    if close(spec, _decided(spec, trials), _scored(trials)) is None:
        return n
    return min(n + step(spec), spec.max_k)


def may_settle(spec: EvalSpec, seen: Seen) -> bool:
    """Whether ``settle`` could find a probe settled, from what its trials showed so far:
    False unless an error, a violation, a pass-rate gate or scores further apart than F
    (each the first test of one of its ways to settle), so that the trials of a stable
    eval are not re-judged one by one."""
    return (
        seen.errored > spec.max_errors
        or spec.k - seen.errored < spec.min_scored
        or seen.violated
        or spec.min_pass_rate is not None
        or seen.high - seen.low > spec.flakiness + EPSILON
    )


# The decision ``wanted`` took on a probe's trials, kept for ``conclude`` when the probe
# ends on exactly those (the same record objects, in trial order), so that an eval is
# decided once: eval id -> (spec, trials, decision).
_DECIDED: dict[str, tuple[EvalSpec, tuple[TrialRecord, ...], Decision]] = {}


def _decided(spec: EvalSpec, trials: Sequence[TrialRecord]) -> Decision:
    ordered = tuple(sorted(trials, key=lambda trial: trial.index))
    decision = decide(spec, ordered)
    _DECIDED[spec.id] = (spec, ordered, decision)
    return decision


def _decision(spec: EvalSpec, trials: Sequence[TrialRecord]) -> Decision:
    """``decide``, or the decision ``wanted`` took on these very trials."""
    kept = _DECIDED.pop(spec.id, None)
    if kept is not None:
        was, ordered, decision = kept
        same = was is spec and len(ordered) == len(trials)
        if same and all(a is b for a, b in zip(ordered, trials, strict=True)):
            return decision
    return decide(spec, trials)


def conclude(spec: EvalSpec, trials: Sequence[TrialRecord]) -> tuple[Decision, Stop] | None:
    """The decision of a probe that ended, and why it ended; None when it was cut short
    of a decision (interrupted before k trials, and not settled)."""
    n = len(trials)
    if spec.suite is not None:  # a case: decided on the runs it was in, however many
        return decide_case(spec, trials), Stop(trials=n, planned=spec.k, why="fixed")
    if not spec.adaptive:
        if n < spec.k:
            return None
        return decide(spec, trials), Stop(trials=n, planned=spec.k, why="fixed")
    if n < spec.k:
        settled = settle(spec, trials)
        if settled is None:
            return None
        return settled, Stop(trials=n, planned=spec.k, why="settled")
    decision = _decision(spec, trials)
    near = close(spec, decision, _scored(trials)) or ""
    if near and n < spec.max_k:
        return decision, Stop(trials=n, planned=spec.k, why="interrupted", near=near)
    if near and n > spec.k:
        reason = f"{decision.reason}; still {near} at max_k {spec.max_k}"
        return _with(decision, reason), Stop(trials=n, planned=spec.k, why="max_k", near=near)
    if n > spec.k:
        reason = f"{decision.reason}; {n - spec.k} trials added to k={spec.k}"
        return _with(decision, reason), Stop(trials=n, planned=spec.k, why="extended")
    return decision, Stop(trials=n, planned=spec.k, why="max_k" if near else "planned", near=near)


def settle(spec: EvalSpec, trials: Sequence[TrialRecord]) -> Decision | None:
    """The decision of a probe short of k that no scores of its other trials could
    change, or None. Cheap when there is none: it runs after every trial."""
    n = len(trials)
    rest = spec.k - n
    errored = sum(trial.error is not None for trial in trials)
    stopped = f"stopped after {n} of {spec.k} trials"
    if errored > spec.max_errors or spec.k - errored < spec.min_scored:
        verdict = decide(spec, trials)  # ERROR, with its own reason
        if errored <= spec.max_errors:
            stopped += f": the other {rest} cannot reach min_scored {spec.min_scored}"
        return _with(verdict, f"{verdict.reason}; {stopped}")
    scored = [trial for trial in trials if trial.error is None and trial.score is not None]
    for trial in scored:
        if trial.violations:
            names = ", ".join(trial.violations)
            return Decision(
                status=Status.FAIL,
                reason=one_line(
                    f"violation {names} in trial {trial.index} (seed {trial.seed}); {stopped}"
                ),
                stats=measure(spec, trials),
                checks=(Check(name="violations", ok=False, actual=names, allowed="none"),),
            )
    ordered = sorted(trial.score for trial in scored if trial.score is not None)
    if spec.min_pass_rate is not None:
        return _pass_rate_settled(spec, trials, scored, ordered, stopped)
    if len(ordered) < 2 or ordered[-1] - ordered[0] <= spec.flakiness + EPSILON:
        return None  # no completion's sd can reach the test's bar (may_settle's premise)
    if item_test(scored) is not None:
        return None  # an item test over items not yet seen has no closed form
    # Completions the error budget allows: from `fewest` to `rest` of the other trials score.
    fewest = max(0, rest - (spec.max_errors - errored))
    result = _spread_settled(spec, ordered, fewest, rest)
    if result is None:
        return None
    least, p_value = result
    stats = measure(spec, trials)
    assert stats.median is not None
    level = spread_level(spec)
    settled = Decision(
        status=Status.QUARANTINE,
        reason=f"sd at least {fmt(least)} > flakiness {fmt(spec.flakiness)} at {level:.3g} "
        f"(p at most {p_value:.2g}) whatever the other {rest} trials score "
        f"(median {fmt(stats.median)}, {stopped})",
        stats=stats,
        checks=(
            Check(
                name="spread",
                ok=False,
                actual=f"sd >= {fmt(least)}, p <= {p_value:.2g}",
                allowed=f">= {level:.3g}",
            ),
        ),
    )
    if is_plain_test(spec):  # passed and failed already: told as the flaky test it is
        plain = as_plain(spec, trials, settled)
        return _with(plain, f"{plain.reason}; {stopped}")
    return settled


def _spread_settled(
    spec: EvalSpec, ordered: Sequence[float], fewest: int, rest: int
) -> tuple[float, float] | None:
    """The least sd and the largest p-value the spread test can have over every completion
    of these scores (ascending) by ``fewest`` to ``rest`` more, when every one is
    significant at the eval's level; else None.

    A trial counts if it is inside the guard of every completion (``policy.guard``). Its
    lowest guard sits above Q3 of the rest all scoring 0.0 (scores are at least 0, and Q3
    grows with each score) by a width at least F and at least the least IQR a completion
    can have (``least_iqr``), times a multiplier that grows with the count, so is least at
    the fewest scoring. Below, with the collapse rule on, a
    completion whose fence leaves a trial out quarantines for that, so every trial counts
    there; with it off, only those at or above the highest fence any completion can draw
    (Q1 of the rest all scoring 1.0). The sum of squares of the trials that count is a
    lower bound of the completion's (a superset's, about a mean of its own), and k - 1 the
    most degrees of freedom it can have, where the test's p-value for a given sum is
    largest.
    """
    fence = spec.outlier_fence if spec.outlier_fence > 0 else GUARD_FENCE
    width = max(spec.flakiness, min(least_iqr(ordered, extra) for extra in range(fewest, rest + 1)))
    reach = fence_multiplier(fence, len(ordered) + fewest) * width
    lowest_high = quartiles([*ordered, *([0.0] * rest)])[2] + reach
    inside = [score for score in ordered if score <= lowest_high + EPSILON]
    if spec.outlier_fence <= 0:
        highest_low = quartiles([*ordered, *([1.0] * rest)])[0] - reach
        inside = [score for score in inside if score >= highest_low - EPSILON]
    if len(inside) < 2:
        return None
    mean = math.fsum(inside) / len(inside)
    squares = math.fsum((score - mean) ** 2 for score in inside)
    test = spread_from_squares(squares, spec.k - 1, spec.flakiness)
    if test.p_value >= spread_level(spec):
        return None
    return math.sqrt(squares / (spec.k - 1)), test.p_value


def _pass_rate_settled(
    spec: EvalSpec,
    trials: Sequence[TrialRecord],
    scored: Sequence[TrialRecord],
    ordered: Sequence[float],
    stopped: str,
) -> Decision | None:
    """A pass-rate gate that every completion fails, or that every completion passes.

    Its lower bound is highest when all the other trials pass and lowest when
    all fail, and either way the most scoring completion is the extreme one.
    """
    assert spec.min_pass_rate is not None
    rest, bar = spec.k - len(trials), spec.min_pass_rate
    count, passes = len(scored), sum(bool(trial.passed) for trial in scored)
    confidence = gate_confidence(spec)
    best = wilson_interval(passes + rest, count + rest, confidence)[0]
    rate = f"pass rate {passes}/{count}: wilson lower bound"
    # Where max_k leaves room, a completion whose rate clears the bar would be extended.
    unreached = spec.max_k == spec.k or (passes + rest) / (count + rest) < bar - EPSILON
    if best < bar - EPSILON and unreached:
        check = Check(
            name="wilson lower bound", ok=False, actual=f"<= {fmt(best)}", allowed=f">= {fmt(bar)}"
        )
        reason = (
            f"{rate} at most {fmt(best)} < min_pass_rate {fmt(bar)} even if the other "
            f"{rest} trials pass ({stopped})"
        )
        return Decision(
            status=Status.FAIL, reason=reason, stats=measure(spec, trials), checks=(check,)
        )
    budgets = spec.budgets
    if any(
        v is not None for v in (budgets.p95_latency_ms, budgets.mean_tokens, budgets.mean_cost_usd)
    ):
        return None  # a trial not run could break a budget
    worst = wilson_interval(passes, count + rest, confidence)[0]
    floor = sorted_median([0.0] * rest + list(ordered))
    if worst < bar - EPSILON or floor < spec.threshold - EPSILON:
        return None
    reason = (
        f"{rate} at least {fmt(worst)} >= min_pass_rate {fmt(bar)} and median at least "
        f"{fmt(floor)} >= threshold {fmt(spec.threshold)} even if the other {rest} trials "
        f"fail ({stopped})"
    )
    checks = (
        Check(
            name="median", ok=True, actual=f">= {fmt(floor)}", allowed=f">= {fmt(spec.threshold)}"
        ),
        Check(
            name="wilson lower bound", ok=True, actual=f">= {fmt(worst)}", allowed=f">= {fmt(bar)}"
        ),
    )
    return Decision(status=Status.PASS, reason=reason, stats=measure(spec, trials), checks=checks)


def least_iqr(ordered: Sequence[float], extra: int) -> float:
    """The least IQR that ``extra`` more scores, anywhere, could give these (ascending).

    The tightest completion puts every new score on one of the observed ones: on
    a gap between two observed scores the IQR is linear in where the new ones
    sit (each quartile interpolates between two order statistics), so its
    minimum is at an end of the gap, and one cluster narrows the middle half
    more than a split one. ``tests/test_adaptive.py`` checks this against brute
    force over every placement on a grid.
    """
    if extra == 0:
        return sorted_iqr(ordered)
    least = math.inf
    for value in dict.fromkeys(ordered):
        at = bisect.bisect_left(ordered, value)
        least = min(least, sorted_iqr([*ordered[:at], *([value] * extra), *ordered[at:]]))
    return least


def close(spec: EvalSpec, decision: Decision, scored: int) -> str | None:
    """What the decision on ``scored`` scores is close to, when more trials could tell;
    None when it is clear."""
    if _clear(spec, decision):
        return None
    stats = decision.stats
    if spec.min_pass_rate is not None:
        # Judged on its pass rate alone: the median of pass/fail scores says little.
        return _pass_rate_near(spec, spec.min_pass_rate, stats, scored)
    near = _item_test_near(stats)
    if near is not None or decision.status is Status.QUARANTINE:
        return near  # significantly unstable: where its median sits does not matter
    return _spread_near(spec, stats) or _median_near(spec, stats, scored)


_MAY_EXTEND = (Status.PASS, Status.FAIL, Status.QUARANTINE)
_NOT_NOISE = {"violations", "collapse fence", "regression"}
_BUDGET_CHECKS = ("p95 ", "mean ")


def _clear(spec: EvalSpec, decision: Decision) -> bool:
    """Whether no more trials could change the decision: a status that is not extended, a
    check that failed for something other than noise, or scores that say nothing."""
    if decision.status not in _MAY_EXTEND:
        return True
    failed = {check.name for check in decision.checks if not check.ok}
    if not _NOT_NOISE.isdisjoint(failed):
        return True
    if any(name.startswith(_BUDGET_CHECKS) for name in failed):
        return True  # a budget: not a question of noise around a line
    stats = decision.stats
    if stats.median is None or stats.iqr is None:
        return True
    # A plain test's collapse, as clear as any (its checks show no fence).
    return "flaky" in failed and stats.iqr <= spec.flakiness + EPSILON


def _pass_rate_near(spec: EvalSpec, bar: float, stats: Stats, scored: int) -> str | None:
    """A pass rate at the bar whose lower bound is below it, which passes in every trial up
    to max_k could still lift there (``wilson_looks_pass`` follows the same rule)."""
    assert stats.pass_rate is not None and stats.wilson_low is not None
    passes, room = round(stats.pass_rate * scored), max(0, spec.max_k - scored - stats.errors)
    confidence = gate_confidence(spec)
    low = wilson_interval(passes, scored, confidence)[0]
    if not low < bar - EPSILON <= stats.pass_rate:
        return None
    reachable = wilson_interval(passes + room, scored + room, confidence)[0]
    if reachable < bar - EPSILON:
        return None  # past help: not even max_k could clear it
    return "a pass rate above min_pass_rate with a lower bound below it"


def _item_test_near(stats: Stats) -> str | None:
    low, high = NEAR_ITEM_P
    if stats.item_p is None or not low <= stats.item_p < high:
        return None
    return f"an item test near its level (p {stats.item_p:.2g})"


def _spread_near(spec: EvalSpec, stats: Stats) -> str | None:
    if stats.spread_p is None or not stats.spread_p < NEAR_SPREAD_P:
        return None
    return f"a spread near flakiness {fmt(spec.flakiness)} (p {stats.spread_p:.2g})"


def _median_near(spec: EvalSpec, stats: Stats, scored: int) -> str | None:
    assert stats.median is not None and stats.iqr is not None
    if scored < 2 or stats.iqr <= 0:
        return None
    error = _MEDIAN_SE * (stats.iqr / IQR_PER_SD) / math.sqrt(scored)
    if abs(stats.median - spec.threshold) < NEAR_MEDIAN_SE * error - EPSILON:
        return (
            f"a median within {NEAR_MEDIAN_SE:g} standard errors of threshold {fmt(spec.threshold)}"
        )
    return None


def _scored(trials: Sequence[TrialRecord]) -> int:
    return sum(trial.error is None and trial.score is not None for trial in trials)


def _with(decision: Decision, reason: str) -> Decision:
    return decision.model_copy(update={"reason": one_line(reason)})


# --- what a pass-rate gate can do, as it runs ---------------------------------------------


def gate_power(spec: EvalSpec, true_rate: float) -> float:
    """The chance that a pass-rate gate passes an eval whose trials pass at ``true_rate``
    (none erring, the median's bar met), as the rule runs: at k, and under adaptive K again
    after each extension its rule asks for, each look at ``gate_confidence``. Exact
    (``firewall._stats.wilson_looks_pass``; curtailment never changes a decision, so it
    does not enter)."""
    bar = spec.min_pass_rate
    if bar is None:
        raise ValueError(f"{spec.id} has no min_pass_rate")
    max_k = spec.max_k if looks(spec) > 1 else spec.k
    return wilson_looks_pass(spec.k, max_k, step(spec), bar, gate_confidence(spec), true_rate)


def power_notes(spec: EvalSpec) -> list[str]:
    """What the gate can do, for `firewall list` (``firewall.spec.power_notes``), with a
    pass-rate gate's chance stated for its rule as it runs: extended under adaptive K, at
    the confidence its looks leave each one."""
    notes = spec_power_notes(spec)
    if spec.min_pass_rate is None or looks(spec) == 1:
        return notes
    true_rate = spec.min_pass_rate + 0.75 * (1 - spec.min_pass_rate)
    chance = gate_power(spec, true_rate)
    advice = ""
    if chance < RELIABLE:
        needed = _reliable_k(spec, true_rate)
        advice = f"; k >= {needed} passes it in {RELIABLE:.0%}" if needed is not None else ""
    return [
        f"a true pass rate of {fmt(true_rate)} passes {chance:.0%} of runs at k={spec.k}, "
        f"extended up to max_k {spec.max_k} ({looks(spec)} looks, each at "
        f"{gate_confidence(spec):.4g} confidence){advice}",
        *notes[1:],
    ]


def _reliable_k(spec: EvalSpec, true_rate: float) -> int | None:
    """The least k (max_k as far above it as now) at which the gate passes ``true_rate``
    in ``RELIABLE`` of runs, by bisection (the chance grows with k, give or take the
    binomial's steps); None past ``MAX_POWER_K``."""

    def power(k: int) -> float:
        return gate_power(
            spec.model_copy(update={"k": k, "max_k": k + spec.max_k - spec.k}), true_rate
        )

    low, high = spec.k, MAX_POWER_K
    if power(high) < RELIABLE:
        return None
    while high - low > 1:
        middle = (low + high) // 2
        if power(middle) >= RELIABLE:
            high = middle
        else:
            low = middle
    return high
