"""Continuous item scores (a judge's 0.7 per case): a two-way ANOVA of the trial effect,
checked against statsmodels, and what it decides."""

from __future__ import annotations

import random

import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
from builders import make_spec, trial

from firewall._stats import ANOVA, trial_anova
from firewall.policy import Status, decide
from firewall.runner.trial import TrialRecord


def judged(rng: random.Random, *, items: int, trials: int, shift: float = 0.0) -> list[TrialRecord]:
    """Trials of a judge over fixed items: each item has its own level, each trial scores
    it with noise, and with ``shift`` every other trial is that much lower as a whole."""
    levels = [rng.uniform(0.6, 0.95) for _ in range(items)]
    records = []
    for index in range(trials):
        offset = shift if index % 2 else 0.0
        scores = {
            f"case-{i}": min(1.0, max(0.0, level - offset + rng.gauss(0, 0.15)))
            for i, level in enumerate(levels)
        }
        mean = sum(scores.values()) / items
        records.append(trial(mean, index=index, items=scores))
    return records


@pytest.mark.parametrize("seed", range(5))
def test_the_trial_effect_is_statsmodels_two_way_anova(seed: int) -> None:
    rng = random.Random(seed)
    records = judged(rng, items=rng.randint(3, 30), trials=rng.randint(3, 9), shift=0.05 * seed)
    rows = [
        {"trial": t.index, "item": case, "score": value}
        for t in records
        for case, value in t.items.items()
    ]
    model = smf.ols("score ~ C(trial) + C(item)", data=pd.DataFrame(rows)).fit()
    table = sm.stats.anova_lm(model, typ=2)
    test = trial_anova([t.items for t in records])
    assert test.name == ANOVA
    assert test.result.statistic == pytest.approx(table.loc["C(trial)", "F"], rel=1e-9)
    assert test.result.p_value == pytest.approx(
        table.loc["C(trial)", "PR(>F)"], rel=1e-7, abs=1e-15
    )
    assert test.result.df == table.loc["C(trial)", "df"]


def test_an_honest_judge_over_items_is_not_quarantined_though_its_iqr_is_above_f() -> None:
    rng = random.Random(7)
    flagged_iqr = flagged_anova = 0
    for _ in range(200):
        records = judged(rng, items=20, trials=7)
        spec = make_spec(k=7, threshold=0.5)
        flagged_anova += decide(spec, records).status is Status.QUARANTINE
        bare = [t.model_copy(update={"items": {}}) for t in records]
        flagged_iqr += decide(spec, bare).status is Status.QUARANTINE
    # 0.15 of noise on each of 20 items: a trial's mean scatters by 0.034, 1.5 times the sd
    # of an IQR of F = 0.03, which the score-only spread test calls unstable often.
    assert flagged_iqr > 30
    assert flagged_anova <= 6  # the test's 1% level, with room for chance


def test_a_shift_of_whole_trials_is_caught_and_the_reason_names_the_test() -> None:
    rng = random.Random(3)
    decision = decide(make_spec(k=8, threshold=0.5), judged(rng, items=30, trials=8, shift=0.12))
    assert decision.status is Status.QUARANTINE
    assert "x the items' noise (p = " in decision.reason and "two-way ANOVA" in decision.reason
    assert decision.stats.item_test == ANOVA


def test_continuous_items_that_differ_between_trials_keep_the_plain_spread_rule() -> None:
    records = [
        trial(0.7, index=0, items={"a": 0.6, "b": 0.8}),
        trial(0.75, index=1, items={"c": 0.7, "d": 0.8}),
        trial(0.7, index=2, items={"a": 0.7, "b": 0.7}),
    ]
    decision = decide(make_spec(k=3, threshold=0.5), records)
    assert decision.stats.item_test is None
    assert [c.name for c in decision.checks if c.name == "spread"] == ["spread"]


def test_items_without_any_noise_are_judged_by_whether_the_trials_differ() -> None:
    same = [trial(0.75, index=i, items={"a": 0.5, "b": 1.0}) for i in range(3)]
    assert trial_anova([t.items for t in same]).result.p_value == 1.0
    shifted = [
        trial(0.75 - 0.1 * i, index=i, items={"a": 0.5 - 0.1 * i, "b": 1.0 - 0.1 * i})
        for i in range(3)
    ]
    assert trial_anova([t.items for t in shifted]).result.p_value == 0.0
