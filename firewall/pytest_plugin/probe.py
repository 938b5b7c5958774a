"""`pytest --firewall-k K`: probe every selected test K times in this one pytest process.

Each test function is parametrized with K trials (``test_refund[trial0]`` to
``[trial6]``), the way pytest-repeat repeats tests, so that to pytest and every
other plugin a trial is an ordinary test: fixtures, marks, ``-k``, reports and
JUnit XML work as they always do. Trial ``i`` of the test whose eval id is ``E``
(``firewall.testids``) gets the firewall's own seed, ``trial_seed(B, E, i)``
(contract §3): the ``firewall_seed`` fixture gives it, and ``random`` is seeded
with it before the trial's setup and again just before the test function runs
(as pytest-randomly does), so that the test's own draws do not depend on what its
fixtures drew.

A trial's score is pytest's verdict on it, as a plain test command's exit status
is (``result = "exit-code"``): passed, xfailed or xpassed is 1.0, failed is 0.0;
an error in setup or teardown makes the trial an error (a crash is never a low
score). A test skipped in every trial is not probed; skipped in some, those
trials are errors, since they measured nothing. Items that cannot be
parametrized (unittest cases, doctests) run once and are not probed.

When the session ends the trials are written as a probe part (``--firewall-out``)
that `firewall gate` decides, as it decides the parts of `firewall probe`. Like
`firewall probe`, a complete probe exits 0 whatever its trials did: a failed
trial is a measurement, and the gate is the judge. An incomplete one (``-x``, an
interrupt) is marked so in its part and keeps pytest's exit status. The closing
lines offer the CI step that cannot go green while tests fail:
``pytest --firewall-k 7 --firewall-out P && firewall gate P``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import random
import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest

from firewall.config import Settings
from firewall.constants import MAX_K, MIN_K
from firewall.errors import FirewallError
from firewall.pytest_plugin.items import HIDDEN_FAILURE, TRIAL, TRIAL_FIXTURE, Trial, trial_id
from firewall.pytest_plugin.project import Project
from firewall.runner.seeds import BaseSeed, trial_seed
from firewall.runner.trial import TrialRecord, error_record, record_from_payload
from firewall.spec import EvalSpec, Source
from firewall.store.parts import Probed, plugin_spec
from firewall.testids import from_nodeid
from firewall.text import one_line
from firewall.timeutil import now

DEFAULT_OUT = "firewall-probe.json"
_MESSAGE_CHARS = 500
_CONFLICTS: tuple[tuple[str, str, tuple[object, ...], str], ...] = (
    # Options that would break a probe: the option, its dest, its values when off, and why.
    ("--firewall-replay", "firewall_replay", (None,), "a replay is one trial, a probe K"),
    ("--count", "count", (None, 1), "pytest-repeat's repeats would be trials without seeds"),
    ("--reruns", "reruns", (None, 0), "a retried trial destroys the measurement"),
    ("-n", "numprocesses", (None, 0), "a probe runs in one process (no pytest-xdist)"),
)
_SUBTEST_REPORT: type = getattr(pytest, "SubtestReport", type(None))  # pytest >= 9


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What one trial came to: a score, an error, or a skip (no measurement)."""

    score: float | None = None
    error: str | None = None
    skipped: str | None = None
    failure: str | None = None  # a failed call's message: pytest's short form of it


def verdict(reports: Sequence[pytest.TestReport]) -> Verdict:
    """A trial's verdict from the reports of its phases (setup, call and subtests, teardown)."""
    for report in reports:
        if report.failed or getattr(report, HIDDEN_FAILURE, False):
            if report.when == "call":
                return Verdict(score=0.0, failure=_failure(report))
            return Verdict(error=f"error in {report.when}: {_message(report)}")
        if report.skipped and not isinstance(report, _SUBTEST_REPORT):
            if hasattr(report, "wasxfail"):
                return Verdict(score=1.0)  # xfailed: pytest's verdict is "not a failure"
            return Verdict(skipped=_message(report))
    return Verdict(score=1.0)


def _message(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, "Skipped: reason")
        text = str(longrepr[2]).removeprefix("Skipped: ")
    else:
        crash = getattr(longrepr, "reprcrash", None)
        text = crash.message if crash is not None else str(longrepr or report.outcome)
    return one_line(text)[:_MESSAGE_CHARS]


def _failure(report: pytest.TestReport) -> str:
    """A failed call's short form: the first line of pytest's crash message (the assertion,
    or the exception and its message), without the ``+ where`` lines that explain it."""
    crash = getattr(report.longrepr, "reprcrash", None)
    lines = str(crash.message).splitlines() if crash is not None else []
    return lines[0].strip()[:_MESSAGE_CHARS] if lines and lines[0].strip() else _message(report)


@dataclasses.dataclass(frozen=True)
class Done:
    trial: Trial
    verdict: Verdict
    duration_s: float
    location: tuple[str, int | None, str]


class Probe:
    """The ``--firewall-k`` mode, registered as a plugin of its own when asked for."""

    def __init__(
        self,
        *,
        k: int,
        base_seed: int,
        out: Path,
        settings: Settings,
        root: Path,
        started: dt.datetime,
    ) -> None:
        self.k = k
        self.base_seed = base_seed
        self.out = out
        self.settings = settings
        self.root = root
        self.started = started
        self.trials: dict[str, Trial] = {}  # by the trial item's node id
        self.once: list[str] = []  # items run once: not parametrizable
        self.done: dict[str, dict[int, Done]] = {}  # eval id -> trial index -> what it did
        self._phases: dict[str, list[pytest.TestReport]] = {}
        self.part: Probed | None = None
        self.problem: str | None = None

    @classmethod
    def start(cls, config: pytest.Config, project: Project, k: int) -> Probe:
        """The probe the command line asks for, or a ``UsageError`` that says what is wrong."""
        option = config.option
        if not MIN_K <= k <= MAX_K:
            raise pytest.UsageError(
                f"firewall: --firewall-k: expected {MIN_K} to {MAX_K} trials, got {k}"
            )
        for name, dest, off, what in _CONFLICTS:
            if getattr(option, dest, None) not in off:
                raise pytest.UsageError(f"firewall: --firewall-k and {name}: {what}")
        try:
            seed = BaseSeed.parse(option.firewall_seed or project.settings.seed)
        except ValueError as exc:
            raise pytest.UsageError(f"firewall: --firewall-seed: {exc}") from None
        out = option.firewall_out
        return cls(
            k=k,
            base_seed=seed.draw(),
            out=config.invocation_params.dir / out if out else project.root / DEFAULT_OUT,
            settings=project.settings,
            root=project.root,
            started=now(),
        )

    @pytest.hookimpl(trylast=True)  # last, so that the trial is the node id's last parameter
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if TRIAL_FIXTURE not in metafunc.fixturenames:
            metafunc.fixturenames.append(TRIAL_FIXTURE)
        metafunc.parametrize(
            TRIAL_FIXTURE,
            range(self.k),
            indirect=True,
            ids=[trial_id(index) for index in range(self.k)],
        )

    @pytest.fixture(name=TRIAL_FIXTURE)
    def trial_index(self, request: pytest.FixtureRequest) -> int:
        # Parametrized, never requested: pytest prunes it from every test's fixtures, so
        # that a trial costs what a pytest-repeat repeat does (a fixture per test would not).
        index: int = request.param
        return index

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        _seed(item)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        _seed(item)  # again: what the fixtures drew does not reach the test's own draws

    @pytest.hookimpl(trylast=True)  # after -k and -m: these are the items that run
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        owners: dict[str, str] = {}
        for item in items:
            callspec = getattr(item, "callspec", None)
            if callspec is None or TRIAL_FIXTURE not in callspec.params:
                self.once.append(item.nodeid)
                continue
            index = callspec.params[TRIAL_FIXTURE]
            nodeid = _untrialled(item.nodeid, index)
            eval_id = from_nodeid(nodeid)
            owner = owners.setdefault(eval_id, nodeid)
            if owner != nodeid:
                raise pytest.UsageError(
                    f"firewall: {owner} and {nodeid} would both be the eval {eval_id}; "
                    "give one of them another name or parameter id"
                )
            trial = Trial(eval_id, nodeid, index, trial_seed(self.base_seed, eval_id, index))
            item.stash[TRIAL] = trial
            self.trials[item.nodeid] = trial

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        trial = self.trials.get(report.nodeid)
        if trial is None:
            return
        phases = self._phases.setdefault(report.nodeid, [])
        phases.append(report)
        if report.when != "teardown":
            return
        del self._phases[report.nodeid]
        done = self.done.setdefault(trial.eval_id, {})
        if trial.index not in done:  # a trial is run once: a rerun would destroy the measurement
            duration = sum(phase.duration for phase in phases)
            done[trial.index] = Done(trial, verdict(phases), duration, report.location)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if session.config.option.collectonly or exitstatus in (
            pytest.ExitCode.USAGE_ERROR,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            return
        complete = (
            exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
            and not session.shouldfail
            and not session.shouldstop
        )
        part = self.build(complete)
        try:
            part.write(self.out)
        except FirewallError as exc:
            self.problem = str(exc)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        self.part = part
        if complete and exitstatus == pytest.ExitCode.TESTS_FAILED:
            session.exitstatus = pytest.ExitCode.OK  # failed trials are measurements

    def build(self, complete: bool) -> Probed:
        """The probe part of the trials that ran: every probed test's spec and trials."""
        from firewall.store.git import GitInfo

        specs, trials = [], {}
        for eval_id, done in self.done.items():
            if all(d.verdict.skipped is not None for d in done.values()):
                continue  # skipped in every trial: nothing was measured
            specs.append(self.spec(eval_id, next(iter(done.values()))))
            trials[eval_id] = [self.record(done[index]) for index in sorted(done)]
        git = GitInfo.find(self.root, os.environ)
        return Probed(
            base_seed=self.base_seed,
            started_at=self.started,
            finished_at=now(),
            complete=complete,
            git_sha=git.sha,
            git_ref=git.ref,
            specs=specs,
            trials=trials,
        )

    def spec(self, eval_id: str, done: Done) -> EvalSpec:
        """The test as an eval: what `firewall gate` builds again from its own configuration."""
        file, line, _ = done.location
        source = Source(file=file, line=None if line is None else line + 1)
        return plugin_spec(
            eval_id, done.trial.nodeid, k=self.k, settings=self.settings, source=source
        )

    def record(self, done: Done) -> TrialRecord:
        trial, outcome = done.trial, done.verdict
        if outcome.score is None:
            error = outcome.error or f"skipped in this trial only: {outcome.skipped}"
            return error_record(
                index=trial.index,
                seed=trial.seed,
                error=error,
                duration_s=done.duration_s,
                in_flight=1,
            )
        record = record_from_payload(
            {"score": outcome.score},
            index=trial.index,
            seed=trial.seed,
            pass_score=self.settings.threshold,
            duration_s=done.duration_s,
            in_flight=1,
        )
        if outcome.failure:  # the failure's message, where a command's would be: its output
            record = record.model_copy(update={"output": outcome.failure})
        return record

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.section("firewall: probe")
        if self.problem is not None:
            terminalreporter.line(f"firewall: {self.problem}", red=True)
            return
        part = self.part
        if part is None:
            terminalreporter.line("no probe part written: no test ran")
            return
        count = sum(len(trials) for trials in part.trials.values())
        state = "" if part.complete else " -- INCOMPLETE, and so will the gate's result be"
        terminalreporter.line(
            f"probed {len(part.trials)} tests x {self.k} trials ({count} trials, base seed "
            f"{part.base_seed}) -> {self.out}{state}"
        )
        missed = 0
        for eval_id, trials in part.trials.items():
            failed = sum(t.passed is False for t in trials)
            errored = sum(t.errored for t in trials)
            if failed or errored:
                missed += 1
                what = [
                    f"{n} {word}" for n, word in ((failed, "failed"), (errored, "errored")) if n
                ]
                nodeid = next(iter(self.done[eval_id].values())).trial.nodeid
                terminalreporter.line(f"{nodeid}: {', '.join(what)} of {len(trials)} trials")
        if self.once:
            items = "1 item" if len(self.once) == 1 else f"{len(self.once)} items"
            terminalreporter.line(
                f"{items} cannot be parametrized (unittest cases, doctests): run once, not probed"
            )
        invoked = terminalreporter.config.invocation_params.dir
        for line in self.closing_lines(part.complete, missed, invoked):
            terminalreporter.line(line)

    def closing_lines(self, complete: bool, missed: int, invoked: Path) -> list[str]:
        """Who judges, and the CI step that fails when tests fail (README: the plugin in CI).

        A complete probe exits 0 whatever its trials did, so a CI step of
        ``pytest --firewall-k`` alone is green over failing tests: the step offered
        runs the gate after it with ``&&``, so that it fails when the gate fails
        and when the probe is cut short (pytest's own status, kept then).
        """
        out = self.out.relative_to(invoked) if self.out.is_relative_to(invoked) else self.out
        part = shlex.quote(str(out))
        lines = []
        if complete and missed:
            lines.append(
                f"pytest exits 0: the failed trials of {missed} "
                f"test{'s' if missed != 1 else ''} are measurements, and the verdict is the "
                "gate's exit status"
            )
        lines.append(f"decide it with: firewall gate {part}")
        lines.append(
            f"in CI, one step that fails when the gate does: pytest --firewall-k {self.k} "
            f"--firewall-out {part} && firewall gate {part}"
        )
        return lines


def _seed(item: pytest.Item) -> None:
    trial = item.stash.get(TRIAL, None)
    if trial is not None:  # not an item run once (a unittest case)
        random.seed(trial.seed)


def _untrialled(nodeid: str, index: int) -> str:
    """The test's node id without the trial's parameter, which is always its last."""
    own = trial_id(index)
    if nodeid.endswith(f"[{own}]"):
        return nodeid[: -len(own) - 2]
    if nodeid.endswith(f"-{own}]"):
        return nodeid[: -len(own) - 2] + "]"
    raise pytest.UsageError(
        f"firewall: {nodeid}: another plugin parametrizes the tests after --firewall-k "
        "(pytest-repeat's --count?): --firewall-k repeats them itself; drop the other"
    )
