"""The JUnit XML is valid against the JUnit schema, and its times are the trials' own."""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
import xmlschema
from builders import (
    error_trial,
    invoke_split,
    make_artefact,
    make_check,
    make_flip,
    make_hint,
    make_report,
    trial,
    trials,
)

from firewall._stats import Stats
from firewall.artefact import Artefact
from firewall.diagnostics import Cause
from firewall.policy import Status
from firewall.report.junit import render_junit
from firewall.spec import Source

# Jenkins' xunit schema as pytest vendors it for its own xunit2 output; the file's header
# says where it comes from.
XSD = Path(__file__).with_name("junit-10.xsd")
HOSTILE = 'judge said ]]> <b>&amp; "quoted" \x00nul \x1b[31mred\x1b[0m\n::error::forged'


@pytest.fixture(scope="module")
def junit_schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(XSD)


def every_outcome() -> Artefact:
    """An eval of every outcome the mapping distinguishes, with every part a body can have."""
    return make_artefact(
        make_report("steady", Status.PASS, trials=trials([0.9] * 3, duration_s=0.575)),
        make_report(
            "regressed",
            Status.FAIL,
            trials=trials([0.6, 0.61], duration_s=0.25),
            checks=[make_check("median", "0.61", ">= 0.85", ok=False)],
            flips=[make_flip("case-7", 1, 2)],
        ),
        make_report(
            "outage",
            Status.ERROR,
            trials=[error_trial(HOSTILE, index=0)],
            hints=[make_hint(Cause.ERRORS, "an external dependency failing", HOSTILE)],
        ),
        make_report("advisory", Status.FAIL, blocking=False, trials=trials([0.5])),
        make_report("wobbly", Status.QUARANTINE, reason=HOSTILE, trials=trials([0.1, 0.9])),
        make_report("held", Status.QUARANTINED, blocking=False, stats=Stats()),
        make_report(HOSTILE, Status.PASS, source=Source(file="firewall.toml")),
        git_sha=HOSTILE,
        shard="2/3",
    )


ARTEFACTS: dict[str, Callable[[], Artefact]] = {
    "every outcome": every_outcome,
    "no evals": make_artefact,
    "an interrupted run": lambda: make_artefact(
        make_report("cut", Status.ERROR, trials=trials([0.9] * 3, duration_s=1.5)),
        complete=False,
        finished_at=None,
    ),
}


@pytest.mark.parametrize("build", ARTEFACTS.values(), ids=ARTEFACTS.keys())
def test_every_document_is_valid_against_the_junit_schema(
    junit_schema: xmlschema.XMLSchema, build: Callable[[], Artefact]
) -> None:
    document = render_junit(build())
    junit_schema.validate(document)  # raises, naming the element and attribute, if invalid


def test_the_schema_rejects_what_the_renderer_used_to_write(
    junit_schema: xmlschema.XMLSchema,
) -> None:
    # The validator has teeth: the attributes this renderer once wrote fail it.
    suites = ET.fromstring(render_junit(every_outcome()))
    suites.set("skipped", "2")
    assert not junit_schema.is_valid(ET.tostring(suites, encoding="unicode"))
    del suites.attrib["skipped"]
    case = suites.find("testsuite/testcase")
    assert case is not None
    case.set("file", "evals/triage.py")
    assert not junit_schema.is_valid(ET.tostring(suites, encoding="unicode"))
    del case.attrib["file"]
    assert junit_schema.is_valid(ET.tostring(suites, encoding="unicode"))


def cases_of(document: str) -> dict[str, ET.Element]:
    return {case.get("name", ""): case for case in ET.fromstring(document).iter("testcase")}


def test_where_an_eval_is_defined_is_in_its_output_and_its_failure() -> None:
    by_name = cases_of(render_junit(every_outcome()))
    regressed = by_name["regressed"]
    assert "file" not in regressed.attrib and "line" not in regressed.attrib
    assert "source: evals/triage.py:12" in (regressed.findtext("system-out") or "").splitlines()
    failure = (regressed.findtext("failure") or "").splitlines()
    assert failure[-2:] == [
        "source: evals/triage.py:12",
        "reproduce: firewall replay regressed --seed 1000 --trial 0",
    ]
    # A config entry with no line gives its file alone.
    hostile = next(case for name, case in by_name.items() if name.startswith("judge said"))
    assert "source: firewall.toml" in (hostile.findtext("system-out") or "").splitlines()


def test_cases_are_timed_by_their_trials_and_the_suite_by_the_run_s_wall_time() -> None:
    document = render_junit(every_outcome())
    suites = ET.fromstring(document)
    suite = suites.find("testsuite")
    assert suite is not None
    times = {name: case.get("time") for name, case in cases_of(document).items()}
    # 3 x 0.575 s: a case below a second is not rounded away, as a time to the second was.
    assert times["steady"] == "1.725" and times["regressed"] == "0.500"
    assert times["held"] == "0.000"  # no trials, no time
    # The suite's time is the 42 s between the run's timestamps: its wall time. Trials
    # overlap, so its cases' costs need not add up to it.
    assert suite.get("time") == suites.get("time") == "42.000"
    assert suite.get("timestamp") == "2026-11-29T21:00:00Z"


def test_a_run_cut_short_before_its_end_was_stamped_is_timed_by_its_cases() -> None:
    cut = ARTEFACTS["an interrupted run"]()
    assert ET.fromstring(render_junit(cut)).get("time") == "4.500"


def test_times_are_in_whole_milliseconds_and_never_negative() -> None:
    odd = make_report("odd", Status.PASS, trials=[trial(0.9, duration_s=1.0004), trial(0.9)])
    backwards = make_report("backwards", Status.PASS, trials=[trial(0.9, duration_s=-0.5)])
    times = {
        n: c.get("time") for n, c in cases_of(render_junit(make_artefact(odd, backwards))).items()
    }
    assert times == {"odd": "1.000", "backwards": "0.000"}


def test_the_counts_sit_on_the_suite_and_the_totals_on_the_document() -> None:
    suites = ET.fromstring(render_junit(every_outcome()))
    suite = suites.find("testsuite")
    assert suite is not None
    assert {key: suite.get(key) for key in ("tests", "failures", "errors", "skipped")} == {
        "tests": "7",
        "failures": "1",
        "errors": "1",
        "skipped": "3",
    }
    assert dict(suites.attrib) == {
        "name": "flakiness-firewall",
        "tests": "7",
        "failures": "1",
        "errors": "1",
        "time": suite.get("time"),
    }


def test_a_real_run_gives_a_valid_document_timed_by_its_trials(
    project: Path, junit_schema: xmlschema.XMLSchema
) -> None:
    config = (
        "k = 3\nseed = 7\n"
        '[[evals]]\nid = "good"\ncommand = "echo \'{\\"score\\": 0.9}\'"\n'
        '[[evals]]\nid = "low"\ncommand = "echo \'{\\"score\\": 0.5}\'"\n'
    )
    (project / "firewall.toml").write_text(config, encoding="utf-8")
    assert invoke_split("run").exit_code == 1
    result = invoke_split("report", "firewall-report.json", "--junit")
    assert result.exit_code == 0
    junit_schema.validate(result.stdout)
    data = json.loads((project / "firewall-report.json").read_text(encoding="utf-8"))
    by_name = cases_of(result.stdout)
    for report in data["evals"]:
        spent = sum(t["duration_s"] for t in report["trials"])
        assert by_name[report["id"]].get("time") == f"{round(spent * 1000) / 1000:.3f}"


def test_a_junit_suite_s_cases_are_timed_by_their_own_time_and_the_run_by_its_wall_time(
    project: Path, junit_schema: xmlschema.XMLSchema
) -> None:
    # Every case used to be charged the whole suite run's time: a 44 s run of 300 cases
    # read 19.6 hours.
    cases = "".join(f"<testcase classname='t' name='c{i}' time='0.25'/>" for i in range(30))
    xml = f"<testsuite>{cases}<testcase classname='t' name='slow' time='1.5'/></testsuite>"
    (project / "suite.xml").write_text(xml, encoding="utf-8")
    config = 'k = 3\nadaptive = false\n[[evals]]\nid = "shop"\nresult = "junit"\n'
    (project / "firewall.toml").write_text(
        config + 'command = "sleep 1; cp suite.xml {result}"\n', encoding="utf-8"
    )
    assert invoke_split("run").exit_code == 0
    result = invoke_split("report", "firewall-report.json", "--junit")
    assert result.exit_code == 0
    junit_schema.validate(result.stdout)
    by_name = cases_of(result.stdout)
    assert by_name["shop/t.c0"].get("time") == "0.750"  # 3 trials x its own 0.25 s
    assert by_name["shop/t.slow"].get("time") == "4.500"
    run = json.loads((project / "firewall-report.json").read_text(encoding="utf-8"))["run"]
    started, finished = (
        dt.datetime.strptime(run[key], "%Y-%m-%dT%H:%M:%S%z")
        for key in ("started_at", "finished_at")
    )
    wall = (finished - started).total_seconds()
    document = ET.fromstring(result.stdout)
    suite = document.find("testsuite")
    assert suite is not None
    assert float(suite.get("time", "")) == float(document.get("time", "")) == wall
