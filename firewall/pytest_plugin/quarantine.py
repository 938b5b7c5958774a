"""`pytest --firewall`: honour ``quarantine.json`` in a plain pytest run.

A quarantined test still runs. When it fails (in setup, call or teardown), its
report becomes an expected failure, ``XFAIL`` with ``quarantined: REASON (issue
#N)``, as pytest's own ``xfail`` marker would make it, so that it does not fail
the session; when it passes, it is reported as passed. The terminal summary lists
every quarantined test that ran and what it did. Other tests are untouched, and
the exit status follows pytest's own rules.

A test is quarantined when the registry holds its id (``firewall.testids``), or
holds it as a case of one of the configuration's JUnit suites (``SUITE/ID``): the
same test, quarantined through the other door.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Generator, Mapping
from pathlib import Path

import pytest

from firewall.errors import FirewallError
from firewall.lifecycle import Entry
from firewall.output import inert
from firewall.pytest_plugin.items import HIDDEN_FAILURE, eval_id_of, nodeid_of
from firewall.pytest_plugin.project import Project
from firewall.store.registry import Registry
from firewall.testids import registry_keys
from firewall.text import one_line


def note(entry: Entry) -> str:
    """The reason a quarantined failure is reported with."""
    issue = f" (issue #{entry.issue})" if entry.issue is not None else ""
    # The reason quotes eval text, and pytest prints it where a CI runner reads commands.
    return inert(one_line(f"quarantined: {entry.reason}{issue}"))


@dataclasses.dataclass
class Ran:
    """What one quarantined test did in this session (more than once under ``--firewall-k``)."""

    nodeid: str
    eval_id: str  # the registry's key for it: its own id, or a suite's case of it
    entry: Entry
    failed: int = 0
    passed: int = 0


class Quarantine:
    """The ``--firewall`` mode, registered as a plugin of its own when asked for."""

    def __init__(
        self, entries: Mapping[str, Entry], registry: Path, suites: Collection[str] = ()
    ) -> None:
        self.entries = dict(entries)
        self.registry = registry
        self.suites = tuple(suites)  # the JUnit suites whose cases a test may be
        self.ran: dict[str, Ran] = {}
        self._now: dict[str, str] = {}  # node id -> how its run is going: failed, passed

    @classmethod
    def read(cls, project: Project) -> Quarantine:
        try:
            entries = Registry(project.registry).read()
        except FirewallError as exc:
            raise pytest.UsageError(f"firewall: {exc}") from None
        suites = [entry.id for entry in project.settings.evals if entry.result == "junit"]
        return cls(entries, project.registry, suites)

    def key_of(self, eval_id: str) -> str | None:
        """The registry's key that quarantines the test ``eval_id``, if any."""
        return next((k for k in registry_keys(eval_id, self.suites) if k in self.entries), None)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        # Outermost, so that it sees the report as pytest's xfail handling left it.
        report = yield
        key = self.key_of(eval_id_of(item))
        if key is None:
            return report
        entry = self.entries[key]
        if report.failed:
            self._now[item.nodeid] = "failed"
            report.outcome = "skipped"
            report.wasxfail = note(entry)
            setattr(report, HIDDEN_FAILURE, True)
        elif call.when == "call" and report.passed:
            self._now.setdefault(item.nodeid, "passed")
        if call.when == "teardown":  # the run is over: count it once, however many phases failed
            ran = self.ran.setdefault(key, Ran(nodeid_of(item), key, entry))
            outcome = self._now.pop(item.nodeid, None)
            ran.failed += outcome == "failed"
            ran.passed += outcome == "passed"
        return report

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        lines = []
        for ran in sorted(self.ran.values(), key=lambda ran: ran.nodeid):
            runs = ran.failed + ran.passed
            if ran.failed:
                times = f" {ran.failed} of {runs} runs" if runs > 1 else ""
                lines.append(f"{ran.nodeid} failed{times}, not counted: {note(ran.entry)}")
            elif ran.passed:
                times = f" all {runs} runs" if runs > 1 else ""
                lines.append(f"{ran.nodeid} passed{times}; still quarantined as {ran.eval_id}")
        if lines:  # a quarantined test that was skipped did nothing to note
            terminalreporter.section(f"firewall: quarantined tests ({self.registry.name})")
            for line in lines:
                terminalreporter.line(inert(line))
