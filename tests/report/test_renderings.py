"""`firewall report`: the artefact as JUnit XML, HTML and Markdown, hostile eval text included."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

import pytest
from builders import (
    drifting_field,
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
from firewall.artefact import Artefact, EvalReport
from firewall.diagnostics import Cause
from firewall.policy import Check, Status
from firewall.report.html import render_html
from firewall.report.junit import render_junit
from firewall.report.markdown import render_summary
from firewall.store.reports import load_report, write_report

HOSTILE = 'judge said ]]> <b>&amp; "quoted" \x00nul \x1b[31mred\x1b[0m\n::error::forged'
SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'

# The checks that held, as a stable eval's checklist starts; each report adds its own.
NO_ERRORS = make_check("errors", "0", "<= 0")
NO_VIOLATIONS = make_check("violations", "0", "0")


def report(eval_id: str, status: Status, **overrides: object) -> EvalReport:
    """``make_report`` with the threshold of the reasons and checks below, 0.8."""
    return make_report(eval_id, status, **{"threshold": 0.8, **overrides})


def held_up_to_median(median: str, *, iqr: str = "0", fence: str) -> list[Check]:
    """The checklist of a stable eval that reached the median rule with ``median``."""
    return [
        NO_ERRORS,
        NO_VIOLATIONS,
        make_check("iqr", iqr, "<= 0.03"),
        make_check("collapse fence", f"min {median}", f">= {fence}"),
    ]


def every_kind() -> Artefact:
    """One eval of each outcome the JUnit mapping distinguishes, built as the artefact holds it."""
    steady = report(
        "steady",
        Status.PASS,
        reason="median 0.9 >= threshold 0.8 (iqr 0, k=7)",
        stats=Stats(median=0.9, iqr=0.0, pass_rate=1.0),
        trials=trials([0.9] * 7),
        checks=[*held_up_to_median("0.9", fence="0.81"), make_check("median", "0.9", ">= 0.8")],
    )
    regressed = report(
        "regressed",
        Status.FAIL,
        reason="median 0.61 < threshold 0.8 (iqr 0.01, k=7)",
        stats=Stats(median=0.61, iqr=0.01, pass_rate=0.0),
        trials=trials([0.61, 0.6, 0.62, 0.61, 0.6, 0.61, 0.62]),
        checks=[
            *held_up_to_median("0.6", iqr="0.01", fence="0.515"),
            make_check("median", "0.61", ">= 0.8", ok=False),
        ],
    )
    outage = report(
        "outage",
        Status.ERROR,
        reason="7 of 7 trials errored (max_errors 0); trial 0 (seed 1000): judge returned 503",
        stats=Stats(errors=7),
        trials=[error_trial("judge returned 503", index=i) for i in range(7)],
        checks=[make_check("errors", "7", "<= 0", ok=False)],
        hints=[
            make_hint(
                Cause.ERRORS,
                "an external dependency failing (errors, never low scores)",
                "7 of 7 trials errored; first, trial 0: judge returned 503",
                weight=1.0,
            )
        ],
    )
    wobbly = report(
        "wobbly",
        Status.QUARANTINE,
        reason="iqr 0.6 > flakiness 0.03 (median 0.5, k=7)",
        stats=Stats(median=0.5, iqr=0.6, pass_rate=3 / 7),
        trials=[
            trial(
                score,
                index=i,
                fields={"category": "billing" if i % 2 else "refund"},
                items={"case-7": float(i % 2), "case-8": 1.0},
            )
            for i, score in enumerate([0.1, 0.9, 0.3, 0.8, 0.2, 0.95, 0.5])
        ],
        checks=[NO_ERRORS, NO_VIOLATIONS, make_check("iqr", "0.6", "<= 0.03", ok=False)],
        **drifting_field("category", ("refund", 4), ("billing", 3)),
        flips=[make_flip("case-7", 3, 7)],
        hints=[
            make_hint(
                Cause.SAMPLING,
                "sampling randomness: the output itself varies (temperature, top_p, unpinned seed)",
                '1 of 1 output fields drift: category 0.429 ("refund" x4, "billing" x3)',
                weight=0.4,
            )
        ],
    )
    held = report(
        "held",
        Status.QUARANTINED,
        blocking=False,
        reason="in quarantine since 2026-11-29: flaky judge",
        stats=Stats(),
    )
    advisory = report(
        "advisory",
        Status.FAIL,
        blocking=False,
        reason="median 0.5 < threshold 0.8 (iqr 0, k=7)",
        stats=Stats(median=0.5, iqr=0.0, pass_rate=0.0),
        trials=trials([0.5] * 7),
        checks=[
            *held_up_to_median("0.5", fence="0.41"),
            make_check("median", "0.5", ">= 0.8", ok=False),
        ],
    )
    return make_artefact(steady, regressed, outage, wobbly, held, advisory)


def interrupted() -> EvalReport:
    """An eval the run stopped after 3 of its 7 trials."""
    return report(
        "cut",
        Status.ERROR,
        reason="interrupted after 3 of 7 trials",
        k=7,
        stats=Stats(errors=4),
        trials=trials([0.9] * 3),
    )


def hostile_artefact() -> Artefact:
    """Eval text that tries to break out of XML, HTML, Markdown and the GitHub log."""
    # A reason is one line, with the trial error's line breaks shown as " | ";
    # the trial errors and the hint's evidence keep theirs.
    errors = report(
        "errors",
        Status.ERROR,
        reason="7 of 7 trials errored (max_errors 0); trial 0 (seed 1000): "
        + (HOSTILE + SCRIPT).replace("\n", " | "),
        stats=Stats(errors=7),
        trials=[error_trial(HOSTILE + SCRIPT, index=i) for i in range(7)],
        checks=[make_check("errors", "7", "<= 0", ok=False)],
        hints=[
            make_hint(
                Cause.ERRORS,
                "an external dependency failing (errors, never low scores)",
                f"7 of 7 trials errored; first, trial 0: {HOSTILE}{SCRIPT}",
            )
        ],
    )
    violated = report(
        SCRIPT,
        Status.FAIL,
        reason=f"violation {IMG} in trial 2 (seed 1002)",
        stats=Stats(median=0.9, iqr=0.0, pass_rate=1.0),
        trials=[
            trial(0.9, index=i, violations=[IMG]) if i == 2 else trial(0.9, index=i)
            for i in range(7)
        ],
        checks=[NO_ERRORS, make_check("violations", IMG, "none", ok=False)],
    )
    return make_artefact(errors, violated)


def parse_junit(text: str) -> ET.Element:
    suites = ET.fromstring(text.encode("utf-8"))
    assert suites.tag == "testsuites"
    (suite,) = suites.findall("testsuite")
    return suite


def cases(suite: ET.Element) -> dict[str, ET.Element]:
    return {case.get("name", ""): case for case in suite.iter("testcase")}


# --- JUnit -------------------------------------------------------------------------------


def test_junit_failures_and_errors_are_what_blocks_and_the_rest_is_skipped() -> None:
    artefact = every_kind()
    suite = parse_junit(render_junit(artefact))
    assert suite.get("name") == "flakiness-firewall"
    counts = {key: suite.get(key) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": "6", "failures": "1", "errors": "1", "skipped": "3"}
    outcome = {
        name: [child.tag for child in case if child.tag != "system-out"]
        for name, case in cases(suite).items()
    }
    assert outcome == {
        "steady": [],
        "regressed": ["failure"],
        "outage": ["error"],
        "wobbly": ["skipped"],
        "held": ["skipped"],
        "advisory": ["skipped"],
    }
    assert all(case.get("classname") == "firewall" for case in cases(suite).values())
    # The reporter's verdict agrees with the exit code: one failure, and the run exits 1.
    assert artefact.summary.exit_code == 1


def test_junit_failure_carries_the_reason_checklist_and_replay_command() -> None:
    artefact = every_kind()
    regressed = next(r for r in artefact.evals if r.id == "regressed")
    failure = cases(parse_junit(render_junit(artefact)))["regressed"].find("failure")
    assert failure is not None
    assert failure.get("message") == regressed.reason
    body = (failure.text or "").splitlines()
    assert "FAIL median 0.61 < 0.8" in body
    assert "ok   iqr 0.01 <= 0.03" in body
    first = regressed.trials[0]
    assert f"reproduce: firewall replay regressed --seed {first.seed} --trial 0" in body


def skipped_message(case: ET.Element) -> str:
    skipped = case.find("skipped")
    assert skipped is not None, ET.tostring(case, encoding="unicode")
    return skipped.attrib["message"]


def test_junit_skipped_messages_say_why_it_did_not_block() -> None:
    by_name = cases(parse_junit(render_junit(every_kind())))
    messages = {name: skipped_message(by_name[name]) for name in ("wobbly", "held", "advisory")}
    assert messages["wobbly"].startswith("QUARANTINE: iqr ")
    assert messages["held"] == "QUARANTINED: in quarantine since 2026-11-29: flaky judge"
    assert messages["advisory"].startswith("non-blocking FAIL: median 0.5 < ")
    out = by_name["advisory"].find("system-out")
    assert out is not None and (out.text or "").startswith("FAIL (non-blocking), k=7, median 0.5")


def test_junit_times_and_run_properties() -> None:
    suite = parse_junit(render_junit(every_kind()))
    # make_artefact's run starts at builders.STARTED, 2026-11-29 21:00 UTC; the suite's time
    # is its testcases' (tests/report/test_junit.py), not the 42 s between the timestamps.
    assert suite.get("timestamp") == "2026-11-29T21:00:00Z"
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["base_seed"] == "20261129" and properties["exit_code"] == "1"
    assert properties["git_sha"] == "0123456789abcdef" and properties["complete"] == "true"
    assert "shard" not in properties  # unknown values are left out, not written as "None"
    timed = report("slow", Status.PASS, k=3, trials=trials([0.9] * 3, duration_s=1.25))
    case = cases(parse_junit(render_junit(make_artefact(timed))))["slow"]
    assert case.get("time") == "3.750"  # the trials' own time, summed


def test_junit_survives_hostile_eval_text() -> None:
    text = render_junit(hostile_artefact())
    suite = parse_junit(text)  # a parser error here is the bug
    by_name = cases(suite)
    assert set(by_name) == {"errors", SCRIPT}
    error = by_name["errors"].find("error")
    assert error is not None
    message = error.get("message") or ""
    # Markup characters come back as the eval wrote them; what XML cannot carry is gone.
    assert 'judge said ]]> <b>&amp; "quoted" nul red' in message
    assert SCRIPT in message
    assert "\x00" not in text and "\x1b" not in text and "[31m" not in text
    violation = by_name[SCRIPT].find("failure")
    assert violation is not None and IMG in (violation.get("message") or "")


def test_junit_of_an_interrupted_run() -> None:
    suite = parse_junit(render_junit(make_artefact(interrupted(), complete=False)))
    error = cases(suite)["cut"].find("error")
    assert error is not None and error.get("message") == "interrupted after 3 of 7 trials"
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["complete"] == "false" and properties["exit_code"] == "130"


def test_junit_of_no_evals_is_an_empty_suite() -> None:
    suite = parse_junit(render_junit(make_artefact()))
    assert suite.get("tests") == "0" and not list(suite.iter("testcase"))


# --- HTML --------------------------------------------------------------------------------


class StrictPage(HTMLParser):
    """Collects tags, attributes and text, and insists that every element is closed in order."""

    VOID: ClassVar[set[str]] = {"meta", "br", "hr", "img", "input", "link"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.problems: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
        else:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_page(page: str) -> StrictPage:
    parser = StrictPage()
    parser.feed(page)
    parser.close()
    assert parser.problems == [] and parser.open == []
    return parser


def test_html_escapes_hostile_eval_text() -> None:
    page = render_html(hostile_artefact())
    parsed = parse_page(page)
    names = {tag for tag, _ in parsed.tags}
    assert "script" not in names and "img" not in names and "b" not in names
    assert not any(name.startswith("on") for _, attrs in parsed.tags for name in attrs)
    text = "".join(parsed.text)
    # Shown to the reader exactly as the eval wrote it, minus the control characters.
    assert SCRIPT in text and IMG in text and 'judge said ]]> <b>&amp; "quoted" nul red' in text
    assert "\x00" not in page and "\x1b" not in page


def test_html_is_self_contained() -> None:
    page = render_html(every_kind())
    parsed = parse_page(page)
    assert {"script", "link", "img", "iframe"}.isdisjoint(tag for tag, _ in parsed.tags)
    links = [attrs.get("href") or "" for tag, attrs in parsed.tags if tag == "a"]
    assert links and all(link.startswith("#eval-") for link in links)
    assert not any("src" in attrs for _, attrs in parsed.tags)
    csp = [
        attrs["content"]
        for tag, attrs in parsed.tags
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp and "default-src 'none'" in (csp[0] or "")


def test_html_shows_table_details_and_trials() -> None:
    artefact = every_kind()
    parsed = parse_page(render_html(artefact))
    text = "".join(parsed.text)
    rows = [attrs for tag, attrs in parsed.tags if tag == "details" and attrs["class"] == "eval"]
    assert len(rows) == len(artefact.evals)
    # Worst first: failures, errors (non-blocking ones too) and new quarantines open
    # unfolded; the eval skipped in quarantine and the stable one stay folded.
    assert ["open" in attrs for attrs in rows] == [True, True, True, True, False, False]
    assert "FAIL median 0.61 < 0.8" in text  # a check
    assert "FAIL (non-blocking)" in text
    wobbly = next(r for r in artefact.evals if r.id == "wobbly")
    assert wobbly.hints and all(hint.cause in text for hint in wobbly.hints)  # likely causes
    assert "case-7 passed 3/7" in text  # a flipping case
    assert "category 0.429" in text and '"refund" x4' in text  # drift with its values
    assert str(wobbly.trials[3].seed) in text  # a trial's seed
    assert "judge returned 503" in text  # a trial's error
    assert "mode" in text and "20261129" in text and "0123456789abcdef" in text


def test_html_marks_an_interrupted_run() -> None:
    text = "".join(parse_page(render_html(make_artefact(interrupted(), complete=False))).text)
    assert "interrupted" in text and "incomplete" in text


# --- the command -------------------------------------------------------------------------


invoke = invoke_split


@pytest.fixture
def saved(project: Path) -> Path:
    path = project / "firewall-report.json"
    write_report(path, every_kind())
    return path


def test_report_defaults_to_the_markdown_summary(saved: Path) -> None:
    result = invoke("report", str(saved))
    assert result.exit_code == 0  # whatever the run decided: rendering it succeeded
    expected = render_summary(load_report(saved), report=str(saved))
    assert result.stdout == expected.rstrip("\n") + "\n"
    assert invoke("report", str(saved), "--markdown").stdout == result.stdout


@pytest.mark.parametrize(
    ("flag", "check"),
    [
        ("--junit", lambda text: parse_junit(text).get("tests") == "6"),
        ("--html", lambda text: parse_page(text).tags[0][0] == "html"),
    ],
)
def test_report_prints_and_writes_each_format(
    saved: Path, flag: str, check: Callable[[str], bool]
) -> None:
    printed = invoke("report", str(saved), flag)
    assert printed.exit_code == 0 and check(printed.stdout)
    out = saved.parent / "out" / "rendered"
    written = invoke("report", str(saved), flag, "--out", str(out))
    assert written.exit_code == 0 and written.stdout == ""
    assert out.read_text(encoding="utf-8") == printed.stdout
    assert [p.name for p in out.parent.iterdir()] == ["rendered"]  # no temp file left behind


@pytest.mark.parametrize("flag", ["--markdown", "--junit", "--html"])
def test_no_line_starts_with_eval_text_that_github_would_run(project: Path, flag: str) -> None:
    path = project / "hostile.json"
    write_report(path, hostile_artefact())
    result = invoke("report", str(path), flag)
    assert result.exit_code == 0
    assert "::error::forged" in result.stdout  # shown, but never at the start of a line
    assert [line for line in result.stdout.splitlines() if line.lstrip().startswith("::")] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such report"),
        ("{not json", "JSON"),
        ('{"schema_version": 99}', "schema_version 99"),
        ('{"schema_version": 1, "run": {}}', "malformed report"),
    ],
)
def test_unreadable_artefact_exits_two(project: Path, content: str | None, message: str) -> None:
    path = project / "report.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = invoke("report", str(path), "--junit")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"firewall: error: {path}") and message in result.stderr


def test_one_format_at_a_time(saved: Path) -> None:
    result = invoke("report", str(saved), "--junit", "--html")
    assert result.exit_code == 2 and "choose one of" in result.stderr


def test_report_of_a_real_run(project: Path) -> None:
    config = (
        "k = 5\nseed = 7\n"
        '[[evals]]\nid = "good"\ncommand = "echo \'{\\"score\\": 0.9}\'"\n'
        '[[evals]]\nid = "low"\ncommand = "echo \'{\\"score\\": 0.5}\'"\n'
    )
    (project / "firewall.toml").write_text(config, encoding="utf-8")
    assert invoke("run").exit_code == 1
    result = invoke("report", "firewall-report.json", "--junit")
    suite = parse_junit(result.stdout)
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    low = cases(suite)["low"]
    failure = low.find("failure")
    assert failure is not None
    assert "source: firewall.toml:" in (low.findtext("system-out") or "")
    data = json.loads((project / "firewall-report.json").read_text(encoding="utf-8"))
    seed = data["evals"][1]["trials"][0]["seed"]
    assert f"--seed {seed}" in (failure.text or "")
