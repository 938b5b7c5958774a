"""JUnit suites (`result = "junit"`): every test case of a suite becomes an eval of its own.

One command run per trial serves every case: the runner reads each trial's JUnit
XML into its cases (``TrialRecord.cases``), and here, before anything is
decided or written, a suite's trials are split into one probe per case, id
``SUITE/case``, with the case's own file and line where the XML gives them.
From there on a case is an eval like any other: decided (as a plain test, in
``firewall.policy.decide_case``), quarantined, issued, annotated, summarised,
kept in the history and re-probed at night one by one.

A case skipped in every trial never ran and is no eval; a case that appears in
some trials and not others is decided on the trials it ran in, and says so. A
suite none of whose trials wrote a report stays one eval, which errors.

A case's id names a test, not a place (``firewall.runner.junit``), and the
registry is read by that identity (``registry_entry``): a pytest case is the
test the pytest plugin knows by the same id, so a quarantine made through either
door holds through the other; a case known only by its place in the report
(promptfoo's ``test 3`` without a description) is decided afresh every run,
whatever the registry holds at its id, since a test inserted before it would
inherit that entry, and its reason says so.

`firewall replay SUITE/case --seed S` runs the suite's command once more with that
trial's seed and index, ``FIREWALL_SELECT`` set to the case (``replay_case``), and
shows that case's outcome: alone where the runner selects it (pytest, through the
firewall's plugin), among the whole suite's otherwise, and says which.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from firewall.artefact import EvalReport
from firewall.lifecycle import Entry
from firewall.runner import Task
from firewall.runner import replay as run_one
from firewall.runner.junit import Case
from firewall.runner.trial import SuiteCase, TrialRecord, error_record
from firewall.spec import EvalSpec, Source
from firewall.testids import registry_keys


def expand(
    specs: Sequence[EvalSpec], trials: Mapping[str, list[TrialRecord]]
) -> tuple[list[EvalSpec], dict[str, list[TrialRecord]]]:
    """The specs and trials with every suite that reported cases replaced by its cases."""
    out_specs: list[EvalSpec] = []
    out_trials: dict[str, list[TrialRecord]] = {}
    for spec in specs:
        runs = sorted(trials.get(spec.id, []), key=lambda run: run.index)
        cases = _first_seen(runs) if spec.result == "junit" else {}
        if not cases:  # not a suite, or one that reported nothing: an eval as it is
            out_specs.append(spec)
            if spec.id in trials:
                out_trials[spec.id] = trials[spec.id]
            continue
        for case_id, first in cases.items():
            records = _case_trials(case_id, runs)
            if not records:
                continue  # skipped in every trial: it never ran
            case = _case_spec(spec, case_id, first)
            out_specs.append(case)
            out_trials[case.id] = records
    return out_specs, out_trials


def holds(suite: EvalSpec, eval_id: str) -> bool:
    """Whether ``eval_id`` names a case of ``suite``."""
    return suite.result == "junit" and eval_id.startswith(f"{suite.id}/")


def case_of(spec: EvalSpec) -> str | None:
    """The case's own id in its suite (``SUITE/case`` -> ``case``), or None for no case."""
    return spec.id[len(spec.suite) + 1 :] if spec.suite is not None else None


PLACE_ONLY = "known by its place in the suite's report alone: no quarantine follows it"


@dataclasses.dataclass(frozen=True)
class Found:
    """What the registry holds for one eval: the entry it honours, and a note for the
    eval's reason when an entry at its id is not honoured or cannot be."""

    entry: Entry | None
    note: str | None = None


def registry_entry(
    spec: EvalSpec, entries: Mapping[str, Entry], suites: Collection[str] = ()
) -> Found:
    """The registry's entry for ``spec``, found by the test it names rather than its id alone.

    A pytest case ``SUITE/T`` is also the test ``T`` that the pytest plugin quarantines;
    a test the plugin probed (``spec.suite`` None) is also the case ``S/T`` of each
    JUnit suite in ``suites``. A case known by its place alone takes no entry.
    """
    if spec.identity == "position":
        held = entries.get(spec.id)
        if held is None:
            return Found(None, PLACE_ONLY)
        return Found(
            None,
            f"{PLACE_ONLY}: the registry's entry for this id (since "
            f"{held.since:%Y-%m-%d}) is not honoured, since a test inserted before it "
            "would take it over; give the test a name of its own (promptfoo: a description)",
        )
    if spec.identity != "nodeid":
        return Found(entries.get(spec.id))
    case = case_of(spec)
    keys = [spec.id, case] if case is not None else registry_keys(spec.id, suites)
    return Found(next((entries[key] for key in keys if key in entries), None))


def noted(report: EvalReport, found: Found) -> EvalReport:
    """The report with ``found``'s note at the end of its reason."""
    if found.note is None:
        return report
    return report.model_copy(update={"reason": f"{report.reason}; {found.note}"})


def _first_seen(runs: Sequence[TrialRecord]) -> dict[str, SuiteCase]:
    seen: dict[str, SuiteCase] = {}
    for run in runs:
        for case in run.cases or ():
            first = seen.setdefault(case.id, case)
            if case.identity == "position" and first.identity != "position":
                # one run's twin names make its place what tells it apart: in every run
                seen[case.id] = first.model_copy(update={"identity": "position"})
    return seen


def _case_spec(suite: EvalSpec, case_id: str, first: SuiteCase) -> EvalSpec:
    source = Source(file=first.file, line=first.line) if first.file is not None else suite.source
    return suite.model_copy(
        update={
            "id": f"{suite.id}/{case_id}",
            "suite": suite.id,
            "adaptive": False,  # one command run serves every case: the suite's k for all
            "source": source,
            "identity": first.identity,
        }
    )


def _case_trials(case_id: str, runs: Sequence[TrialRecord]) -> list[TrialRecord]:
    records = []
    for run in runs:
        if run.cases is None:  # the suite's trial wrote no report: every case errored
            records.append(
                error_record(
                    index=run.index,
                    seed=run.seed,
                    error=run.error or "the suite's trial reported no cases",
                    duration_s=run.duration_s,
                    in_flight=run.in_flight,
                    output=run.output,
                )
            )
            continue
        case = next((c for c in run.cases if c.id == case_id), None)
        if case is None or case.outcome == "skipped":
            continue
        passed = case.outcome == "passed"
        records.append(
            TrialRecord(
                index=run.index,
                seed=run.seed,
                score=1.0 if passed else 0.0,
                passed=passed,
                duration_s=case.time if case.time is not None else run.duration_s,
                in_flight=run.in_flight,
                fields={} if passed else {"failure": case.message or case.outcome},
            )
        )
    return records


def warnings(spec: EvalSpec) -> list[str]:
    """What `firewall list` warns of a suite before any run: a runner that names cases by
    their place (promptfoo, for a test without a description)."""
    if spec.result != "junit" or "promptfoo" not in spec.target:
        return []
    return [
        "promptfoo names a test without a `description` by its place (`test 3`): such a "
        "case is decided afresh every run and no quarantine follows it, since a test "
        "inserted before it would inherit the id; give every test a description"
    ]


def notes(spec: EvalSpec) -> list[str]:
    """How a suite's cases are known and replayed, for `firewall list`."""
    if spec.result != "junit":
        return []
    if "pytest" in spec.target:
        known = (
            "a case is its pytest node id, as the pytest plugin knows the test "
            f"(SUITE/tests/test_x.py/test_y); `firewall replay {spec.id}/CASE` runs that test "
            f"alone ({SELECT}, read by the firewall's pytest plugin)"
        )
    else:
        what = (
            "its provider, prompt and description ([echo] prompt 1 + greets the customer)"
            if "promptfoo" in spec.target
            else "its classname and name"
        )
        known = (
            f"a case is {what}; `firewall replay {spec.id}/CASE` reruns the whole suite "
            "and shows that case's outcome"
        )
    seed = (
        "the trial's seed reaches the command as {seed}"
        if "{seed}" in spec.target
        else "the trial's seed reaches the command only as FIREWALL_SEED (its text has no "
        "{seed}): a replay reproduces a trial only where the tests read it"
    )
    return [known, seed]


# --------------------------------------------------------------------------- replay

SELECT = "FIREWALL_SELECT"
"""The variable that names the one case a suite's command is asked to run: the case's id in
its suite (``tests/test_pay.py/test_refund``). The firewall's pytest plugin runs only the
test of that id; any other runner runs what its command runs."""


def find_case(specs: Sequence[EvalSpec], eval_id: str) -> tuple[EvalSpec, str] | None:
    """The suite that ``eval_id`` is a case of, and the case's id in it (a suite's own id
    may hold ``/`` too: the longest that fits)."""
    suites = [spec for spec in specs if holds(spec, eval_id)]
    if not suites:
        return None
    suite = max(suites, key=lambda spec: len(spec.id))
    return suite, eval_id[len(suite.id) + 1 :]


def selecting(suite: EvalSpec, case: str) -> EvalSpec:
    """The suite, its command run with ``FIREWALL_SELECT`` set to ``case``."""
    exported = f"export {SELECT}={shlex.quote(case)}; "
    return suite.model_copy(update={"target": exported + suite.target})


def seed_note(suite: EvalSpec, seed: int) -> str:
    """What the seed did for a suite's trial, said no stronger than it is: a command that
    takes ``{seed}`` is handed it; any other sees it only as ``FIREWALL_SEED``, which
    reproduces the trial only if its tests read it."""
    if "{seed}" in suite.target:
        return f"seed {seed}, passed to the suite's command as {{seed}}"
    return (
        f"seed {seed}, not passed to the suite's command (its text has no {{seed}}): "
        "only FIREWALL_SEED carries it, for tests that read it"
    )


@dataclasses.dataclass(frozen=True)
class CaseReplay:
    """One trial of a suite's case, run again: the suite's run and that case in it."""

    suite: EvalSpec
    case: str  # the case's id in the suite
    seed: int
    trial: int
    error: str | None  # the suite's trial wrote no report, or no readable one
    found: Case | None  # the case as this run's report has it; None: it did not run
    ran: int  # how many of the suite's cases ran (not skipped)
    output: str | None  # the tail of what the suite's command printed

    @property
    def selected(self) -> bool:
        """Whether the suite's command ran this case alone."""
        return self.found is not None and self.ran == 1

    def summary(self) -> str:
        """The closing lines: the case's outcome, what ran, and what the seed did."""
        head = f"# {self.suite.id}/{self.case} trial {self.trial}"
        if self.error is not None:
            outcome = f"ERROR {self.error}"
        elif self.found is None or self.found.outcome == "skipped":
            outcome = (
                "did not run: it is not in the suite's report"
                if self.found is None
                else f"skipped: {self.found.message}"
            )
        else:
            message = f": {self.found.message}" if self.found.message else ""
            outcome = f"{self.found.outcome}{message}"
        if self.error is not None:
            scope = "the suite's command"
        elif self.selected:
            scope = f"the suite's command ran this case alone ({SELECT})"
        else:
            scope = (
                f"the suite's command ran {self.ran} cases (it does not select one by "
                f"{SELECT}: only pytest suites do, through the firewall's plugin); this is "
                "this case's outcome among them"
            )
        return f"{head}: {outcome}\n# {scope}; {seed_note(self.suite, self.seed)}"

    @property
    def reproduced(self) -> bool:
        """Whether the case ran and gave a pass or a failure, as replay's exit code says."""
        return self.error is None and self.found is not None and self.found.outcome != "skipped"


def replay_case(
    suite: EvalSpec, case: str, *, seed: int, trial: int, cwd: Path, share_token: bool
) -> CaseReplay:
    """Run the suite once with the trial's seed and index, asking for ``case`` alone."""
    outcome, _ = run_one(
        Task(selecting(suite, case), trial, seed, suite.k), cwd=cwd, share_token=share_token
    )
    cases = outcome.cases or []
    return CaseReplay(
        suite=suite,
        case=case,
        seed=seed,
        trial=trial,
        error=outcome.error if not cases else None,
        found=next((c for c in cases if c.id == case), None),
        ran=sum(c.outcome != "skipped" for c in cases),
        output=outcome.output,
    )
