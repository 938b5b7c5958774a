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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from firewall.runner.trial import SuiteCase, TrialRecord, error_record
from firewall.spec import EvalSpec, Source


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


def _first_seen(runs: Sequence[TrialRecord]) -> dict[str, SuiteCase]:
    seen: dict[str, SuiteCase] = {}
    for run in runs:
        for case in run.cases or ():
            seen.setdefault(case.id, case)
    return seen


def _case_spec(suite: EvalSpec, case_id: str, first: SuiteCase) -> EvalSpec:
    source = Source(file=first.file, line=first.line) if first.file is not None else suite.source
    return suite.model_copy(
        update={
            "id": f"{suite.id}/{case_id}",
            "suite": suite.id,
            "adaptive": False,  # one command run serves every case: the suite's k for all
            "source": source,
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
