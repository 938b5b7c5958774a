"""Annotations: the toolkit's escaping vectors, ordering and limits, and forgery attempts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from builders import make_artefact, make_report

from firewall._stats import Stats
from firewall.github.actions import annotations as github_annotations
from firewall.github.actions.annotations import (
    annotation,
    annotations_for,
    escape_data,
    escape_property,
)
from firewall.policy import Status
from firewall.spec import Source

KNOWN = ("::error", "::warning", "::notice")


report = make_report
artefact = make_artefact


def unescape(text: str) -> str:
    """The runner's inverse of the toolkit's escaping, in one pass."""
    codes = {"%25": "%", "%0D": "\r", "%0A": "\n", "%3A": ":", "%2C": ","}
    return re.sub(r"%25|%0D|%0A|%3A|%2C", lambda m: codes[m.group()], text)


def parse(line: str) -> tuple[str, dict[str, str], str]:
    """A command line as the runner reads it: ``::kind props::message``."""
    assert line.startswith("::")
    head, message = line[2:].split("::", 1)
    kind, _, props = head.partition(" ")
    properties = dict(p.split("=", 1) for p in props.split(",")) if props else {}
    return kind, {k: unescape(v) for k, v in properties.items()}, unescape(message)


# Vectors verbatim from actions/toolkit packages/core/__tests__/command.test.ts
# ("command escapes message", "command escapes property").
@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        (
            "percent % percent % cr \r cr \r lf \n lf \n",
            "percent %25 percent %25 cr %0D cr %0D lf %0A lf %0A",
        ),
        ("%25 %25 %0D %0D %0A %0A", "%2525 %2525 %250D %250D %250A %250A"),
        (
            "%25 %25 %0D %0D %0A %0A %3A %3A %2C %2C",
            "%2525 %2525 %250D %250D %250A %250A %253A %253A %252C %252C",
        ),
        ("some message", "some message"),
    ],
)
def test_escape_data_matches_the_toolkit(raw: str, escaped: str) -> None:
    assert escape_data(raw) == escaped


def test_escape_property_matches_the_toolkit() -> None:
    # actions/toolkit packages/core/__tests__/command.test.ts, "command escapes property"
    raw = "percent % percent % cr \r cr \r lf \n lf \n colon : colon : comma , comma ,"
    assert escape_property(raw) == (
        "percent %25 percent %25 cr %0D cr %0D lf %0A lf %0A "
        "colon %3A colon %3A comma %2C comma %2C"
    )
    # core.test.ts, "legacy exportVariable escapes variable names"
    assert escape_property("special char var \r\n,:") == "special char var %0D%0A%2C%3A"


# actions/toolkit packages/core/__tests__/core.test.ts: error/warning/notice
# "escapes the message" and setFailed "escapes the failure message".
@pytest.mark.parametrize(
    ("kind", "message", "line"),
    [
        ("error", "Error message", "::error::Error message"),
        ("error", "Error message\r\n\n", "::error::Error message%0D%0A%0A"),
        ("error", "Failure \r\n\nmessage\r", "::error::Failure %0D%0A%0Amessage%0D"),
        ("warning", "Warning", "::warning::Warning"),
        ("warning", "\r\nwarning\n", "::warning::%0D%0Awarning%0A"),
        ("notice", "Notice", "::notice::Notice"),
        ("notice", "\r\nnotice\n", "::notice::%0D%0Anotice%0A"),
    ],
)
def test_annotation_matches_the_toolkit(
    kind: github_annotations.Kind, message: str, line: str
) -> None:
    assert annotation(kind, message) == line


def test_annotation_properties_in_the_toolkit_order() -> None:
    # core.test.ts "error handles parameters correctly", without the endLine,
    # col and endColumn properties the firewall never sets.
    line = annotation(
        "error", "Error: this is my error message", title="A title", file="root/test.txt", line=5
    )
    assert line == (
        "::error title=A title,file=root/test.txt,line=5::Error: this is my error message"
    )


def test_annotation_escapes_properties_and_leaves_out_empty_ones() -> None:
    assert annotation("warning", "m", title="a:b,c\nd", file="", line=None) == (
        "::warning title=a%3Ab%2Cc%0Ad::m"
    )


def test_annotation_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="set-output"):
        annotation("set-output", "x")  # type: ignore[arg-type]  # a kind outside the Literal, on purpose


def test_blocking_failures_are_errors_and_the_rest_warnings() -> None:
    run = artefact(
        report("passes", Status.PASS),
        report("held", Status.QUARANTINED),
        report("fails", Status.FAIL, stats=Stats(median=0.5)),
        report("crashes", Status.ERROR, stats=Stats(errors=7)),
        report("scatters", Status.QUARANTINE, stats=Stats(median=0.8, iqr=0.2)),
        report("judge", Status.FAIL, blocking=False, stats=Stats(median=0.5)),
        report("judge-down", Status.ERROR, blocking=False),
    )
    lines = annotations_for(run, overdue=["old-one"])
    parsed = [parse(line) for line in lines]
    assert [(kind, props.get("title")) for kind, props, _ in parsed] == [
        ("error", "FAIL fails"),
        ("error", "ERROR crashes"),
        ("warning", "QUARANTINE scatters"),
        ("warning", "FAIL (non-blocking) judge"),
        ("warning", "ERROR (non-blocking) judge-down"),
        ("warning", "REVIEW OVERDUE old-one"),
    ]
    _, props, message = parsed[0]
    assert props == {"title": "FAIL fails", "file": "evals/triage.py", "line": "12"}
    assert message == "fails reason"
    assert "file" not in parsed[-1][1]  # an overdue review has no line to point at


def test_errors_are_ordered_by_how_far_below_the_bar() -> None:
    run = artefact(
        report("crash-few", Status.ERROR, stats=Stats(errors=2)),
        report("near", Status.FAIL, stats=Stats(median=0.84)),
        report("crash-all", Status.ERROR, stats=Stats(errors=7)),
        report("far", Status.FAIL, stats=Stats(median=0.2)),
        report("nothing-scored", Status.FAIL, stats=Stats()),
        report("strict", Status.FAIL, threshold=0.99, stats=Stats(median=0.84)),
    )
    titles = [parse(line)[1]["title"] for line in annotations_for(run)]
    assert titles == [
        "FAIL nothing-scored",
        "FAIL far",
        "FAIL strict",
        "FAIL near",
        "ERROR crash-all",
        "ERROR crash-few",
    ]


def test_ten_of_each_kind_then_one_line_for_the_rest() -> None:
    fails = [report(f"fail-{i:02}", Status.FAIL, stats=Stats(median=i / 100)) for i in range(15)]
    quarantines = [report(f"q-{i:02}", Status.QUARANTINE) for i in range(8)]
    nonblocking = [report(f"nb-{i:02}", Status.FAIL, blocking=False) for i in range(4)]
    lines = annotations_for(artefact(*nonblocking, *fails, *quarantines), overdue=["late"])
    kinds = [parse(line)[0] for line in lines]
    assert kinds == ["error"] * 10 + ["warning"] * 10 + ["notice"]
    titles = [parse(line)[1]["title"] for line in lines]
    # The worst first: the lowest medians, then the new quarantines before the rest.
    assert titles[:10] == [f"FAIL fail-{i:02}" for i in range(10)]
    assert titles[10:18] == [f"QUARANTINE q-{i:02}" for i in range(8)]
    notice = parse(lines[-1])[2]
    assert notice.startswith("5 more errors and 3 more warnings not annotated")
    assert "job summary" in notice


def test_no_extra_line_when_nothing_is_left_out() -> None:
    run = artefact(*(report(f"f{i}", Status.FAIL) for i in range(10)))
    lines = annotations_for(run, overdue=[f"o{i}" for i in range(10)])
    assert [parse(line)[0] for line in lines] == ["error"] * 10 + ["warning"] * 10


def test_a_smaller_limit_counts_one_left_out_in_the_singular() -> None:
    lines = annotations_for(artefact(report("a", Status.FAIL), report("b", Status.FAIL)), limit=1)
    assert parse(lines[-1])[2].startswith("1 more error not annotated")


def test_paths_are_relative_to_the_workspace(project: Path) -> None:
    workspace = project.parent  # the firewall runs in a subdirectory of the repository
    run = artefact(
        report("here", Status.FAIL, source=Source(file="evals/triage.py", line=3)),
        report("absolute", Status.FAIL, source=Source(file=str(project / "conf.toml"), line=9)),
    )
    parsed = {
        props["title"]: props
        for _, props, _ in map(parse, annotations_for(run, workspace=workspace))
    }
    assert parsed["FAIL here"]["file"] == f"{project.name}/evals/triage.py"
    assert parsed["FAIL here"]["line"] == "3"
    assert parsed["FAIL absolute"]["file"] == f"{project.name}/conf.toml"


def test_a_source_outside_the_workspace_is_named_in_the_message(project: Path) -> None:
    workspace = project / "elsewhere"
    run = artefact(report("out", Status.FAIL, source=Source(file="../x.py", line=3)))
    _, props, message = parse(annotations_for(run, workspace=workspace)[0])
    assert "file" not in props and "line" not in props
    assert message.endswith("(defined at ../x.py:3)")


FORGERIES = [
    "\n::error::forged",
    "\r::error::forged",
    "\r\n::warning file=x.py,line=1::forged",
    "%0A::error::forged",
    "%250A::error::forged",
    "::set-output name=x::y",
    "\n::set-output name=x::y",
    "\n::add-mask::hunter2",
    "\n::stop-commands::x",
    "::stop-commands::x\n::error::forged\n::x::",
    "\n::group::g\n::endgroup::",
    "median 0.5 < 0.85\n\n::notice title=t::n",
    "line\u2028::error::sep\u2029::error::par\x85::error::nel\x0b::error::vt",
    "title, with: colons\n",
]


@pytest.mark.parametrize("reason", FORGERIES)
def test_nothing_in_a_reason_becomes_a_workflow_command(reason: str) -> None:
    run = artefact(
        report("blocking", Status.FAIL, reason=reason),
        report("new", Status.QUARANTINE, reason=reason),
        report("soft", Status.ERROR, blocking=False, reason=reason),
    )
    lines = annotations_for(run, limit=1)
    assert len(lines) == 3  # one error, one warning, the notice for the rest
    for line in lines:
        assert line.startswith(KNOWN)
        assert "\r" not in line and "\n" not in line
        assert line.splitlines() == [line]
    kinds = [parse(line)[0] for line in lines]
    assert kinds == ["error", "warning", "notice"]
    # The reason survives as data: the runner's unescaping gives it back.
    _, props, message = parse(lines[0])
    assert props["title"] == "FAIL blocking"
    assert message == reason.translate(github_annotations._OTHER_BREAKS)


def test_an_eval_id_cannot_break_out_of_the_title() -> None:
    run = artefact(report("a::error::b,file=evil.py", Status.FAIL))
    _, props, _ = parse(annotations_for(run)[0])
    assert props["title"] == "FAIL a::error::b,file=evil.py"
    assert props["file"] == "evals/triage.py"


def test_a_huge_reason_is_cut() -> None:
    run = artefact(report("big", Status.FAIL, reason="x" * 100_000))
    message = parse(annotations_for(run)[0])[2]
    assert message == "x" * github_annotations.MESSAGE_LIMIT + "..."
