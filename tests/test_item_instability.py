"""Item-aware instability (contract §4) on simulated probes whose truth is known.

An accuracy over n binary items scatters by sqrt(p (1 - p) / n) from binomial
noise alone: the IQR rule (IQR > F = 0.03) quarantined 71% of honest probes
at n = 50, p = 0.9, K = 7. Here honest probes (trials that differ only by
that noise) must be quarantined about as often as the item test's level (1%)
says, and probes whose trials really differ must be caught.

Honest populations: p in {0.7, 0.85, 0.9, 0.95}, n in {20, 50, 200}, K in {7,
15}. An eval's pool holds 10,000 cases, each of its own difficulty (a Beta
around p: some near-certain, some coin flips); its items are either fixed
(a probe runs the same n cases, drawn from the pool, in every trial) or
sampled (each trial draws n cases of its own). Every probe goes through
``policy.decide``. The generators are seeded, so every run counts the same;
the bounds leave room for another seed. (At 2,000 probes per population,
the honest rates were 0.3% to 1.4%, and 0.9% over all of them.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
from builders import make_spec

from firewall.policy import Decision, Status, decide
from firewall.runner.trial import TrialRecord

RATES = (0.7, 0.85, 0.9, 0.95)
SIZES = (20, 50, 200)
PROBES = 300  # per population: 12 populations per test, 3,600 probes
POOL = 10_000
CONCENTRATION = 4.0  # item difficulties ~ Beta(4p, 4(1 - p)): from near-certain to coin flips

POOL_NAMES = np.array([f"pool-{i}" for i in range(POOL)], dtype=object)

Rate = Callable[[int], float]  # trial index -> the pass rate that trial really has


def steady(p: float) -> Rate:
    """Every trial at the pass rate ``p``."""
    return lambda _: p


def record(index: int, names: list[str], passed: list[bool]) -> TrialRecord:
    items = dict(zip(names, map(float, passed), strict=True))  # a case drawn twice counts once
    score = sum(items.values()) / len(items)
    # Every field as the runner's validation would set it: skipping that halves the time.
    return TrialRecord.model_construct(
        index=index,
        seed=index,
        score=score,
        passed=score >= 0.8,
        duration_s=0.0,
        in_flight=1,
        error=None,
        violations=[],
        metrics={},
        fields={},
        items=items,
        model_id=None,
        prompt_version=None,
    )


def shifted(difficulty: np.ndarray, p: float, rate: np.ndarray) -> np.ndarray:
    """Each case's pass probability in a trial whose rate is ``rate`` instead of ``p``: the
    cases keep their order of difficulty and the mean moves exactly to ``rate``."""
    lower = difficulty * (rate / p)
    higher = 1 - (1 - difficulty) * ((1 - rate) / (1 - p))
    return np.where(rate <= p, lower, higher)


def fixed_items(
    rng: np.random.Generator, pool: np.ndarray, p: float, n: int, rates: np.ndarray
) -> list[TrialRecord]:
    """The same n cases in every trial, drawn from the pool for this probe."""
    drawn = rng.integers(0, POOL, n)
    names = POOL_NAMES[drawn].tolist()
    chance = shifted(pool[drawn][None, :], p, rates[:, None])
    passed = (rng.random(chance.shape) < chance).tolist()
    return [record(j, names, row) for j, row in enumerate(passed)]


def sampled_items(
    rng: np.random.Generator, pool: np.ndarray, p: float, n: int, rates: np.ndarray
) -> list[TrialRecord]:
    """Each trial draws n cases of its own from the pool."""
    drawn = rng.integers(0, POOL, (len(rates), n))
    chance = shifted(pool[drawn], p, rates[:, None])
    passed = (rng.random(chance.shape) < chance).tolist()
    names = POOL_NAMES[drawn].tolist()
    return [record(j, names[j], row) for j, row in enumerate(passed)]


Generator = Callable[[np.random.Generator, np.ndarray, float, int, np.ndarray], list[TrialRecord]]
DESIGNS: dict[str, Generator] = {"fixed": fixed_items, "sampled": sampled_items}


def probes(design: str, p: float, n: int, k: int, count: int, rate: Rate) -> Iterator[Decision]:
    rng = np.random.default_rng([k, n, round(p * 100), len(design)])
    pool = rng.beta(CONCENTRATION * p, CONCENTRATION * (1 - p), POOL)  # the eval's cases
    rates = np.array([rate(j) for j in range(k)])
    spec = make_spec(k=k, threshold=0.5)
    for _ in range(count):
        yield decide(spec, DESIGNS[design](rng, pool, p, n, rates))


def quarantined(decisions: Iterator[Decision]) -> list[Decision]:
    return [decision for decision in decisions if decision.status is Status.QUARANTINE]


# --- honest probes: binomial noise is not flakiness --------------------------------------


@pytest.mark.parametrize("k", [7, 15])
@pytest.mark.parametrize("design", ["fixed", "sampled"])
def test_honest_item_evals_are_quarantined_about_as_often_as_the_test_level(
    design: str, k: int
) -> None:
    counts = {}
    for p in RATES:
        for n in SIZES:
            found = quarantined(probes(design, p, n, k, PROBES, rate=steady(p)))
            counts[p, n] = len(found)
            # Nothing but the item test's 1% may fire: the widened fence never does.
            assert all(d.reason.startswith("between-trial variance") for d in found)
    # At the test's 1% level a population of 300 expects 3 (sd 1.7); 9 is 3.5 sd out.
    assert max(counts.values()) <= 0.03 * PROBES, counts
    # All twelve together: 3,600 probes, 36 expected at 1% (sd 6); 1.6% is 58.
    assert sum(counts.values()) <= 0.016 * PROBES * len(counts), counts


@pytest.mark.parametrize("k", [7, 15])
def test_the_score_only_rule_would_quarantine_most_of_the_same_honest_probes(k: int) -> None:
    """Why the item test is needed: the binomial noise of 50 items at p = 0.9 is an sd of
    0.042, 1.9 times the sd of an IQR of F, which the spread test calls unstable (the IQR
    rule did so in 71% of probes at K = 7, 88% at K = 15)."""
    rng = np.random.default_rng(k)
    spec = make_spec(k=k, threshold=0.5)
    decisions = []
    for _ in range(PROBES):
        scores = (rng.binomial(50, 0.9, k) / 50).tolist()
        decisions.append(
            decide(spec, [TrialRecord(index=j, seed=j, score=s) for j, s in enumerate(scores)])
        )

    share = len(quarantined(iter(decisions))) / PROBES

    assert share > {7: 0.5, 15: 0.8}[k]


# --- probes whose trials really differ ------------------------------------------------------


@pytest.mark.parametrize("k", [7, 15])
@pytest.mark.parametrize("design", ["fixed", "sampled"])
def test_half_the_trials_at_a_lower_rate_are_caught(design: str, k: int) -> None:
    """Half the trials at p = 0.9, half at 0.6, over 50 items."""
    found = quarantined(probes(design, 0.9, 50, k, 300, rate=lambda j: 0.9 if j % 2 else 0.6))

    assert len(found) >= 0.9 * 300


@pytest.mark.parametrize("k", [7, 15])
@pytest.mark.parametrize("design", ["fixed", "sampled"])
def test_one_trial_collapsing_to_20_percent_is_caught_by_the_fence(design: str, k: int) -> None:
    """p = 0.9 over 50 items, and one trial (the last) at 0.2: a judge that broke, say."""
    decisions = list(probes(design, 0.9, 50, k, 300, rate=lambda j: 0.2 if j == k - 1 else 0.9))

    fenced = [d for d in decisions if d.reason.startswith(f"trial {k - 1} ")]

    assert len(fenced) >= 0.99 * 300
    assert all("collapsed to" in d.reason for d in fenced)


@pytest.mark.parametrize("design", ["fixed", "sampled"])
def test_one_trial_dropping_twenty_points_is_caught_at_200_items(design: str) -> None:
    """p = 0.9 over 200 items, K = 15, one trial at 0.7: 9 binomial sd below the rest.

    (At 50 items the same drop is 4.7 sd: about as far as the binomial's lower
    tail reaches by itself in a probe of 15, so no rule can catch it without
    quarantining honest probes too.)
    """
    found = quarantined(probes(design, 0.9, 200, 15, 200, rate=lambda j: 0.7 if j == 14 else 0.9))

    assert len(found) >= 0.9 * 200
