"""Broken is not flaky, and a case is an eval everywhere (contract §4).

A quarantined eval or suite case whose probe fails in every trial, or is stable below
its threshold, is FAIL: it blocks as the eval does, wherever it is probed (a pull
request, `--include-quarantined`), and the nightly shows it as FAIL (the nightly never
blocks). The nightly re-probes a quarantined case through its suite, never calls a live
case undefined, and releases a fixed one; `firewall status` knows a case and a pytest
test from an id that is gone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from firewall.cli import main

TESTS = """\
import os


def test_steady():
    assert True


def test_flaky():
    assert {condition}, "odd trial"
"""
FLAKY = 'int(os.environ["FIREWALL_TRIAL"]) % 2 == 0'


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def evals(root: Path) -> dict[str, dict[str, object]]:
    data = json.loads((root / "firewall-report.json").read_text())
    return {str(e["id"]).rsplit("test_", 1)[-1]: e for e in data["evals"]}


def registry(root: Path) -> dict[str, object]:
    path = root / "quarantine.json"
    return json.loads(path.read_text())["evals"] if path.exists() else {}


def write_tests(root: Path, condition: str) -> None:
    (root / "suite" / "test_shop.py").write_text(TESTS.format(condition=condition))


@pytest.fixture
def suite(project: Path) -> Path:
    (project / "suite").mkdir()
    write_tests(project, FLAKY)
    command = (
        f"{sys.executable} -m pytest -q -p no:cacheprovider -o junit_family=xunit1 "
        "--junitxml={result} suite"
    )
    (project / "firewall.toml").write_text(
        f"k = 4\nconcurrency = 2\n[nightly]\nk = 30\nrelease_after = 2\n"
        f'[[evals]]\nid = "shop"\ncommand = {json.dumps(command)}\nresult = "junit"\n'
    )
    first = invoke("run")
    assert first.exit_code == 0, first.output
    assert [str(i).rsplit("test_", 1)[-1] for i in registry(project)] == ["flaky"]
    return project


def test_a_quarantined_case_that_now_fails_every_run_blocks(suite: Path) -> None:
    write_tests(suite, "1 == 2")
    result = invoke("run")
    flaky = evals(suite)["flaky"]
    assert (flaky["status"], flaky["blocking"]) == ("fail", True)
    assert "quarantined as flaky since" in str(flaky["reason"])
    assert "now failing consistently" in str(flaky["reason"])
    assert result.exit_code == 1, result.output


def test_a_quarantined_case_still_flaky_never_blocks(suite: Path) -> None:
    result = invoke("run")
    flaky = evals(suite)["flaky"]
    assert (flaky["status"], flaky["blocking"]) == ("quarantined", False)
    assert result.exit_code == 0, result.output


# A suite that writes its JUnit report itself: the release takes 59 clean trials, which
# a pytest start-up per trial would make the slowest test of the suite for no more truth.
SCRIPT = """\
import os, sys
from pathlib import Path
mode = Path("mode.txt").read_text().strip()
trial = int(os.environ["FIREWALL_TRIAL"])
failed = mode == "flaky" and trial % 2
case = '<testcase classname="shop" name="test_{name}" time="0.01">{failure}</testcase>'
cases = case.format(name="steady", failure="") + case.format(
    name="flaky", failure='<failure message="odd trial"/>' if failed else ""
)
Path(sys.argv[1]).write_text(f'<testsuite name="shop" tests="2">{cases}</testsuite>')
"""


def test_the_nightly_releases_a_fixed_case_and_never_calls_a_live_one_undefined(
    project: Path,
) -> None:
    (project / "junit_suite.py").write_text(SCRIPT)
    (project / "mode.txt").write_text("flaky\n")
    command = f"{sys.executable} junit_suite.py {{result}}"
    (project / "firewall.toml").write_text(
        f"k = 4\n[nightly]\nk = 30\nrelease_after = 2\n"
        f'[[evals]]\nid = "shop"\ncommand = {json.dumps(command)}\nresult = "junit"\n'
    )
    assert invoke("run").exit_code == 0
    assert len(registry(project)) == 1
    night = invoke("nightly", "--no-issues")
    assert night.exit_code == 0 and "no longer defined" not in night.output, night.output
    assert evals(project)["flaky"]["status"] == "quarantined"
    status = invoke("status")
    assert "no longer defined" not in status.output, status.output

    (project / "mode.txt").write_text("fixed\n")
    for _ in range(2):  # release_after 2, and 2 x 30 trials pass the 59 clean ones release asks
        night = invoke("nightly", "--no-issues")
        assert night.exit_code == 0, night.output
    assert registry(project) == {}, night.output
    assert "released after 2 stable nightly probes" in night.output


def test_the_nightly_shows_a_broken_case_as_fail_and_exits_0(suite: Path) -> None:
    write_tests(suite, "1 == 2")
    night = invoke("nightly", "--no-issues")
    assert night.exit_code == 0, night.output
    flaky = evals(suite)["flaky"]
    assert flaky["status"] == "fail" and "once released it fails the gate" in str(flaky["reason"])
    status = invoke("status")
    assert "its latest probe failed consistently: broken, not flaky" in status.output
    assert json.loads(invoke("status", "--json").output)["quarantined"][0]["failing"] is True


def test_an_eval_probed_in_quarantine_below_its_threshold_blocks(project: Path) -> None:
    (project / "firewall.toml").write_text(
        'k = 3\nadaptive = false\n[[evals]]\nid = "low"\ncommand = "echo 0.2"\n'
    )
    (project / "quarantine.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "evals": {
                    "low": {"since": "2026-11-01T00:00:00Z", "source": "auto", "reason": "iqr"}
                },
            }
        )
    )
    skipped = invoke("run")
    assert skipped.exit_code == 0, "a normal run skips it"
    probed = invoke("run", "--include-quarantined")
    assert probed.exit_code == 1, probed.output
    low = json.loads((project / "firewall-report.json").read_text())["evals"][0]
    assert low["status"] == "fail"
    assert str(low["reason"]).startswith(
        "quarantined as flaky since 2026-11-01, now failing consistently: median 0.2 < threshold"
    )


def test_a_quarantined_pytest_test_is_not_called_undefined_at_night(project: Path) -> None:
    """The nightly has no pytest session to re-probe a test quarantined through the plugin:
    it says so, with a line that selects the test when pasted."""
    (project / "tests").mkdir()
    (project / "tests" / "test_pay.py").write_text("def test_refund():\n    assert True\n")
    (project / "firewall.toml").write_text("k = 3\n")
    entry = {"since": "2026-11-01T00:00:00Z", "source": "manual", "reason": "flaky"}
    (project / "quarantine.json").write_text(
        json.dumps({"schema_version": 1, "evals": {"tests/test_pay.py/test_refund": entry}})
    )
    night = invoke("nightly", "--no-issues")
    assert "no longer defined" not in night.output
    assert "is a pytest test, which the nightly cannot re-probe" in night.output
    assert "`pytest --firewall-k 15 tests/test_pay.py -k test_refund`" in night.output
    assert "no longer defined" not in invoke("status").output
