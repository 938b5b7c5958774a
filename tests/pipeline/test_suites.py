"""JUnit suites: every case of a real test runner's report is an eval of its own."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from firewall.cli import main

SAMPLES = Path(__file__).parent.parent / "data" / "junit"

TESTS = """\
import os

import pytest


def test_steady():
    assert True


def test_broken():
    assert 1 == 2, "always"


def test_flaky():
    # fails on every other trial: on the same code, a classic flaky test
    assert int(os.environ["FIREWALL_TRIAL"]) % 2 == 0, "odd trial"


@pytest.mark.skip(reason="later")
def test_later():
    pass
"""


def suite_config(command: str, k: int = 4, extra: str = "") -> str:
    return (
        f'k = {k}\nconcurrency = 2\n[[evals]]\nid = "shop"\n'
        f'command = {json.dumps(command)}\nresult = "junit"\n{extra}'
    )


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def report(root: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((root / "firewall-report.json").read_text())
    return {e["id"]: e for e in data["evals"]}


@pytest.fixture
def pytest_suite(project: Path) -> Path:
    (project / "suite").mkdir()
    (project / "suite" / "test_shop.py").write_text(TESTS)
    command = (
        f"{sys.executable} -m pytest -q -p no:cacheprovider -o junit_family=xunit1 "
        "--junitxml={result} suite"
    )
    (project / "firewall.toml").write_text(suite_config(command))
    return project


def test_each_case_of_a_real_pytest_suite_is_decided_as_a_plain_test(pytest_suite: Path) -> None:
    result = invoke("run")
    evals = report(pytest_suite)
    assert set(evals) == {
        "shop/suite/test_shop.py/test_steady",
        "shop/suite/test_shop.py/test_broken",
        "shop/suite/test_shop.py/test_flaky",
    }, "the skipped case never ran: no eval"
    steady = evals["shop/suite/test_shop.py/test_steady"]
    assert steady["status"] == "pass" and steady["reason"] == "passed in 4 of 4 runs"
    broken = evals["shop/suite/test_shop.py/test_broken"]
    assert broken["status"] == "fail" and "failed in 4 of 4 runs" in str(broken["reason"])
    assert "always" in str(broken["reason"])
    assert broken["source"] == {"file": "suite/test_shop.py", "line": 10}  # its def
    flaky = evals["shop/suite/test_shop.py/test_flaky"]
    assert flaky["status"] == "quarantine"
    assert str(flaky["reason"]).startswith("passed 2 and failed 2 of 4 runs on the same code")
    assert result.exit_code == 1  # the broken case blocks; the flaky one is quarantined
    entries = json.loads((pytest_suite / "quarantine.json").read_text())["evals"]
    assert list(entries) == ["shop/suite/test_shop.py/test_flaky"]


def test_a_quarantined_case_still_runs_and_never_blocks(pytest_suite: Path) -> None:
    invoke("run")
    (pytest_suite / "suite" / "test_shop.py").write_text(TESTS.replace("1 == 2", "1 == 1"))
    second = invoke("run")
    flaky = report(pytest_suite)["shop/suite/test_shop.py/test_flaky"]
    assert flaky["status"] == "quarantined" and flaky["blocking"] is False
    assert len(flaky["trials"]) == 4
    assert second.exit_code == 0, second.output


def test_the_nightly_re_probes_a_quarantined_case_through_its_suite(pytest_suite: Path) -> None:
    invoke("run")
    nightly = invoke("nightly", "--no-issues")
    assert nightly.exit_code == 0, nightly.output
    data = json.loads((pytest_suite / "firewall-report.json").read_text())
    assert [e["id"] for e in data["evals"]] == ["shop/suite/test_shop.py/test_flaky"]


@pytest.mark.parametrize(
    "sample, expected",
    [
        (
            "go.xml",
            {
                "example.com/shop/cart.TestAdd": "pass",
                "example.com/shop/cart.TestTotalWithCoupon": "fail",
            },
        ),
        ("jest.xml", {"checkout_adds_an_item": "pass", "checkout_pays_with_a_card": "fail"}),
        (
            "nextest.xml",
            {
                "shop.tests.adds": "pass",
                "shop.tests.flaky_total": "fail",
                "shop.tests.timeout": "fail",
            },
        ),
    ],
)
def test_reports_of_other_runners_are_suites_too(
    project: Path, sample: str, expected: dict[str, str]
) -> None:
    shutil.copy(SAMPLES / sample, project / sample)
    (project / "firewall.toml").write_text(suite_config(f"cp {sample} {{result}}", k=3))
    invoke("run")
    statuses = {eval_id.split("/", 1)[1]: e["status"] for eval_id, e in report(project).items()}
    assert statuses == expected


def test_a_suite_that_writes_no_report_is_one_eval_that_errors(project: Path) -> None:
    (project / "firewall.toml").write_text(suite_config("echo no tests here; exit 2", k=3))
    result = invoke("run")
    (evaluation,) = report(project).values()
    assert evaluation["id"] == "shop" and evaluation["status"] == "error"
    assert "no JUnit XML" in str(evaluation["reason"]) and "exit status 2" in str(
        evaluation["reason"]
    )
    assert result.exit_code == 3


def test_a_case_missing_from_some_runs_says_so(project: Path) -> None:
    script = project / "report.sh"
    script.write_text(
        'if [ "$FIREWALL_TRIAL" = 0 ]; then extra="<testcase name=\'new\'/>"; fi\n'
        'echo "<testsuite><testcase name=\'old\'/>$extra</testsuite>" > "$FIREWALL_RESULT"\n'
    )
    (project / "firewall.toml").write_text(suite_config("sh report.sh", k=3))
    invoke("run")
    evals = report(project)
    assert evals["shop/new"]["reason"] == "passed in 1 of 1 runs, in 1 of 3 trials"
    assert evals["shop/old"]["reason"] == "passed in 3 of 3 runs"


def test_junit_xml_must_name_a_file_per_trial(project: Path) -> None:
    (project / "firewall.toml").write_text(suite_config("true", extra='junit_xml = "out.xml"\n'))
    result = invoke("list")
    assert result.exit_code == 2 and "`junit_xml` needs {trial} in it" in result.output


def write_registry(path: Path, *eval_ids: str) -> None:
    entries = {
        eval_id: {"since": "2026-11-29T21:00:00Z", "source": "manual", "reason": "flaky"}
        for eval_id in eval_ids
    }
    path.write_text(json.dumps({"schema_version": 1, "evals": entries}))


def test_a_quarantine_made_through_the_pytest_plugin_holds_for_the_suites_case(
    project: Path,
) -> None:
    """pytest's default JUnit family (xunit2) names no file: the case's node id is read back
    from its dotted classname, and the plugin's id for it is its case id."""
    (project / "suite").mkdir()
    (project / "suite" / "test_shop.py").write_text(TESTS)
    command = f"{sys.executable} -m pytest -q -p no:cacheprovider --junitxml={{result}} suite"
    (project / "firewall.toml").write_text(suite_config(command, k=3))
    # what `pytest --firewall-k` or `firewall quarantine add suite/test_shop.py::test_flaky`
    # writes: the test's own id, without the suite
    write_registry(project / "quarantine.json", "suite/test_shop.py/test_flaky")

    result = invoke("run")

    flaky = report(project)["shop/suite/test_shop.py/test_flaky"]
    assert flaky["status"] == "quarantined" and flaky["blocking"] is False
    # test_broken fails every run: not quarantined, it blocks
    assert result.exit_code == 1, result.output


PROMPTFOO = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="promptfoo" tests="{n}">
  <testsuite name="[echo] prompt 1" tests="{n}">
{cases}
  </testsuite>
</testsuites>
"""


def promptfoo_xml(*cases: tuple[str, bool]) -> str:
    """promptfoo's JUnit XML for tests in this order: (description or "", passed)."""
    lines = []
    for index, (description, passed) in enumerate(cases, start=1):
        name = f"test {index}: {description}" if description else f"test {index}"
        failure = "" if passed else '<failure message="Assertion failed" type="assertion"/>'
        lines.append(
            f'    <testcase classname="[echo] prompt 1" name="{name}">{failure}</testcase>'
        )
    return PROMPTFOO.format(n=len(cases), cases="\n".join(lines))


def test_a_reordered_promptfoo_suite_hands_no_quarantine_to_the_test_in_its_place(
    project: Path,
) -> None:
    """A failing test inserted first becomes `test 1`, the id of a quarantined test without a
    description: it is decided afresh, and fails the build. A described test keeps its
    quarantine wherever it moves."""
    (project / "report.xml").write_text(
        # the described test passes today: still quarantined (failing every run, it would be
        # broken, not flaky, and block)
        promptfoo_xml(("", False), ("greets the customer", True), ("", True))
    )
    (project / "firewall.toml").write_text(suite_config("cp report.xml {result}", k=3))
    write_registry(
        project / "quarantine.json",
        "shop/echo__prompt_1.test_1",  # the old first test, flaky, had no description
        "shop/echo__prompt_1.greets_the_customer",
    )

    result = invoke("run")

    evals = report(project)
    newcomer = evals["shop/echo__prompt_1.test_1"]
    assert newcomer["status"] == "fail" and newcomer["blocking"] is True
    assert "known by its place in the suite's report alone" in str(newcomer["reason"])
    assert "the registry's entry for this id (since 2026-11-29) is not honoured" in str(
        newcomer["reason"]
    )
    assert evals["shop/echo__prompt_1.greets_the_customer"]["status"] == "quarantined"
    third = evals["shop/echo__prompt_1.test_3"]
    assert third["status"] == "pass" and "no quarantine follows it" in str(third["reason"])
    assert result.exit_code == 1
    assert "its quarantine is not honoured" in result.output  # said in the run's output too


def reproduce_line(root: Path, eval_id: str) -> list[str]:
    """The `reproduce:` line the JUnit rendering of the run's report prints for ``eval_id``,
    split as a shell would, without its leading `firewall`."""
    rendered = invoke("report", "firewall-report.json", "--junit")
    assert rendered.exit_code == 0, rendered.output
    for case in ET.fromstring(rendered.output).iter("testcase"):
        if case.get("name") == eval_id:
            for line in "".join(case.itertext()).splitlines():
                if line.startswith("reproduce: "):
                    command = shlex.split(line.removeprefix("reproduce: "))
                    assert command[0] == "firewall"
                    return command[1:]
    raise AssertionError(f"no reproduce line for {eval_id}:\n{rendered.output}")


def test_the_reproduce_line_of_a_pytest_case_reruns_that_case_alone(pytest_suite: Path) -> None:
    invoke("run")
    flaky = "shop/suite/test_shop.py/test_flaky"
    failed = next(t for t in report(pytest_suite)[flaky]["trials"] if not t["passed"])

    replayed = invoke(*reproduce_line(pytest_suite, flaky))

    assert replayed.exit_code == 0, replayed.output
    assert f"# {flaky} trial {failed['index']}: failed: AssertionError: odd trial" in (
        replayed.output
    )
    assert "the suite's command ran this case alone (FIREWALL_SELECT)" in replayed.output
    assert "1 failed, 3 deselected" in replayed.output  # pytest ran the one test
    assert f"seed {failed['seed']}, not passed to the suite's command" in replayed.output


def test_replaying_a_case_of_a_suite_that_cannot_select_shows_it_among_the_rest(
    project: Path,
) -> None:
    shutil.copy(SAMPLES / "jest.xml", project / "jest.xml")
    (project / "firewall.toml").write_text(suite_config("cp jest.xml {result} # {seed}", k=3))

    replayed = invoke("replay", "shop/checkout_pays_with_a_card", "--seed", "7", "--trial", "1")

    assert replayed.exit_code == 0, replayed.output
    assert "# shop/checkout_pays_with_a_card trial 1: failed: Error: expect" in replayed.output
    assert "the suite's command ran 2 cases (it does not select one" in replayed.output
    assert "seed 7, passed to the suite's command as {seed}" in replayed.output


def test_replaying_a_case_the_suite_does_not_have_says_so(project: Path) -> None:
    shutil.copy(SAMPLES / "go.xml", project / "go.xml")
    (project / "firewall.toml").write_text(suite_config("cp go.xml {result}", k=3))

    replayed = invoke("replay", "shop/TestGone", "--seed", "7")
    unknown = invoke("replay", "nope/TestGone", "--seed", "7")

    assert replayed.exit_code == 3, replayed.output
    assert "# shop/TestGone trial 0: did not run: it is not in the suite's report" in (
        replayed.output
    )
    assert unknown.exit_code == 2 and "nope/TestGone" in unknown.output
