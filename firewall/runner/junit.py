"""JUnit XML as any test runner writes it: the cases of one run of a suite.

pytest (``--junitxml``), Jest (jest-junit), Go (go-junit-report) and
cargo-nextest all write ``<testsuites>`` of ``<testsuite>`` of ``<testcase>``,
each case passed unless it holds a ``<failure>``, an ``<error>`` or a
``<skipped>``. A case's id is its ``classname`` and ``name`` made into an eval
id (``case_id``); its file and line come from the attributes where a runner
writes them. The XML is the test runner's output, not the firewall's: it is
read with a size cap and without resolving any entity (``xml.etree`` resolves
no external one, and the expat it runs on refuses entity bombs).
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from typing import Literal

MAX_BYTES = 64 << 20  # a suite's report larger than this is not one
_MESSAGE_CHARS = 300

CaseOutcome = Literal["passed", "failed", "error", "skipped"]


@dataclasses.dataclass(frozen=True)
class Case:
    """One test case of one run."""

    id: str
    outcome: CaseOutcome
    file: str | None = None
    line: int | None = None
    message: str = ""  # the failure's, error's or skip's message, cut short
    time: float | None = None  # the case's own seconds, as the runner timed it


class NotJUnit(ValueError):
    """The bytes are not a JUnit XML report; the message says why."""


def parse_junit(data: bytes) -> list[Case]:
    """The cases of a JUnit XML report, in document order, ids made unique."""
    if len(data) > MAX_BYTES:
        raise NotJUnit(f"the JUnit XML is {len(data)} bytes, more than {MAX_BYTES}")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise NotJUnit(f"not XML: {exc}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise NotJUnit(f"not JUnit XML: its root is <{root.tag}>, not <testsuites>")
    # pytest counts lines from 0 (its `line` is a code object's co_firstlineno - 1); every
    # other runner, and every editor, from 1.
    shift = 1 if any(suite.get("name") == "pytest" for suite in root.iter("testsuite")) else 0
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for element in root.iter("testcase"):
        base = case_id(element.get("classname", ""), element.get("name", ""))
        seen[base] = seen.get(base, 0) + 1
        unique = base if seen[base] == 1 else f"{base}~{seen[base]}"
        outcome, message = _outcome(element)
        cases.append(
            Case(
                id=unique,
                outcome=outcome,
                file=element.get("file") or None,
                line=_line(element.get("line"), shift),
                message=message,
                time=_time(element.get("time")),
            )
        )
    return cases


_UNSAFE = re.compile(r"[^A-Za-z0-9._/-]+")


def case_id(classname: str, name: str) -> str:
    """A test case's classname and name as an eval id: ``::`` and spaces become ``.`` and
    ``_``, anything else an id may not hold ``_`` (``tests.test_x.test_y_param-1_``)."""
    joined = f"{classname}.{name}" if classname and not name.startswith(classname) else name
    joined = joined.replace("::", ".").replace(" ", "_")
    cleaned = _UNSAFE.sub("_", joined).strip("._/-")
    return cleaned or "case"


_MARKS: tuple[tuple[str, CaseOutcome], ...] = (
    ("failure", "failed"),
    ("error", "error"),
    ("skipped", "skipped"),
)


def _outcome(element: ET.Element) -> tuple[CaseOutcome, str]:
    for tag, outcome in _MARKS:
        found = element.find(tag)
        if found is not None:
            text = found.get("message") or (found.text or "").strip()
            return outcome, " ".join(text.split())[:_MESSAGE_CHARS]
    return "passed", ""


def _time(value: str | None) -> float | None:
    """A case's ``time`` in seconds; None when absent or not a finite, non-negative number.
    Surefire writes thousands with a comma (``1,234.5``)."""
    try:
        seconds = float(value.replace(",", "")) if value else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < float("inf") else None


def _line(value: str | None, shift: int) -> int | None:
    try:
        return int(value) + shift if value else None
    except ValueError:
        return None
