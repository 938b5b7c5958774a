"""A plain test reads the same through every door: a JUnit suite's case, an exit-code
command, a test the pytest plugin probed. Same trials, same status as before, one wording:
"passed N and failed M of K runs on the same code: a flaky test; first failure, trial I
(seed S): <message>", and a checklist without fence arithmetic."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from builders import make_spec
from click.testing import CliRunner

from firewall.adaptive import conclude
from firewall.cli import main
from firewall.diagnostics import format_check
from firewall.policy import Decision, Status, is_plain_test
from firewall.runner.trial import TrialRecord, error_record
from firewall.spec import EvalSpec

MESSAGE = "AssertionError: assert 1 == 2"


def exit_code_eval(**overrides: object) -> EvalSpec:
    return make_spec(id="shop-check", result="exit-code", **overrides)


def plugin_test(**overrides: object) -> EvalSpec:
    # As firewall.pytest_plugin.probe.Probe.spec makes it: an exit-code eval, fixed K.
    return make_spec(id="test_shop.py/test_refund", result="exit-code", adaptive=False, **overrides)


def junit_case(**overrides: object) -> EvalSpec:
    # As firewall.pipeline.suites makes it: the suite's spec, with the case's id and suite.
    return make_spec(
        id="shop/test_refund", result="junit", suite="shop", adaptive=False, **overrides
    )


DOORS = {"exit-code": exit_code_eval, "plugin": plugin_test, "junit": junit_case}


def runs(spec: EvalSpec, outcomes: str) -> list[TrialRecord]:
    """Trials as the spec's door records them: "p" passed, "f" failed, "e" errored.

    A JUnit case's failure message is in ``fields["failure"]`` (pipeline.suites); a
    command's, and the plugin's pytest message, in ``output``.
    """
    records = []
    for index, outcome in enumerate(outcomes):
        seed = 1000 + index
        if outcome == "e":
            records.append(
                error_record(
                    index=index, seed=seed, error="exit status 2", duration_s=0, in_flight=1
                )
            )
            continue
        passed = outcome == "p"
        said = None if passed else MESSAGE
        records.append(
            TrialRecord(
                index=index,
                seed=seed,
                score=float(passed),
                passed=passed,
                fields={"failure": said} if said and spec.suite is not None else {},
                output=said if spec.suite is None else None,
            )
        )
    return records


def through(door: str, outcomes: str, **overrides: object) -> Decision:
    spec = DOORS[door](k=len(outcomes), **overrides)
    concluded = conclude(spec, runs(spec, outcomes))
    assert concluded is not None
    return concluded[0]


def checklist(decision: Decision) -> list[str]:
    return [format_check(check) for check in decision.checks]


def test_every_door_marks_a_plain_test() -> None:
    assert all(is_plain_test(door()) for door in DOORS.values())
    assert not is_plain_test(make_spec(result="json"))
    assert not is_plain_test(make_spec(result="junit")), "a suite itself scores its cases' share"


@pytest.mark.parametrize(
    ("outcomes", "status", "reason", "checks"),
    [
        (
            "ppfpppp",
            Status.QUARANTINE,
            "passed 6 and failed 1 of 7 runs on the same code: a flaky test; "
            f"first failure, trial 2 (seed 1002): {MESSAGE}",
            ["ok   errors 0 <= 0", "FAIL flaky: passed 6, failed 1 of 7"],
        ),
        (
            "ppppppp",
            Status.PASS,
            "passed in 7 of 7 runs",
            ["ok   errors 0 <= 0", "ok   runs: passed 7 of 7"],
        ),
        (
            "fffffff",
            Status.FAIL,
            f"failed in 7 of 7 runs; first failure, trial 0 (seed 1000): {MESSAGE}",
            ["ok   errors 0 <= 0", "FAIL runs: failed 7 of 7"],
        ),
        (
            "pfpfpfp",
            Status.QUARANTINE,
            "passed 4 and failed 3 of 7 runs on the same code: a flaky test; "
            f"first failure, trial 1 (seed 1001): {MESSAGE}",
            ["ok   errors 0 <= 0", "FAIL flaky: passed 4, failed 3 of 7"],
        ),
    ],
)
def test_the_same_trials_read_the_same_through_every_door(
    outcomes: str, status: Status, reason: str, checks: list[str]
) -> None:
    for door in DOORS:
        decision = through(door, outcomes)
        assert (door, decision.status) == (door, status), "the decision itself never changed"
        assert (door, decision.reason) == (door, reason)
        assert (door, checklist(decision)) == (door, checks)


def test_no_fence_arithmetic_is_left_in_a_plain_test() -> None:
    for door in DOORS:
        decision = through(door, "ppfpppp")
        assert not re.search(r"iqr|fence|collapsed|median|q1", decision.reason), door
        assert {check.name for check in decision.checks} == {"errors", "flaky"}, door


def test_one_test_is_one_decision_whichever_door_it_came_through() -> None:
    # Most runs failed, one passed: the rule table calls it broken (its median is 0, below
    # the threshold) through every door; a JUnit case was flaky once it passed and failed.
    exit_code, plugin, case = (through(door, "fffpfff") for door in DOORS)
    assert exit_code.status is plugin.status is case.status is Status.FAIL
    counted = "passed 1 and failed 6 of 7 runs on the same code"
    assert (
        exit_code.reason
        == plugin.reason
        == case.reason
        == (
            f"{counted}: most runs failed, a broken test more than a flaky one; "
            f"first failure, trial 0 (seed 1000): {MESSAGE}"
        )
    )
    assert checklist(exit_code)[-1] == checklist(case)[-1] == "FAIL runs: passed 1, failed 6 of 7"


def test_the_pass_rate_gate_and_a_fence_turned_off_say_why_a_failure_did_not_quarantine() -> None:
    gated = through("exit-code", "ppfpppp", min_pass_rate=0.9, adaptive=False)
    assert gated.status is Status.FAIL
    assert gated.reason.startswith(
        "passed 6 and failed 1 of 7 runs on the same code: wilson lower bound 0.487 < "
        "min_pass_rate 0.9; first failure, trial 2"
    )
    assert checklist(gated)[1:] == [
        "ok   runs: passed 6, failed 1 of 7",
        "FAIL wilson lower bound 0.487 < 0.9",
    ]
    unfenced = through("plugin", "ppfpppp", outlier_fence=0.0)
    assert unfenced.status is Status.PASS
    assert "outlier_fence 0 counts no failure among passes as flaky" in unfenced.reason


def test_tolerated_errors_are_counted_apart_from_the_runs() -> None:
    for door in DOORS:
        decision = through(door, "ppfeppp", max_errors=1)
        assert decision.status is Status.QUARANTINE, door
        assert decision.reason.startswith(
            "passed 5 and failed 1 of 6 runs on the same code (1 of 7 trials errored): "
            "a flaky test; first failure, trial 2"
        ), door


def test_an_adaptive_exit_code_eval_settled_early_says_the_same() -> None:
    spec = exit_code_eval(k=7, adaptive=True)
    concluded = conclude(spec, runs(spec, "pffp"))
    assert concluded is not None
    decision, stop = concluded
    assert stop.why == "settled" and decision.status is Status.QUARANTINE
    assert decision.reason == (
        "passed 2 and failed 2 of 4 runs on the same code: a flaky test; first failure, "
        f"trial 1 (seed 1001): {MESSAGE}; stopped after 4 of 7 trials"
    )
    assert checklist(decision) == ["FAIL flaky: passed 2, failed 2 of 4"]


def test_a_long_message_is_quoted_by_its_end() -> None:
    spec = exit_code_eval(k=7, adaptive=False)
    records = runs(spec, "ppfpppp")
    records[2] = records[2].model_copy(update={"output": "noise\n" * 200 + "FAILED: the end"})
    concluded = conclude(spec, records)
    assert concluded is not None
    assert concluded[0].reason.endswith("| noise | FAILED: the end")
    assert "…" in concluded[0].reason and len(concluded[0].reason) < 500


# --- real commands -------------------------------------------------------------------------

FLAKY_TEST = """\
import os


def test_refund():
    assert os.environ["FIREWALL_TRIAL"] != "2", "refund lost on trial 2"
"""


def test_a_real_pytest_run_reads_the_same_as_a_junit_case_and_an_exit_code_command(
    project: Path,
) -> None:
    (project / "test_shop.py").write_text(FLAKY_TEST)
    pytest_cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider test_shop.py"
    (project / "firewall.toml").write_text(
        "k = 5\nconcurrency = 2\nadaptive = false\n"
        f'[[evals]]\nid = "suite"\ncommand = {json.dumps(pytest_cmd + " --junitxml={result}")}\n'
        'result = "junit"\n'
        f'[[evals]]\nid = "command"\ncommand = {json.dumps(pytest_cmd)}\nresult = "exit-code"\n'
    )
    result = CliRunner().invoke(main, ["run", "--no-issues"])
    assert result.exit_code == 0, result.output  # both quarantined: nothing blocks
    evals = {
        e["id"]: e for e in json.loads((project / "firewall-report.json").read_text())["evals"]
    }
    case, command = evals["suite/test_shop.py/test_refund"], evals["command"]
    for decided in (case, command):
        assert decided["status"] == "quarantine"
        said = re.fullmatch(r"(.*); first failure, trial 2 \(seed \d+\): (.*)", decided["reason"])
        assert said is not None, decided["reason"]
        head, message = said.groups()
        assert head == "passed 4 and failed 1 of 5 runs on the same code: a flaky test"
        assert "refund lost on trial 2" in message, decided["reason"]  # its words, either door
        assert [c["name"] for c in decided["checks"]] == ["errors", "flaky"]
