"""JUnit XML as any test runner writes it: the cases of one run of a suite.

pytest (``--junitxml``), Jest (jest-junit), Go (go-junit-report),
cargo-nextest and promptfoo all write ``<testsuites>`` of ``<testsuite>`` of
``<testcase>``, each case passed unless it holds a ``<failure>``, an
``<error>`` or a ``<skipped>``. Its file and line come from the attributes
where a runner writes them. The XML is the test runner's output, not the
firewall's: it is read with a size cap and without resolving any entity
(``xml.etree`` resolves no external one, and the expat it runs on refuses
entity bombs).

A case's id is what identifies the test to its own runner, so that a test has
one id whichever door it comes through (``Identity``):

- pytest's cases get the id the pytest plugin gives the same test,
  ``testids.from_nodeid`` of its node id. pytest writes the node id apart: the
  file as a dotted ``classname`` (``tests.test_x.TestFoo``) and the rest as
  ``name``; ``junit_family=xunit1`` adds the ``file``. Without it the file is
  found again under the suite's working directory (``pytest_nodeid``).
- promptfoo names a case ``test N`` after its place in the config, with
  ``: DESCRIPTION`` when the test has one. The description is the test's
  name; a case without one is known only by its place (``positional``).
- any other runner's case is its ``classname`` and ``name`` (``case_id``).

Two cases that would share an id are told apart by their order (``~2``), and
so are positional too.
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Literal

from firewall.testids import from_nodeid

MAX_BYTES = 64 << 20  # a suite's report larger than this is not one
_MESSAGE_CHARS = 300

CaseOutcome = Literal["passed", "failed", "error", "skipped"]
Identity = Literal["name", "nodeid", "position"]
"""How a case's id names its test: by the runner's name for it (``name``), by its pytest
node id (``nodeid``: the pytest plugin's id for it too), or by its place alone
(``position``: a test inserted before it takes its id, so nothing may follow the id)."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One test case of one run."""

    id: str
    outcome: CaseOutcome
    file: str | None = None
    line: int | None = None
    message: str = ""  # the failure's, error's or skip's message, cut short
    identity: Identity = "name"
    time: float | None = None  # the case's own seconds, as the runner timed it


class NotJUnit(ValueError):
    """The bytes are not a JUnit XML report; the message says why."""


def parse_junit(data: bytes, root: Path | None = None) -> list[Case]:
    """The cases of a JUnit XML report, in document order, ids made unique.

    ``root``: the suite's working directory, where the files of pytest's cases are
    looked for when its report does not name them (xunit2, pytest's default)."""
    if len(data) > MAX_BYTES:
        raise NotJUnit(f"the JUnit XML is {len(data)} bytes, more than {MAX_BYTES}")
    try:
        tree = ET.fromstring(data)
    except ET.ParseError as exc:
        raise NotJUnit(f"not XML: {exc}") from None
    if tree.tag not in ("testsuites", "testsuite"):
        raise NotJUnit(f"not JUnit XML: its root is <{tree.tag}>, not <testsuites>")
    pytest = any(suite.get("name") == "pytest" for suite in tree.iter("testsuite"))
    promptfoo = tree.get("name") == "promptfoo"
    # pytest counts lines from 0 (its `line` is a code object's co_firstlineno - 1); every
    # other runner, and every editor, from 1.
    shift = 1 if pytest else 0
    cases: list[Case] = []
    seen: dict[str, int] = {}
    modules: dict[str, tuple[str, int] | None] = {}  # classname -> its file: one look each
    for element in tree.iter("testcase"):
        classname, name = element.get("classname", ""), element.get("name", "")
        file = element.get("file") or None
        base, identity = _identify(
            classname, name, file, root, modules, pytest=pytest, promptfoo=promptfoo
        )
        seen[base] = seen.get(base, 0) + 1
        unique = base if seen[base] == 1 else f"{base}~{seen[base]}"
        outcome, message = _outcome(element)
        cases.append(
            Case(
                id=unique,
                outcome=outcome,
                file=file,
                line=_line(element.get("line"), shift),
                message=message,
                identity=identity,
                time=_time(element.get("time")),
            )
        )
    # Twins (two cases of one name) are told apart by their order alone, the first too: a
    # twin inserted before it would take its id.
    twins = {base for base, count in seen.items() if count > 1}
    return [
        dataclasses.replace(case, identity="position") if case.id.split("~")[0] in twins else case
        for case in cases
    ]


def _identify(
    classname: str,
    name: str,
    file: str | None,
    root: Path | None,
    modules: dict[str, tuple[str, int] | None],
    *,
    pytest: bool,
    promptfoo: bool,
) -> tuple[str, Identity]:
    if promptfoo:
        place = _PROMPTFOO_CASE.fullmatch(name)
        if place is not None:
            description = place.group(2)
            if description:
                return case_id(classname, description), "name"
            return case_id(classname, name), "position"
    nodeid = pytest_nodeid(classname, name, file, root, pytest=pytest, modules=modules)
    if nodeid is not None:
        return from_nodeid(nodeid), "nodeid"
    return case_id(classname, name), "name"


# promptfoo's name for a case: `test N`, or `test N: DESCRIPTION` (src/util/junit.ts,
# getTestCaseName: N is the test's 1-based index in the config).
_PROMPTFOO_CASE = re.compile(r"test (\d+)(?:: (.*))?", re.DOTALL)


def pytest_nodeid(
    classname: str,
    name: str,
    file: str | None,
    root: Path | None,
    *,
    pytest: bool = True,
    modules: dict[str, tuple[str, int] | None] | None = None,
) -> str | None:
    """The node id pytest wrote as ``classname`` and ``name``, or None when this is no
    pytest case (or one whose file cannot be told).

    pytest's junitxml (``mangle_test_address``) splits the node id
    ``tests/test_x.py::TestFoo::test_y[p]`` into ``classname="tests.test_x.TestFoo"``
    and ``name="test_y[p]"``: the file's path with ``/`` as ``.`` and without ``.py``,
    then the classes. The file is the ``file`` attribute where xunit1 writes it, else
    the longest dotted prefix that names a file under ``root``; when none does, and
    the report is pytest's, the parts before the first capitalised one (a class, by
    pytest's ``Test*``) are the module.
    """
    parts = classname.split(".") if classname else []
    if file is not None:
        file = file.replace("\\", "/")
        if not file.endswith(".py") and not pytest:
            return None
        module = file.removesuffix(".py").replace("/", ".").split(".")
        if parts[: len(module)] != module:
            return None
        return "::".join([file, *parts[len(module) :], name])
    found = None
    if root is not None and parts:
        if modules is None or classname not in modules:
            found = _find_module(root, parts)
            if modules is not None:
                modules[classname] = found
        else:
            found = modules[classname]
    if found is None:
        if not pytest or not parts:
            return None
        cut = next((i for i, part in enumerate(parts) if part[:1].isupper()), len(parts))
        if cut == 0:
            return None
        found = ("/".join(parts[:cut]) + ".py", cut)
    path, used = found
    return "::".join([path, *parts[used:], name])


def _find_module(root: Path, parts: list[str]) -> tuple[str, int] | None:
    """The file under ``root`` that the longest run of ``parts`` names (a ``.`` in a
    part of the path is a ``.`` too: ``tests.v1.2.test_x`` may be ``tests/v1.2/test_x.py``),
    and how many parts it took."""
    best: tuple[str, int] | None = None

    def walk(directory: Path, relative: str, start: int) -> None:
        nonlocal best
        for end in range(start + 1, len(parts) + 1):
            piece = ".".join(parts[start:end])
            if piece in ("", ".", ".."):
                continue
            if "/" in piece or "\\" in piece:
                return  # no runner's dotted module path: a Go package, say
            path = f"{relative}{piece}"
            if (directory / f"{piece}.py").is_file() and (best is None or end > best[1]):
                best = (f"{path}.py", end)
            elif end == len(parts) and (directory / piece).is_file():
                best = (path, end)  # a file of a plugin's tests (tests/test_x.yaml)
            if end < len(parts) and (directory / piece).is_dir():
                walk(directory / piece, f"{path}/", end)

    try:
        walk(root, "", 0)
    except OSError:
        return None
    return best


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
