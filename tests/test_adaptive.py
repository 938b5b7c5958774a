"""Adaptive K (contract §4): exact curtailment, extension near a line, the fixed rule when off."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import numpy as np
import pytest
from builders import error_trial, make_spec, trial, trials

from firewall import adaptive
from firewall._stats import spread_test
from firewall.adaptive import conclude, least_iqr, settle, wanted
from firewall.policy import Decision, Status, decide, spread_level
from firewall.runner.schedule import Schedule, Seen
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec

FLAKY = [0.5, 0.95, 0.55, 0.9]  # four trials far apart: no three more can bring them within F


def grid_completions(ordered: list[float], extra: int) -> list[list[float]]:
    """Every placement of ``extra`` more scores on a grid: the observed scores, the
    midpoints between them, and both ends of [0, 1]."""
    points = sorted({0.0, 1.0, *ordered, *((a + b) / 2 for a, b in itertools.pairwise(ordered))})
    return [list(c) for c in itertools.combinations_with_replacement(points, extra)]


@pytest.mark.parametrize("seed", range(4))
def test_the_least_iqr_is_what_brute_force_over_every_placement_finds(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        ordered = sorted(round(rng.random(), 2) for _ in range(rng.randint(1, 7)))
        extra = rng.randint(0, 4)
        brute = min(
            float(np.subtract(*np.percentile([*ordered, *c], [75, 25])))
            for c in grid_completions(ordered, extra)
        )
        assert least_iqr(ordered, extra) == pytest.approx(brute, abs=1e-12), (ordered, extra)


@pytest.mark.parametrize("seed", range(3))
def test_a_settled_probe_has_the_decision_of_every_completion(seed: int) -> None:
    """Soundness, against brute force: whenever a probe stops short of k, every way the
    other trials could have scored gives the same status at k, and none of them is close
    enough to a line to be extended."""
    rng = random.Random(seed)
    settled = 0
    for _ in range(300):
        k = rng.randint(3, 6)
        n = rng.randint(1, k - 1)
        spread = rng.choice([0.01, 0.03, 0.05, 0.3])
        pass_rate = rng.random() < 0.3
        spec = make_spec(
            k=k,
            max_k=rng.choice([k, k + 4]),
            min_pass_rate=0.5 if pass_rate else None,
            min_scored=min(3, k),
            outlier_fence=rng.choice([3.0, 3.0, 0.0]),
        )
        seen = trials(
            0.1 if rng.random() < 0.1 else round(0.8 + rng.uniform(-spread, spread), 3)
            for _ in range(n)
        )
        decision = settle(spec, seen)
        if decision is None:
            continue
        settled += 1
        observed = sorted(t.score for t in seen if t.score is not None)
        for completion in grid_completions(observed, k - n):
            full = seen + [trial(score, index=n + i) for i, score in enumerate(completion)]
            assert decide(spec, full).status is decision.status, (spec, observed, completion)
            assert wanted(spec, full) == k, (spec, observed, completion)
    assert settled > 20  # the check above ran often enough to mean something


WIDE = [0.5, 0.95, 0.55, 0.9, 0.5, 0.9, 0.5]


def test_a_probe_far_too_wide_to_be_stable_stops_as_soon_as_no_completion_escapes() -> None:
    spec = make_spec(k=7)
    # Three trials: were the other four to score 0, the two highest would stand beyond the
    # spread test's guard above Q3, and the rest could be a stable, failing eval.
    assert settle(spec, trials(WIDE[:3])) is None
    decision = settle(spec, trials(WIDE[:4]))
    assert decision is not None and decision.status is Status.QUARANTINE
    assert decision.reason == (
        "sd at least 0.165 > flakiness 0.03 at 0.0125 (p at most 6.1e-68) whatever the "
        "other 3 trials score (median 0.725, stopped after 4 of 7 trials)"
    )
    assert wanted(spec, trials(WIDE[:4])) == 4
    verdict, stop = conclude(spec, trials(WIDE[:4])) or (None, None)
    assert verdict is not None and verdict.status is Status.QUARANTINE
    assert stop is not None and (stop.trials, stop.planned, stop.why) == (4, 7, "settled")


def test_errors_past_max_errors_stop_the_probe_at_once() -> None:
    spec = make_spec(k=7, max_errors=0)
    decision = settle(spec, [error_trial("boom")])
    assert decision is not None and decision.status is Status.ERROR
    assert decision.reason.startswith("1 of 1 trials errored (max_errors 0)")
    assert decision.reason.endswith("; stopped after 1 of 7 trials")


def test_a_probe_that_cannot_reach_min_scored_stops() -> None:
    spec = make_spec(k=5, max_errors=4, min_scored=3)
    assert settle(spec, [error_trial(index=0), error_trial(index=1)]) is None
    decision = settle(spec, [error_trial(index=i) for i in range(3)])
    assert decision is not None and decision.status is Status.ERROR
    assert "the other 2 cannot reach min_scored 3" in decision.reason


def test_a_violation_stops_the_probe_with_a_fail() -> None:
    spec = make_spec(k=7)
    decision = settle(spec, [trial(0.95, violations=["leaked-pii"])])
    assert decision is not None and decision.status is Status.FAIL
    assert decision.reason == (
        "violation leaked-pii in trial 0 (seed 1000); stopped after 1 of 7 trials"
    )


def test_a_pass_rate_gate_stops_once_settled_either_way() -> None:
    spec = make_spec(k=20, max_k=20, min_pass_rate=0.5, threshold=0.5)
    fails = [trial(0.0, index=i, passed=False) for i in range(14)]
    decision = settle(spec, fails)
    # 6 more passes would give 6/20, whose lower bound is far below 0.5
    assert decision is not None and decision.status is Status.FAIL
    assert "even if the other 6 trials pass" in decision.reason
    passes = [trial(1.0, index=i, passed=True) for i in range(17)]
    decision = settle(spec, passes)
    assert decision is not None and decision.status is Status.PASS, decision
    assert "even if the other 3 trials fail" in decision.reason
    assert settle(spec, passes[:10]) is None  # 10/20 could still fail the bar


def test_a_budget_keeps_a_pass_rate_gate_from_passing_early() -> None:
    spec = make_spec(k=20, min_pass_rate=0.5, threshold=0.5, budgets={"mean_tokens": 100})
    passes = [trial(1.0, index=i, passed=True, metrics={"tokens": 10}) for i in range(17)]
    assert settle(spec, passes) is None


def test_an_item_eval_is_not_curtailed_for_its_spread() -> None:
    spread = [
        trial(score, index=i, items={"a": float(score > 0.7), "b": 1.0})
        for i, score in enumerate([0.5, 1.0, 0.5, 1.0])
    ]
    assert settle(make_spec(k=7), spread) is None


def test_a_clear_stable_eval_is_decided_in_exactly_k_trials() -> None:
    spec = make_spec(k=7, threshold=0.8)
    tight = trials([0.95, 0.951, 0.949, 0.95, 0.952, 0.948, 0.95])
    for n in range(1, 7):
        assert wanted(spec, tight[:n]) == 7
    assert wanted(spec, tight) == 7
    decision, stop = conclude(spec, tight) or (None, None)
    assert decision == decide(spec, tight) and stop is not None and stop.why == "planned"


NEAR = [0.885, 0.901, 0.909, 0.925, 0.941, 0.949, 0.965]  # sd 0.0286: p 0.13 against F 0.03


def test_a_spread_near_flakiness_gets_more_trials_a_few_at_a_time_up_to_max_k() -> None:
    spec = make_spec(k=7, max_k=11, threshold=0.5)
    p_value = decide(spec, trials(NEAR)).stats.spread_p
    assert p_value is not None and spread_level(spec) <= p_value < adaptive.NEAR_SPREAD_P
    assert adaptive.step(spec) == 3
    assert wanted(spec, trials(NEAR)) == 10
    ten = trials([*NEAR, 0.885, 0.965, 0.925])
    assert wanted(spec, ten) == 11  # still near at 10: one more, to max_k
    eleven = trials([*NEAR, 0.885, 0.965, 0.925, 0.925])
    assert wanted(spec, eleven) == 11
    decision, stop = conclude(spec, eleven) or (None, None)
    assert decision is not None and stop is not None
    assert stop.why == "max_k" and stop.trials == 11 and stop.near.startswith("a spread near")
    assert "; still a spread near flakiness 0.03 (p " in decision.reason
    assert decision.reason.endswith(") at max_k 11")


def test_an_extension_that_settles_the_decision_says_how_many_trials_it_added() -> None:
    spec = make_spec(k=7, max_k=15, threshold=0.5)
    settled = trials([*NEAR, 0.925, 0.925, 0.925])
    assert wanted(spec, settled) == 10
    decision, stop = conclude(spec, settled) or (None, None)
    assert decision is not None and stop is not None and stop.why == "extended"
    assert decision.reason.endswith("; 3 trials added to k=7")


def test_a_significant_spread_is_not_extended() -> None:
    """A quarantine by the spread test is significant at the level split over every look
    the probe may take: more trials would only be more looks."""
    spec = make_spec(k=7, max_k=15, threshold=0.5)
    wide = trials([0.85, 0.87, 0.9, 0.925, 0.95, 0.98, 1.0])
    assert decide(spec, wide).status is Status.QUARANTINE
    assert wanted(spec, wide) == 7


def test_a_median_within_two_standard_errors_of_the_threshold_gets_more_trials() -> None:
    spec = make_spec(k=7, max_k=15, threshold=0.8)
    near = trials([0.79, 0.8, 0.8, 0.805, 0.81, 0.81, 0.82])
    assert adaptive.close(spec, decide(spec, near), 7) is not None
    assert wanted(spec, near) == 10
    far = trials([0.89, 0.9, 0.9, 0.905, 0.91, 0.91, 0.92])
    assert wanted(spec, far) == 7


def test_a_collapse_is_not_close_to_anything() -> None:
    spec = make_spec(k=7, max_k=15)
    collapsed = trials([0.9, 0.9, 0.91, 0.9, 0.9, 0.91, 0.1])
    assert decide(spec, collapsed).status is Status.QUARANTINE
    assert wanted(spec, collapsed) == 7


@pytest.mark.parametrize("scores", [FLAKY, [0.9] * 7, [0.9, 0.91, 0.92, 0.925, 0.93, 0.94, 0.95]])
def test_with_adaptive_off_the_rule_is_exactly_the_fixed_k_rule(scores: list[float]) -> None:
    spec = make_spec(k=7, adaptive=False)
    seen = trials(scores)
    assert wanted(spec, seen) == 7
    if len(seen) < 7:
        assert conclude(spec, seen) is None  # interrupted, as before
        return
    decision, stop = conclude(spec, seen) or (None, None)
    assert decision == decide(spec, seen) and stop is not None and stop.why == "fixed"


def test_a_probe_cut_short_before_it_settled_is_not_decided() -> None:
    assert conclude(make_spec(k=7), trials([0.9, 0.9, 0.9])) is None


def test_trials_that_finish_after_the_probe_settled_keep_it_settled() -> None:
    spec = make_spec(k=7)
    late: list[TrialRecord] = [*trials(WIDE[:4]), trial(0.9, index=4)]
    decision = settle(spec, late)
    assert decision is not None and decision.status is Status.QUARANTINE


def test_a_probe_settles_at_the_level_of_the_looks_it_may_take() -> None:
    # Six trials whose sum of squares is chi-square 13.2 on the 6 df of k = 7: p 0.039,
    # below the fixed probe's 5% but not the 1.25% of each of an adaptive probe's 4 looks.
    six = trials([0.85, 0.86, 0.89, 0.9, 0.93, 0.94])
    assert 0.0125 < spread_test([0.85, 0.86, 0.89, 0.9, 0.93, 0.94, 0.895], 0.03).p_value < 0.05
    assert settle(make_spec(k=7, max_k=15), six) is None
    settled = settle(make_spec(k=7, max_k=7), six)
    assert settled is not None and settled.status is Status.QUARANTINE


def test_a_pass_rate_gate_past_help_is_not_extended() -> None:
    # 7 of 7 pass: its lower bound 0.65 is below 0.9, and still 0.8 at 15 of 15.
    spec = make_spec(k=7, max_k=15, min_pass_rate=0.9, threshold=0.5)
    passes = [trial(1.0, index=i, passed=True) for i in range(7)]
    assert wanted(spec, passes) == 7
    reachable = make_spec(k=7, max_k=60, min_pass_rate=0.9, threshold=0.5)
    assert wanted(reachable, passes) == 10  # 60 of 60 would clear it: worth more trials


def run_schedule(
    spec: EvalSpec, scores: list[float], monkeypatch: pytest.MonkeyPatch
) -> tuple[list[int], list[TrialRecord]]:
    """Hand out and record trials one at a time, as the runner does at concurrency 1; the
    number of trials each call to ``wanted`` saw, and the trials run."""
    asked: list[int] = []

    def counted(spec: EvalSpec, trials: Sequence[TrialRecord]) -> int:
        asked.append(len(trials))
        return wanted(spec, trials)

    schedule = Schedule([spec], 7, wanted=counted, may_settle=adaptive.may_settle)
    while (task := schedule.next_task()) is not None:
        schedule.record(task, trial(scores[task.index], index=task.index))
    return asked, schedule.results()[spec.id]


def test_a_stable_probe_is_judged_once_when_its_planned_trials_are_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked, ran = run_schedule(make_spec(k=7), [0.9] * 7, monkeypatch)
    assert asked == [7]  # not after each of the first six: no curtailment could apply
    assert len(ran) == 7


def test_a_probe_is_asked_early_once_curtailment_can_apply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked, ran = run_schedule(make_spec(k=7), WIDE, monkeypatch)
    assert asked == [2, 3, 4]  # apart by more than F from the second trial; settled at four
    assert len(ran) == 4


def test_an_eval_is_decided_once_from_plan_to_conclusion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def counted(spec: EvalSpec, trials: Sequence[TrialRecord]) -> Decision:
        calls.append(len(trials))
        return decide(spec, trials)

    monkeypatch.setattr(adaptive, "decide", counted)
    spec = make_spec(k=7)
    _, ran = run_schedule(spec, [0.9] * 7, monkeypatch)
    concluded = conclude(spec, sorted(ran, key=lambda t: t.index))
    assert concluded is not None and concluded[0].status is Status.PASS
    assert calls == [7]


@pytest.mark.parametrize("seed", range(3))
def test_may_settle_is_true_whenever_settle_would_stop_the_probe(seed: int) -> None:
    """The schedule skips ``settle`` when ``may_settle`` is False: never a stop missed."""
    rng = random.Random(seed)
    for _ in range(400):
        k = rng.randint(3, 8)
        spec = make_spec(
            k=k,
            max_k=rng.choice([k, k + 4]),
            max_errors=rng.choice([0, 1]),
            min_pass_rate=0.5 if rng.random() < 0.2 else None,
            min_scored=min(3, k),
        )
        seen_trials: list[TrialRecord] = []
        for index in range(rng.randint(1, k - 1)):
            if rng.random() < 0.1:
                seen_trials.append(error_trial(index=index))
            else:
                spread = rng.choice([0.01, 0.05, 0.3])
                score = min(1.0, max(0.0, round(0.8 + rng.uniform(-spread, spread), 3)))
                seen_trials.append(trial(score, index=index))
        facts = Seen()
        for record in seen_trials:
            facts.add(record)
        if settle(spec, seen_trials) is not None:
            assert adaptive.may_settle(spec, facts), (spec, seen_trials)
