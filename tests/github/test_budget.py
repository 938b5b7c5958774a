"""The run's one time budget for GitHub: a deadline for every call, and a config key.

Plain calls of ``Budget``; the GitHub behind it is in test_github_faults.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from firewall.configfile import load_config
from firewall.errors import ConfigError
from firewall.github.budget import Budget, BudgetSpent, spent_warning
from firewall.github.problems import answer_problem


class Clock:
    """A clock that moves only when told: time spent inside or outside calls, by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def passes(self, seconds: float) -> None:
        self.now += seconds


def test_a_call_within_the_budget_returns_what_it_returns_and_raises_what_it_raises() -> None:
    budget = Budget(30)

    assert budget.run(lambda: 42) == 42
    with pytest.raises(KeyError, match="gone"):
        budget.run(lambda: {"here": 1}["gone"])
    assert not budget.spent


def test_only_the_time_inside_calls_counts() -> None:
    clock = Clock()
    budget = Budget(25, clock=clock)

    def ten_seconds_of_github() -> str:
        clock.passes(10)
        return "done"

    budget.run(ten_seconds_of_github)
    clock.passes(3600)  # an hour of probing between two syncs costs the budget nothing
    budget.run(ten_seconds_of_github)
    assert budget.remaining() == 5
    assert budget.run(ten_seconds_of_github) == "done", "a call that returned is kept"

    assert budget.spent
    with pytest.raises(BudgetSpent) as raised:
        budget.run(ten_seconds_of_github)
    assert raised.value.cut_off is False
    assert clock.now == 1000 + 3600 + 30, "the call after the end never ran"


def test_a_call_past_the_deadline_is_abandoned_and_nothing_runs_after_it() -> None:
    budget = Budget(0.3)
    release = threading.Event()
    try:
        with pytest.raises(BudgetSpent) as raised:
            budget.run(lambda: release.wait(60))  # a server that trickles for ever
        assert not release.is_set(), "the run went on without waiting for the call"
        assert raised.value.cut_off is True and budget.spent

        ran: list[int] = []
        with pytest.raises(BudgetSpent) as again:
            budget.run(lambda: ran.append(1))
        assert ran == [] and again.value.cut_off is False
        with pytest.raises(BudgetSpent):
            budget.check()  # what PyGithub's next request of the abandoned call meets
    finally:
        release.set()


def test_a_call_inside_a_call_is_part_of_it() -> None:
    clock = Clock()
    budget = Budget(30, clock=clock)

    def outer() -> int:
        clock.passes(4)
        return budget.run(lambda: 1) + 1

    assert budget.run(outer) == 2
    assert budget.remaining() == 26, "counted once"


def test_a_budget_is_seconds_above_zero() -> None:
    with pytest.raises(ValueError, match="above 0"):
        Budget(0)


def test_the_warning_says_what_ran_out_what_was_skipped_and_what_to_do() -> None:
    spent = BudgetSpent(seconds=30, cut_off=True).doing("open an issue for tone")

    warning = spent_warning(spent, "the issues of tone, refusals")

    assert warning == (
        "GitHub had not finished when this run's 30 s for GitHub (`[github] budget`) ran out, "
        "while the firewall tried to open an issue for tone; skipped the rest of this run's "
        "GitHub work (the issues of tone, refusals); the decision and exit code stand, and "
        "the next run catches up; if GitHub is only slow, raise `[github] budget`"
    )
    before = BudgetSpent(seconds=2.5, cut_off=False).doing("close the issue for tone")
    assert str(before) == (
        "this run's 2.5 s for GitHub (`[github] budget`) had run out before the firewall "
        "could close the issue for tone"
    )


def test_what_pygithub_raised_on_an_answer_says_what_was_wrong_with_it() -> None:
    with pytest.raises(json.JSONDecodeError) as not_json:
        json.loads("{not json")
    assert answer_problem(not_json.value) == (
        "not JSON: Expecting property name enclosed in double quotes at character 1"
    )
    assert answer_problem(TypeError("string indices must be integers\nmore")) == (
        "not the JSON it expected: TypeError: string indices must be integers"
    )


# --- the config key


def settings_with(project: Path, value: str) -> float:
    (project / "firewall.toml").write_text(f"[github]\nbudget = {value}\n")
    return load_config().settings.github.budget


def test_the_budget_defaults_to_thirty_seconds_and_takes_a_number(project: Path) -> None:
    (project / "firewall.toml").write_text("k = 5\n")
    assert load_config().settings.github.budget == 30
    assert settings_with(project, "2.5") == 2.5
    assert settings_with(project, "120") == 120


@pytest.mark.parametrize("value", ["0", "-5", "3601", "nan", "inf"])
def test_a_budget_out_of_range_names_the_key_and_what_is_allowed(project: Path, value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        settings_with(project, value)
    assert str(raised.value) == (
        "firewall.toml: github.budget: expected the seconds all GitHub calls of one run may "
        f"take together, above 0 and at most 3600 (an hour), e.g. 30 (got {value})"
    )


@pytest.mark.parametrize("value", ['"30"', "true"])
def test_a_budget_that_is_not_a_number_is_refused(project: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"^firewall\.toml: github\.budget: Input should be"):
        settings_with(project, value)
