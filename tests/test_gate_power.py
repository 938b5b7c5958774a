"""`firewall list` says what each gate can do at its k, checked against scipy."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import make_spec
from click.testing import CliRunner
from scipy import stats

from firewall._stats import wilson_interval
from firewall.cli import main
from firewall.spec import pass_chance, power_notes


@pytest.mark.parametrize(("k", "rate", "bar"), [(30, 0.95, 0.8), (60, 0.97, 0.9), (7, 0.9, 0.5)])
def test_pass_chance_is_the_binomial_tail_past_the_wilson_bar(
    k: int, rate: float, bar: float
) -> None:
    needed = min(s for s in range(k + 1) if wilson_interval(s, k, 0.95)[0] >= bar)
    assert pass_chance(k, rate, bar, 0.95) == pytest.approx(stats.binom.sf(needed - 1, k, rate))


def test_the_contracts_example_pass_rate_gate() -> None:
    # The example: a true 0.95 passes min_pass_rate 0.8 at k = 30 in about 55% of runs.
    (note,) = power_notes(make_spec(k=30, min_pass_rate=0.8))
    assert note.startswith("a true pass rate of 0.95 passes 5") and "k >= " in note
    assert pass_chance(30, 0.95, 0.8, 0.95) == pytest.approx(0.55, abs=0.03)


def test_the_collapse_rule_says_how_often_k_trials_see_a_ten_percent_collapse() -> None:
    (seven,) = power_notes(make_spec(k=7))
    assert seven == "a 10% collapse shows in 52% of probes at k=7; k >= 16 for 80%"
    (forty,) = power_notes(make_spec(k=40))
    assert forty == "a 10% collapse shows in 99% of probes at k=40"


def test_list_prints_them_and_json_carries_them(project: Path) -> None:
    (project / "firewall.toml").write_text('[[evals]]\nid = "a"\ncommand = "true"\n')
    text = CliRunner().invoke(main, ["list"]).output
    assert "what each gate can do at its k:" in text and "a: a 10% collapse shows in 52%" in text
    import json

    (entry,) = json.loads(CliRunner().invoke(main, ["list", "--format", "json"]).output)
    assert entry["power"] == ["a 10% collapse shows in 52% of probes at k=7; k >= 16 for 80%"]
