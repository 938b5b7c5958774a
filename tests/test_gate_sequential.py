"""The pass-rate gate under adaptive K (issue 23, item 2): its error spent over its looks,
and the power `firewall list` states for the rule as it runs."""

from __future__ import annotations

import random

import pytest
from builders import make_spec, trial
from click.testing import CliRunner

from firewall import adaptive
from firewall._stats import wilson_looks_pass
from firewall.cli import main
from firewall.policy import Status, decide, gate_confidence, looks
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec, pass_chance


def gate(k: int, max_k: int, bar: float, **extra: object) -> EvalSpec:
    return make_spec(k=k, max_k=max_k, min_pass_rate=bar, threshold=0.0, pass_score=0.5, **extra)


def run(spec: EvalSpec, rate: float, rng: random.Random) -> tuple[Status, int]:
    """One probe as the runner's schedule hands its trials out (the planned ones first, an
    extension's all in before it is judged), decided by ``adaptive.conclude``."""
    trials: list[TrialRecord] = []
    target = spec.k
    while len(trials) < target:
        passed = rng.random() < rate
        trials.append(trial(1.0 if passed else 0.0, index=len(trials), passed=passed))
        if len(trials) < spec.k or len(trials) == target:
            target = adaptive.wanted(spec, trials)
    concluded = adaptive.conclude(spec, trials)
    assert concluded is not None
    return concluded[0].status, len(trials)


def test_each_look_is_at_the_confidence_the_looks_leave_it() -> None:
    """Between the Bonferroni share and the whole: the least strict confidence whose looks
    together pass an eval at the bar at most 2.5% of the time, and no less strict."""
    spec = gate(7, 15, 0.5)
    assert looks(spec) == 4
    confidence = gate_confidence(spec)
    assert 1 - 0.05 / 4 >= confidence > 0.95
    assert wilson_looks_pass(7, 15, 3, 0.5, confidence, 0.5) <= 0.025
    assert wilson_looks_pass(7, 15, 3, 0.5, confidence - 0.002, 0.5) > 0.025
    assert gate_confidence(gate(7, 7, 0.5)) == 0.95
    assert gate_confidence(gate(7, 15, 0.5, adaptive=False)) == 0.95


def test_a_fixed_gates_power_is_the_binomial_tail() -> None:
    spec = gate(30, 30, 0.8)
    assert adaptive.gate_power(spec, 0.95) == pytest.approx(pass_chance(30, 0.95, 0.8, 0.95))


@pytest.mark.parametrize(
    ("k", "max_k", "bar"), [(7, 14, 0.5), (7, 15, 0.6), (10, 20, 0.6), (30, 60, 0.8)]
)
def test_at_the_bar_the_gate_passes_at_most_its_nominal_share_however_it_extends(
    k: int, max_k: int, bar: float
) -> None:
    """Exactly (the binomial carried through every look): at a true rate equal to
    min_pass_rate, at most (1 - confidence) / 2 = 2.5% of runs pass; below it, fewer."""
    spec = gate(k, max_k, bar)
    assert adaptive.gate_power(spec, bar) <= 0.025
    assert adaptive.gate_power(spec, bar - 0.05) <= adaptive.gate_power(spec, bar)


@pytest.mark.parametrize(
    ("k", "max_k", "bar", "rate"), [(7, 15, 0.5, 0.875), (10, 20, 0.6, 0.6), (20, 40, 0.8, 0.95)]
)
def test_the_stated_power_is_what_the_rule_does_when_it_runs(
    k: int, max_k: int, bar: float, rate: float
) -> None:
    spec = gate(k, max_k, bar)
    rng = random.Random(k)
    probes = 4000
    passed = sum(run(spec, rate, rng)[0] is Status.PASS for _ in range(probes))
    chance = adaptive.gate_power(spec, rate)
    se = (chance * (1 - chance) / probes) ** 0.5
    assert abs(passed / probes - chance) <= 4 * se + 1e-3


def test_a_failing_reason_names_the_looks() -> None:
    spec = gate(7, 15, 0.6)
    records = [trial(float(i < 4), index=i, passed=i < 4) for i in range(7)]
    decision = decide(spec, records)
    assert decision.status is Status.FAIL
    assert decision.reason.endswith(
        f"at {gate_confidence(spec):.4g} confidence (0.95 spent over 4 looks)"
    )


def test_list_states_the_power_of_the_rule_as_it_runs(project) -> None:  # type: ignore[no-untyped-def]
    (project / "firewall.toml").write_text(
        '[[evals]]\nid = "gate"\ncommand = "true"\nk = 10\nmax_k = 20\nmin_pass_rate = 0.6\n'
    )
    text = CliRunner().invoke(main, ["list"]).output
    spec = gate(10, 20, 0.6)
    chance = adaptive.gate_power(spec, 0.9)
    assert (
        f"gate: a true pass rate of 0.9 passes {chance:.0%} of runs at k=10, extended up to "
        f"max_k 20 (4 looks, each at {gate_confidence(spec):.4g} confidence)"
    ) in text
