"""The artefact as JUnit XML, for the test reporters of GitHub, Jenkins and GitLab.

One ``<testsuite name="flakiness-firewall">`` holds one ``<testcase>`` per
eval. The mapping keeps the reporter's verdict equal to the firewall's exit
code: only what blocks is a failure or an error.

=====================================  ============================================
eval                                   testcase
=====================================  ============================================
``pass``                               passes
``fail``, blocking                     ``<failure message=reason>``, checklist in body
``error``, blocking                    ``<error message=reason>``, checklist in body
``fail`` or ``error``, non-blocking    ``<skipped message="non-blocking FAIL: ...">``
``quarantine``, ``quarantined``        ``<skipped message="QUARANTINE: ...">``
=====================================  ============================================

A non-blocking failure is ``<skipped>`` rather than a pass because reporters
count and list skipped tests, and a pass would hide it. Every testcase also
carries a ``<system-out>`` with its numbers and the file and line where the
eval is defined; the body of a failure, error or skip repeats that line
beside the replay command. The attributes some reporters read for it
(``file``, ``line`` on ``<testcase>``) are not in the JUnit schema, and the
document stays valid against it (``junit-10.xsd``, Jenkins' xunit schema that
pytest's xunit2 output follows, checked in the tests).

Times are in whole milliseconds. A testcase's ``time`` is its trials' summed
duration, what the eval costs: a JUnit suite's case counts its own ``time`` from
the suite's XML in each run, not the whole run's. Trials overlap (``concurrency``),
so the testcases add up to more than the run took: the suite's and the
document's ``time`` is the run's wall time, from its timestamps (to the second),
and the suite's ``timestamp`` its start. ``<properties>`` record the base seed,
commit and exit code.

Eval text (ids, reasons, trial errors) is data: ElementTree escapes it,
characters XML 1.0 forbids (NUL, ESC and the other control characters) are
removed, and no line of the document starts with it. The last matters in a
GitHub job, where the runner reads every line of the log that starts with
``::`` as a workflow command: eval text only ever follows a prefix of ours.
The other form, ``##[`` anywhere in a line, is defused where the document is
printed or saved by ``firewall report`` (``output.inert_markup``, a character
reference that every XML parser reads back as ``#``).
"""

from __future__ import annotations

import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterable

from firewall.artefact import Artefact, EvalReport
from firewall.diagnostics import describe_flip, describe_hint, format_check
from firewall.policy import Status
from firewall.text import fmt, printable
from firewall.text import one_line as text_one_line
from firewall.timeutil import to_text

SUITE_NAME = "flakiness-firewall"
CLASSNAME = "firewall"


def legal(text: str) -> str:
    """``text`` with what XML 1.0 cannot carry removed; tabs and line breaks stay."""
    return printable(text)


def one_line(text: str) -> str:
    """Eval text for a line of a body: legal, its own line breaks turned into ' | '."""
    return text_one_line(legal(text))


def render_junit(artefact: Artefact) -> str:
    """The whole document, with its XML declaration and a final newline."""
    suite = _suite(artefact)
    root = ET.Element("testsuites", _totals(suite))
    root.set("name", SUITE_NAME)
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite(artefact: Artefact) -> ET.Element:
    cases = [_testcase(report) for report in artefact.evals]
    run = artefact.run
    suite = ET.Element("testsuite", name=SUITE_NAME, timestamp=to_text(run.started_at))
    suite.attrib.update(_counts_of(cases))
    suite.set("time", _seconds(_wall_ms(artefact)))
    suite.append(_properties(artefact))
    suite.extend(cases)
    return suite


def _properties(artefact: Artefact) -> ET.Element:
    """The run as ``<property>`` entries: what it takes to reproduce or trace it."""
    run = artefact.run
    values = {
        "mode": run.mode,
        "base_seed": str(run.base_seed),
        "complete": str(run.complete).lower(),
        "exit_code": str(artefact.summary.exit_code),
        "git_sha": run.git_sha,
        "git_ref": run.git_ref,
        "shard": run.shard,
        "tool_version": artefact.tool.version,
    }
    properties = ET.Element("properties")
    for name, value in values.items():
        if value is not None:
            ET.SubElement(properties, "property", name=name, value=legal(value))
    return properties


def _testcase(report: EvalReport) -> ET.Element:
    case = ET.Element(
        "testcase", classname=CLASSNAME, name=legal(report.id), time=_seconds(_cost_ms(report))
    )
    outcome = _outcome(report)
    if outcome is not None:
        case.append(outcome)
    ET.SubElement(case, "system-out").text = _numbers(report)
    return case


def _outcome(report: EvalReport) -> ET.Element | None:
    """The ``<failure>``, ``<error>`` or ``<skipped>`` element, or None for a pass."""
    status = report.status
    if status is Status.PASS:
        return None
    if status in (Status.QUARANTINE, Status.QUARANTINED):
        return _element("skipped", f"{status.label}: {report.reason}", _details(report))
    if not report.blocking:
        return _element(
            "skipped", f"non-blocking {status.label}: {report.reason}", _details(report)
        )
    tag = "failure" if status is Status.FAIL else "error"
    element = _element(tag, report.reason, _details(report))
    element.set("type", status.value)
    return element


def _element(tag: str, message: str, body: str) -> ET.Element:
    element = ET.Element(tag, message=legal(message))
    element.text = body
    return element


def _details(report: EvalReport) -> str:
    """The checklist, likely causes, flipping cases, where the eval is defined and how to
    replay the trial that failed."""
    lines = [one_line(format_check(check)) for check in report.checks]
    lines += [f"likely: {one_line(describe_hint(hint))}" for hint in report.hints[:3]]
    if report.flips:
        flips = ", ".join(describe_flip(flip) for flip in report.flips[:5])
        lines.append(f"flipping cases: {one_line(flips)}")
    lines += _errors(report)
    lines.append(_source(report))
    replay = _replay(report)
    if replay:
        lines.append(f"reproduce: {replay}")
    return "\n".join(lines) + "\n"


def _errors(report: EvalReport) -> Iterable[str]:
    for trial in report.trials:
        if trial.error is not None:
            yield f"trial {trial.index} (seed {trial.seed}) errored: {one_line(trial.error)}"


def _replay(report: EvalReport) -> str | None:
    """The command that reruns the first trial that errored or did not pass."""
    culprit = next(
        (t for t in report.trials if t.error is not None or t.passed is False or t.violations), None
    )
    if culprit is None:
        return None
    return (
        f"firewall replay {shlex.quote(one_line(report.id))} --seed {culprit.seed} "
        f"--trial {culprit.index}"
    )


def _numbers(report: EvalReport) -> str:
    stats = report.stats
    parts = [
        f"{report.status.label}{'' if report.blocking else ' (non-blocking)'}",
        f"k={len(report.trials) or report.k}",
    ]
    for name, value in (("median", stats.median), ("iqr", stats.iqr)):
        if value is not None:
            parts.append(f"{name} {fmt(value)}")
    if stats.pass_rate is not None:
        parts.append(f"pass rate {stats.pass_rate * 100:.0f}%")
    parts += [f"threshold {fmt(report.threshold)}", f"flakiness {fmt(report.flakiness)}"]
    return ", ".join(parts) + f"\nreason: {one_line(report.reason)}\n{_source(report)}\n"


def _source(report: EvalReport) -> str:
    """Where the eval is defined, as ``source: FILE:LINE``."""
    return f"source: {one_line(str(report.source))}"


def _counts_of(cases: Iterable[ET.Element]) -> dict[str, str]:
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for case in cases:
        counts["tests"] += 1
        for tag, key in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            if case.find(tag) is not None:
                counts[key] += 1
    return {key: str(value) for key, value in counts.items()}


def _totals(suite: ET.Element) -> dict[str, str]:
    # ``skipped`` is a count of <testsuite> only: the schema has no such attribute here.
    keys = ("tests", "failures", "errors", "time")
    return {key: suite.get(key, "0") for key in keys}


def _cost_ms(report: EvalReport) -> int:
    """The trials' summed monotonic duration in whole milliseconds: what the eval costs.

    Trials may overlap, so this is compute time, not wall time. Whole milliseconds make
    the suite's time exactly the sum of its testcases' as written.
    """
    return round(max(sum(trial.duration_s for trial in report.trials), 0.0) * 1000)


def _wall_ms(artefact: Artefact) -> int:
    """The run's wall time in whole milliseconds (its timestamps are to the second); a run
    cut short before it was stamped finished: its testcases' summed time, as before."""
    run = artefact.run
    if run.finished_at is None:
        return sum(_cost_ms(report) for report in artefact.evals)
    return max(round((run.finished_at - run.started_at).total_seconds() * 1000), 0)


def _seconds(milliseconds: int) -> str:
    return f"{milliseconds // 1000}.{milliseconds % 1000:03d}"
