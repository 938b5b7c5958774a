"""The pytest plugin, run for real by pytester: off unless asked, `--firewall` honours the
registry, `--firewall-k` probes in process and writes a part that `firewall gate` decides."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from builders import invoke_split

from firewall.config import ID_PATTERN
from firewall.runner.junit import parse_junit
from firewall.runner.seeds import trial_seed
from firewall.store.parts import Probed, load_part
from firewall.testids import from_nodeid

pytest_plugins = ["pytester"]

SUITE = """
import random

import pytest


def test_stable(firewall_seed):
    # random is seeded with the trial's seed before the test runs
    assert random.random() == random.Random(firewall_seed).random()


def test_broken():
    assert False


def test_flaky():
    assert random.random() < 0.5
"""
BASE_SEED = 1  # test_flaky fails in some of its seven trials under it, not in all (pinned below)


def write_registry(path: Path, **reasons: tuple[str, int | None]) -> None:
    entries = {
        eval_id: {"since": "2026-11-29T21:00:00Z", "source": "manual", "reason": reason}
        | ({"issue": issue} if issue is not None else {})
        for eval_id, (reason, issue) in reasons.items()
    }
    path.write_text(json.dumps({"schema_version": 1, "evals": entries}))


def probe(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, Probed]:
    result = pytester.runpytest(
        "--firewall-k", "7", "--firewall-seed", str(BASE_SEED), "--firewall-out", "part.json", *args
    )
    return result, load_part(pytester.path / "part.json")


# --------------------------------------------------------------------------- test ids


@pytest.mark.parametrize(
    ("nodeid", "eval_id"),
    [
        ("tests/test_pay.py::test_refund", "tests/test_pay.py/test_refund"),
        (
            "tests/test_pay.py::TestCheckout::test_timeout",
            "tests/test_pay.py/TestCheckout/test_timeout",
        ),
        ("tests/test_pay.py::test_fee[eu-2]", "tests/test_pay.py/test_fee.eu-2"),
        ("tests/test_pay.py::test_fee[0.5]", "tests/test_pay.py/test_fee.0.5"),
        ("tests/test_pay.py::test_fee[1.5 EUR]", "tests/test_pay.py/test_fee.1.5_EUR-392edc0d"),
        ("test_x.py::test_url[http://a::b]", "test_x.py/test_url.http_//a_b-79a2040f"),
        ("my tests/test_x.py::test_y", "my_tests/test_x.py-a38e913e/test_y"),
    ],
)
def test_a_node_id_becomes_a_readable_eval_id(nodeid: str, eval_id: str) -> None:
    assert from_nodeid(nodeid) == eval_id
    assert re.fullmatch(ID_PATTERN, eval_id)


def test_node_ids_that_differ_only_in_forbidden_characters_stay_apart() -> None:
    ids = {from_nodeid(f"t.py::test_f[{param}]") for param in ("a b", "a_b", "a:b", "a\u00e9b")}
    assert len(ids) == 4


# --------------------------------------------------------------------------- off


def test_off_it_reads_nothing_and_changes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite="def test_broken():\n    assert False\n")
    (pytester.path / "quarantine.json").write_text("not json at all")  # read, it would stop
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "firewall:" not in result.stdout.str()


def test_off_it_imports_nothing_heavy(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_imports="""
        import sys

        def test_nothing_of_the_firewall_beyond_the_plugin_entry():
            loaded = {name for name in sys.modules if name.startswith(("firewall", "pydantic"))}
            assert loaded <= {
                "firewall", "firewall._version", "firewall.testids",
                "firewall.pytest_plugin", "firewall.pytest_plugin.items",
            }, loaded
        """
    )
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


# --------------------------------------------------------------------------- --firewall


def test_a_quarantined_failure_is_reported_as_quarantined(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_suite="""
        import pytest

        def test_flaky():
            assert False

        def test_fine():
            pass

        @pytest.fixture
        def service():
            raise ConnectionError("no service")

        def test_needs_service(service):
            pass
        """
    )
    write_registry(
        pytester.path / "quarantine.json",
        **{
            "test_suite.py/test_flaky": ("iqr 0.21", 42),
            "test_suite.py/test_fine": ("collapsed once", None),
            "test_suite.py/test_needs_service": ("drops out", 7),
        },
    )
    result = pytester.runpytest("--firewall", "-rx")
    result.assert_outcomes(passed=1, xfailed=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*firewall: quarantined tests (quarantine.json)*",
            "test_suite.py::test_fine passed; still quarantined as test_suite.py/test_fine",
            "test_suite.py::test_flaky failed, not counted: quarantined: iqr 0.21 (issue #42)",
            "*short test summary info*",
            "XFAIL test_suite.py::test_flaky - quarantined: iqr 0.21 (issue #42)",
            "XFAIL * test_suite.py::test_needs_service - quarantined: drops out (issue #7)",
        ]
    )


def test_a_test_not_in_the_registry_fails_as_ever(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite="def test_broken():\n    assert False\n")
    write_registry(pytester.path / "quarantine.json", other=("flaky", None))
    result = pytester.runpytest("--firewall")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_parametrized_case_is_quarantined_on_its_own(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_suite="""
        import pytest

        @pytest.mark.parametrize("region", ["eu", "us"])
        def test_fee(region):
            assert False
        """
    )
    write_registry(pytester.path / "quarantine.json", **{"test_suite.py/test_fee.eu": ("x", 1)})
    pytester.runpytest("--firewall").assert_outcomes(failed=1, xfailed=1)


def test_the_registry_is_found_beside_the_firewall_configuration(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite="def test_flaky():\n    assert False\n")
    pytester.makefile(".toml", firewall='registry = "state/quarantine.json"\n')
    (pytester.path / "state").mkdir()
    write_registry(
        pytester.path / "state" / "quarantine.json", **{"test_suite.py/test_flaky": ("x", 1)}
    )
    pytester.runpytest("--firewall").assert_outcomes(xfailed=1)


def test_a_broken_registry_stops_the_session_naming_the_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite="def test_fine():\n    pass\n")
    (pytester.path / "quarantine.json").write_text("{")
    result = pytester.runpytest("--firewall")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*firewall: *quarantine.json: the quarantine registry is not valid JSON*"]
    )


def test_a_pytest_pyproject_without_a_firewall_table_means_the_defaults(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\naddopts = '-ra'\n")
    pytester.makepyfile(test_suite="def test_flaky():\n    assert False\n")
    write_registry(pytester.path / "quarantine.json", **{"test_suite.py/test_flaky": ("x", 1)})
    pytester.runpytest("--firewall").assert_outcomes(xfailed=1)


# --------------------------------------------------------------------------- --firewall-k


def test_every_test_is_probed_in_process_with_the_firewalls_seeds(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_suite=SUITE
        + """

def test_records_its_seed(firewall_seed):
    with open("seeds.txt", "a") as seeds:
        seeds.write(f"{firewall_seed}\\n")
"""
    )
    result, part = probe(pytester)
    result.assert_outcomes(
        passed=7 + 7 + 7 - part_failures(part, "test_flaky"),
        failed=7 + part_failures(part, "test_flaky"),
    )
    assert result.ret == pytest.ExitCode.OK  # a failed trial is a measurement: the gate judges
    assert part.complete and part.base_seed == BASE_SEED
    ids = [spec.id for spec in part.specs]
    assert ids == [
        "test_suite.py/test_stable",
        "test_suite.py/test_broken",
        "test_suite.py/test_flaky",
        "test_suite.py/test_records_its_seed",
    ]
    for eval_id, trials in part.trials.items():
        assert [t.index for t in trials] == list(range(7))
        assert [t.seed for t in trials] == [trial_seed(BASE_SEED, eval_id, i) for i in range(7)]
    recorded = (pytester.path / "seeds.txt").read_text().split()
    assert [int(s) for s in recorded] == [
        t.seed for t in part.trials["test_suite.py/test_records_its_seed"]
    ]
    assert {t.score for t in part.trials["test_suite.py/test_broken"]} == {0.0}
    spec = part.specs[0]
    assert (spec.kind, spec.result, spec.k, spec.adaptive) == ("command", "exit-code", 7, False)
    assert spec.target == "python -m pytest --firewall-replay {seed} test_suite.py::test_stable"
    assert (spec.source.file, spec.source.line) == ("test_suite.py", 6)
    result.stdout.fnmatch_lines(
        ["*firewall: probe*", "probed 4 tests x 7 trials (28 trials, base seed 1) -> *part.json"]
    )


def part_failures(part: Probed, name: str) -> int:
    return sum(t.score == 0.0 for t in part.trials[f"test_suite.py/{name}"])


def test_firewall_gate_decides_the_part(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.makefile(".toml", firewall="")
    _, part = probe(pytester)
    assert 0 < part_failures(part, "test_flaky") < 7  # the premise: it fails on some seeds

    gate = invoke_split("gate", "part.json", "--no-issues", "--report", "report.json")

    assert gate.exit_code == 1, gate.output  # test_broken fails the gate
    report = json.loads((pytester.path / "report.json").read_text())
    statuses = {e["id"]: e["status"] for e in report["evals"]}
    assert statuses == {
        "test_suite.py/test_stable": "pass",
        "test_suite.py/test_broken": "fail",
        "test_suite.py/test_flaky": "quarantine",
    }
    # ...and a plain run honours what the gate quarantined: a failing seed's run passes.
    failing = next(t for t in part.trials["test_suite.py/test_flaky"] if t.score == 0.0)
    rerun = pytester.runpytest("--firewall", "--firewall-replay", str(failing.seed), "-k", "flaky")
    rerun.assert_outcomes(xfailed=1)
    assert rerun.ret == pytest.ExitCode.OK
    rerun.stdout.fnmatch_lines(
        [
            "test_suite.py::test_flaky failed, not counted: quarantined: passed * and failed * "
            "of 7 runs on the same code: a flaky test; first failure, trial * (seed *): assert *"
        ]
    )


DEFAULTS_LINE = "no [tool.firewall] or firewall.toml: deciding pytest's tests on the defaults"


@pytest.mark.parametrize("pyproject", [None, "[tool.pytest.ini_options]\naddopts = '-ra'\n"])
def test_firewall_gate_decides_a_part_on_the_defaults_in_a_project_without_a_configuration(
    pytester: pytest.Pytester, pyproject: str | None
) -> None:
    """The plugin probes on the defaults without a configuration; its gate decides on them too."""
    if pyproject is not None:  # pytest's own settings, no [tool.firewall]
        pytester.makepyprojecttoml(pyproject)
    pytester.makepyfile(test_suite=SUITE)
    probe(pytester)

    gate = invoke_split("gate", "part.json", "--no-issues", "--report", "report.json")

    assert gate.exit_code == 1, gate.output  # test_broken fails the gate, as with a config
    assert gate.stderr.splitlines()[0] == DEFAULTS_LINE
    report = json.loads((pytester.path / "report.json").read_text())
    statuses = {e["id"]: e["status"] for e in report["evals"]}
    assert statuses["test_suite.py/test_broken"] == "fail"
    assert statuses["test_suite.py/test_flaky"] == "quarantine"
    registry = json.loads((pytester.path / "quarantine.json").read_text())
    assert list(registry["evals"]) == ["test_suite.py/test_flaky"]  # where --firewall reads it


@pytest.mark.parametrize(
    ("files", "args", "said"),
    [
        ({"firewall.toml": "k = 'seven'\n"}, (), "firewall.toml"),
        ({"pyproject.toml": "[tool.firewall]\nk = 'seven'\n"}, (), "pyproject.toml"),
        ({}, ("--config", "missing.toml"), "missing.toml: no such configuration file"),
    ],
)
def test_a_configuration_that_is_there_but_broken_still_stops_the_gate(
    pytester: pytest.Pytester, files: dict[str, str], args: tuple[str, ...], said: str
) -> None:
    pytester.makepyfile(test_suite="def test_fine():\n    pass\n")
    probe(pytester)
    for name, text in files.items():
        (pytester.path / name).write_text(text)

    gate = invoke_split("gate", "part.json", "--no-issues", *args)

    assert gate.exit_code == 2, gate.output
    assert said in gate.stderr and DEFAULTS_LINE not in gate.stderr


def test_the_ci_step_the_probe_offers_fails_while_a_test_fails(pytester: pytest.Pytester) -> None:
    """`pytest --firewall-k` alone exits 0 over failing tests (its trials are measurements):
    the step its closing lines offer runs the gate after it, and fails with it."""
    pytester.makepyfile(
        test_suite="def test_fine():\n    pass\n\n\ndef test_broken():\n    assert False\n"
    )
    result, _ = probe(pytester)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "pytest exits 0: the failed trials of 1 test are measurements, and the verdict is "
            "the gate's exit status",
            "decide it with: firewall gate part.json",
        ]
    )
    (offered,) = [line for line in result.outlines if line.startswith("in CI, ")]
    step = offered.split(": ", 1)[1]
    assert step == "pytest --firewall-k 7 --firewall-out part.json && firewall gate part.json"

    bin_dir = str(Path(sys.executable).parent)  # where this environment's pytest and firewall are
    env = {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}
    proc = subprocess.run(
        ["bash", "-c", step],
        cwd=pytester.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert "7 failed, 7 passed" in proc.stdout  # pytest's own count, as a person sees it
    assert DEFAULTS_LINE in proc.stderr  # the gate ran, on the defaults
    assert proc.returncode == 1, proc.stdout + proc.stderr  # ...and the step fails with it


def test_setup_errors_skips_and_xfails_are_trials_of_their_own_kind(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_suite="""
        import pytest

        @pytest.fixture
        def service():
            raise ConnectionError("no service")

        def test_needs_service(service):
            pass

        @pytest.fixture
        def leaky():
            yield
            raise OSError("could not clean up")

        def test_leaves_a_mess(leaky):
            pass

        def test_skipped():
            pytest.skip("not here")

        def test_skipped_sometimes(firewall_seed):
            if firewall_seed % 2:
                pytest.skip("odd seed")

        @pytest.mark.xfail(reason="known")
        def test_known_bug():
            assert False
        """
    )
    _, part = probe(pytester)
    trials = part.trials
    assert "test_suite.py/test_skipped" not in trials  # skipped in every trial: not probed
    errors = {t.error for t in trials["test_suite.py/test_needs_service"]}
    assert errors == {"error in setup: ConnectionError: no service"}
    errors = {t.error for t in trials["test_suite.py/test_leaves_a_mess"]}
    assert errors == {"error in teardown: OSError: could not clean up"}
    sometimes = trials["test_suite.py/test_skipped_sometimes"]
    assert {t.error for t in sometimes if t.seed % 2} == {"skipped in this trial only: odd seed"}
    assert {t.score for t in sometimes if not t.seed % 2} == {1.0}
    assert {t.score for t in trials["test_suite.py/test_known_bug"]} == {1.0}


def test_a_probe_stopped_short_is_marked_incomplete(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result, part = probe(pytester, "-x")
    assert not part.complete
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # pytest's own status stands
    result.stdout.fnmatch_lines(["*INCOMPLETE*"])


def test_a_quarantined_test_is_probed_and_its_failures_still_counted(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite="def test_broken():\n    assert False\n")
    write_registry(pytester.path / "quarantine.json", **{"test_suite.py/test_broken": ("x", 3)})
    result, part = probe(pytester, "--firewall")
    result.assert_outcomes(xfailed=7)
    assert {t.score for t in part.trials["test_suite.py/test_broken"]} == {0.0}
    result.stdout.fnmatch_lines(["test_suite.py::test_broken failed 7 of 7 runs, not counted: *"])


def test_a_unittest_case_runs_once_and_is_not_probed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_suite="""
        import unittest

        class TestOld(unittest.TestCase):
            def test_it(self):
                pass

        def test_new():
            pass
        """
    )
    result, part = probe(pytester)
    result.assert_outcomes(passed=1 + 7)
    assert list(part.trials) == ["test_suite.py/test_new"]
    result.stdout.fnmatch_lines(["1 item cannot be parametrized*run once, not probed"])


def test_a_trial_is_replayed_with_its_seed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    _, part = probe(pytester)
    flaky = part.trials["test_suite.py/test_flaky"]
    spec = next(s for s in part.specs if s.id == "test_suite.py/test_flaky")
    for trial in (
        next(t for t in flaky if t.score == 0.0),
        next(t for t in flaky if t.score == 1.0),
    ):
        argv = spec.target.replace("{seed}", str(trial.seed)).split()[
            3:
        ]  # after `python -m pytest`
        replayed = pytester.runpytest(*argv)
        assert replayed.ret == (
            pytest.ExitCode.OK if trial.score == 1.0 else pytest.ExitCode.TESTS_FAILED
        )
    pytester.runpytest("--firewall-replay", "5", "-k", "stable").assert_outcomes(passed=1)


def test_two_tests_that_would_share_an_eval_id_are_refused(pytester: pytest.Pytester) -> None:
    clash = from_nodeid("test_suite.py::test_f[a b]").rsplit(".", 1)[1]
    pytester.makepyfile(
        test_suite=f"""
        import pytest

        @pytest.mark.parametrize("x", ["a b", "{clash}"])
        def test_f(x):
            pass
        """
    )
    result = pytester.runpytest("--firewall-k", "3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*would both be the eval test_suite.py/test_f.a_b-*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--firewall-k", "2"], "*--firewall-k: expected 3 to 10000 trials, got 2*"),
        (["--firewall-out", "p.json"], "*--firewall-out goes with --firewall-k K*"),
        (
            ["--firewall-k", "3", "--firewall-seed", "x"],
            "*--firewall-seed: expected a non-negative*",
        ),
        (["--firewall-k", "3", "--count", "2"], "*--firewall-k and --count: *"),
        (["--firewall-k", "3", "--firewall-replay", "0"], "*--firewall-k and --firewall-replay*"),
    ],
)
def test_a_command_line_that_cannot_be_honoured_is_a_usage_error(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile(test_suite="def test_fine():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_firewall_seed_in_a_plain_run_is_trial_zeros(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", firewall="seed = 99\n")
    expected = trial_seed(99, "test_suite.py/test_seed", 0)
    pytester.makepyfile(
        test_suite=textwrap.dedent(
            f"""
            def test_seed(firewall_seed):
                assert firewall_seed == {expected}
            """
        )
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_the_shipped_example_reaches_what_its_docstring_says(pytester: pytest.Pytester) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "pytest" / "test_checkout.py"
    pytester.makepyfile(test_checkout=example.read_text())
    pytester.makefile(".toml", firewall="seed = 20261129\n")  # the repository's base seed
    # In a process of its own: the suite's own tests/pipeline/test_checkout.py is imported as
    # `test_checkout` already, and an in-process run would refuse the example's file.
    pytester.runpytest_subprocess("--firewall-k", "7", "--firewall-out", "part.json")

    gate = invoke_split("gate", "part.json", "--dry-run", "--no-issues", "--format", "json")

    statuses = {e["id"].split("/", 1)[1]: e["status"] for e in json.loads(gate.stdout)["evals"]}
    assert statuses == {
        "test_cart_total_adds_up": "pass",
        "test_receipt_waits_for_the_cache": "quarantine",
        "test_vat_is_rounded_half_up.5": "fail",
        "test_vat_is_rounded_half_up.15": "pass",
    }


def test_a_quarantine_reason_can_never_be_read_as_a_workflow_command(
    pytester: pytest.Pytester,
) -> None:
    import actions_parser

    pytester.makepyfile(test_suite="def test_flaky():\n    assert False\n")
    write_registry(
        pytester.path / "quarantine.json",
        **{"test_suite.py/test_flaky": ("judge said ##[error]forged and ::warning::x", 7)},
    )
    result = pytester.runpytest_subprocess("--firewall", "-rx")
    result.assert_outcomes(xfailed=1)
    output = result.stdout.str()
    assert "forged" in output and "issue #7" in output
    assert actions_parser.commands(output) == []


def test_a_test_quarantined_by_hand_under_its_node_id_is_honoured(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite="def test_flaky():\n    assert False\n")
    pytester.makefile(".toml", firewall="k = 3\n")

    added = invoke_split(
        "quarantine",
        "add",
        "test_suite.py::test_flaky",
        "--reason",
        "times out on CI",
        "--no-issues",
    )
    released_typo = invoke_split("quarantine", "release", "test_suite.py::test_flak")

    assert added.exit_code == 0, added.output
    assert "quarantined test_suite.py::test_flaky as test_suite.py/test_flaky" in added.stdout
    assert released_typo.exit_code == 2 and "did you mean 'test_suite.py/test_flaky'" in (
        released_typo.output
    )
    result = pytester.runpytest("--firewall")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["*test_suite.py::test_flaky failed, not counted*times out on CI*"])


# --------------------------------------------------------------------------- one id, two doors

DOORS = """
import os

import pytest


class TestCheckout:
    @pytest.mark.parametrize("fee", ["eu-2", "1.5 EUR"])
    def test_fee(self, fee):
        pass


def test_flaky():
    # as a JUnit suite's case: fails on odd trials; in a plain run (no FIREWALL_TRIAL), fails
    assert int(os.environ.get("FIREWALL_TRIAL", "1")) % 2 == 0
"""


def test_a_test_has_one_id_through_the_plugin_and_through_its_junit_xml(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_doors=DOORS)
    pytester.runpytest("--junitxml=junit.xml")  # pytest's default family, xunit2: no file
    _, part = probe(pytester)

    cases = parse_junit((pytester.path / "junit.xml").read_bytes(), pytester.path)

    assert (
        {case.id for case in cases}
        == set(part.trials)
        == {
            "test_doors.py/TestCheckout/test_fee.eu-2",
            "test_doors.py/TestCheckout/test_fee.1.5_EUR-392edc0d",
            "test_doors.py/test_flaky",
        }
    )
    assert {spec.identity for spec in part.specs} == {"nodeid"}


def test_a_quarantine_made_through_a_junit_suite_holds_in_pytest_firewall(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_doors=DOORS)
    command = f"{sys.executable} -m pytest -q -p no:cacheprovider --junitxml={{result}} ."
    pytester.makefile(
        ".toml",
        firewall=f'k = 4\n[state]\nremote = ""\n[[evals]]\nid = "shop"\n'
        f'command = {json.dumps(command)}\nresult = "junit"\n',
    )
    ran = invoke_split("run", "--no-issues")
    assert ran.exit_code == 0, ran.output
    registry = json.loads((pytester.path / "quarantine.json").read_text())["evals"]
    assert list(registry) == ["shop/test_doors.py/test_flaky"]

    result = pytester.runpytest("--firewall", "-p", "no:cacheprovider")

    result.assert_outcomes(passed=2, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["test_doors.py::test_flaky failed, not counted: quarantined: *"])


FORGER = """
def test_forges():
    print("::error::forged-print")
    assert False, "##[error]forged-legacy\\n::warning::forged-message"
"""


@pytest.mark.parametrize(
    "mode", [("--firewall",), ("--firewall-k", "3", "--firewall-out", "p.json")]
)
def test_pytests_own_report_issues_no_workflow_command_in_actions(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: tuple[str, ...]
) -> None:
    """What a failing test says (its message, what it printed) reaches the job's log as text."""
    import actions_parser

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    pytester.makepyfile(test_suite=FORGER)

    result = pytester.runpytest_subprocess(*mode, "-rA")

    output = result.stdout.str() + "\n" + result.stderr.str()
    assert "forged-print" in output and "forged-legacy" in output and "forged-message" in output
    acted = actions_parser.commands(output)
    assert [command.name for command in acted] == ["stop-commands", acted[1].name]
    assert acted[1].name == acted[0].data  # only the firewall's own stop, and its resumption
    assert result.stdout.lines[-1] == f"::{acted[0].data}::"


def test_outside_actions_pytests_report_is_left_as_it_is(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=FORGER)
    result = pytester.runpytest_subprocess("--firewall")
    assert "stop-commands" not in result.stdout.str()
