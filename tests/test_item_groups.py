"""Items in groups (issue 23, item 3): ids ``doc-3/q1`` are tested by group, against
statsmodels, and grouped honest evals are quarantined about as often as the test's level."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from builders import make_spec, trial

from firewall._stats import (
    CLUSTERED,
    GROUPED,
    group_of,
    group_test,
    grouped,
    trial_anova,
)
from firewall.policy import Status, apparent_groups, decide
from firewall.runner.trial import TrialRecord


def test_an_items_group_is_what_its_id_holds_before_the_last_slash() -> None:
    assert group_of("doc-3/q1") == "doc-3"
    assert group_of("corpus/doc-3/q1") == "corpus/doc-3"
    assert group_of("case-1") is None
    assert group_of("/q1") is None


def test_items_are_grouped_only_when_every_item_names_a_group_and_trials_hold_two() -> None:
    assert (
        grouped([{"a/1": 1.0, "a/2": 0.0, "b/1": 1.0}] * 2) == [{"a": [1.0, 0.0], "b": [1.0]}] * 2
    )
    assert grouped([{"a/1": 1.0, "b": 0.0}]) is None  # one item without a group
    assert grouped([{"a/1": 1.0, "a/2": 0.0}]) is None  # one group in a trial


def frame(groups: list[dict[str, list[float]]]) -> pd.DataFrame:
    rows = [
        {"trial": t, "group": name, "y": float(np.mean(scores)), "m": len(scores)}
        for t, g in enumerate(groups)
        for name, scores in g.items()
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", range(5))
def test_sampled_groups_are_a_weighted_one_way_anova_of_group_means(seed: int) -> None:
    """statsmodels' weighted least squares of the group means on the trial, weights the
    group sizes, against the intercept alone (``compare_f_test``: anova_lm centres a WLS
    fit's total on the unweighted mean): the same F and p (continuous items, no floor)."""
    rng = np.random.default_rng(seed)
    groups = [
        {
            f"g{t}-{c}": rng.normal(0.7 + rng.normal(0, 0.05), 0.1, rng.integers(1, 6)).tolist()
            for c in range(rng.integers(2, 7))
        }
        for t in range(int(rng.integers(3, 9)))
    ]
    result = group_test(groups, binary=False)
    data = frame(groups)
    fit = smf.wls("y ~ C(trial)", data=data, weights=data["m"]).fit()
    alone = smf.wls("y ~ 1", data=data, weights=data["m"]).fit()
    f, p, _ = fit.compare_f_test(alone)
    assert result.name == CLUSTERED
    assert result.result.statistic == pytest.approx(f, rel=1e-8)
    assert result.result.p_value == pytest.approx(p, rel=1e-6)
    assert result.result.df == len(groups) - 1


def test_the_same_groups_in_every_trial_are_blocked_on() -> None:
    rng = np.random.default_rng(3)
    groups = [
        {f"doc-{c}": rng.binomial(1, 0.8, 4).astype(float).tolist() for c in range(6)}
        for _ in range(7)
    ]
    result = group_test(groups, binary=True)
    means = [{name: float(np.mean(s)) for name, s in g.items()} for g in groups]
    assert result.name == GROUPED
    assert result.result == trial_anova(means).result
    assert result.groups == 6 and result.items == 24


def test_binary_groups_are_never_tested_more_strictly_than_independent_items() -> None:
    """Groups whose checks agree less than chance would shrink the error term below the
    binomial: the design effect is held at 1."""
    groups = [{f"d{c}": [1.0, 0.0] for c in range(10)}, {f"e{c}": [1.0, 1.0] for c in range(10)}]
    floored = group_test(groups, binary=True)
    grand = 30 / 40
    between = 20 * (0.5 - grand) ** 2 + 20 * (1.0 - grand) ** 2
    assert floored.result.statistic == pytest.approx(between / (grand * (1 - grand)))


def documents(
    rng: random.Random, icc: float, *, fixed: bool, named: bool, shift: float = 0.0
) -> list[TrialRecord]:
    """Seven trials of 10 documents of 5 checks each at p = 0.9 (see benchmarks/decisions.py
    ``clustered``)."""
    a, b = 0.9 * (1 / icc - 1), 0.1 * (1 / icc - 1)
    slash = "/" if named else "-"
    out = []
    for j in range(7):
        offset = shift if j % 2 else 0.0
        docs = range(10) if fixed else rng.sample(range(10_000), 10)
        items = {}
        for doc in docs:
            rate = max(0.0, rng.betavariate(a, b) - offset)
            for q in range(5):
                items[f"doc-{doc}{slash}q{q}"] = float(rng.random() < rate)
        out.append(trial(sum(items.values()) / 50, index=j, items=items))
    return out


@pytest.mark.parametrize("icc", [0.33, 0.09])
@pytest.mark.parametrize("fixed", [False, True], ids=["sampled", "fixed"])
def test_grouped_honest_evals_are_quarantined_at_most_2_percent(icc: float, fixed: bool) -> None:
    rng = random.Random(int(icc * 100) + fixed)
    spec = make_spec(k=7, threshold=0.5)
    probes = 300
    flagged = sum(
        decide(spec, documents(rng, icc, fixed=fixed, named=True)).status is Status.QUARANTINE
        for _ in range(probes)
    )
    assert flagged <= 0.02 * probes + 4  # the 1% level, with room for chance (about 3 sd)


@pytest.mark.parametrize("fixed", [False, True], ids=["sampled", "fixed"])
def test_grouped_trials_that_really_differ_are_caught(fixed: bool) -> None:
    rng = random.Random(7)
    spec = make_spec(k=7, threshold=0.3)
    decisions = [
        decide(spec, documents(rng, 0.33, fixed=fixed, named=True, shift=0.3)) for _ in range(100)
    ]
    caught = [d for d in decisions if d.status is Status.QUARANTINE]
    assert len(caught) >= 70
    reason = next(d.reason for d in caught if d.reason.startswith("between-trial"))
    assert "x the groups' noise" in reason and " items in 10 groups, k=7)" in reason


def test_without_groups_a_quarantine_says_when_the_ids_look_grouped() -> None:
    rng = random.Random(1)
    spec = make_spec(k=7, threshold=0.5)
    for _ in range(200):
        decision = decide(spec, documents(rng, 0.33, fixed=False, named=False))
        if decision.status is Status.QUARANTINE and decision.reason.startswith("between"):
            break
    assert decision.status is Status.QUARANTINE
    assert "; the item ids look grouped ('doc-" in decision.reason
    assert "hold 5 each): if items in a group share their noise, name them doc-" in decision.reason
    assert decision.reason.endswith("/<item> to test by group")


@pytest.mark.parametrize(
    ("ids", "found"),
    [
        (["doc3-q1", "doc3-q2", "doc4-q1", "doc4-q2"], ("doc3", 2)),
        (["case-001", "case-002", "case-003"], None),  # one prefix: no groups
        (["a1", "b2"], None),  # no separator
        (["x-1", "y-1", "z-1"], None),  # every group of one
    ],
)
def test_apparent_groups(ids: list[str], found: tuple[str, int] | None) -> None:
    assert apparent_groups(ids) == found
