"""Shared builders for the tests: specs, trial records, eval files, decided evals and
artefacts, with sane defaults.

The report and artefact builders make what a renderer reads directly, without
running the policy or the pipeline: a rendering test says what the decision was
(status, reason, checks, hints...) instead of depending on how it is reached.
"""

from __future__ import annotations

import datetime as dt
import json
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from pydantic import JsonValue

from firewall._stats import Stats
from firewall.artefact import Artefact, EvalReport, RunInfo, Summary
from firewall.config import Budgets
from firewall.diagnostics import CaseFlip, Cause, Hint, ValueCount
from firewall.errors import ExitCode
from firewall.policy import Check, Status
from firewall.runner.seeds import trial_seed
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec, Source

DEFAULT_THRESHOLD = 0.8
STARTED = dt.datetime(2026, 11, 29, 21, 0, tzinfo=dt.timezone.utc)
"""When a built artefact's run started; it finished 42 seconds later."""


def make_spec(**overrides: Any) -> EvalSpec:
    """An eval spec with the contract's defaults; any field can be overridden.

    ``pass_score`` follows ``threshold`` unless given, as it does in the config.
    ``budgets`` may be passed as a plain dict.
    """
    threshold = overrides.get("threshold", DEFAULT_THRESHOLD)
    fields: dict[str, Any] = {
        "id": "triage-accuracy",
        "kind": "command",
        "target": "true",
        "k": 7,
        "threshold": threshold,
        "flakiness": 0.03,
        "outlier_fence": 3.0,
        "timeout": 30.0,
        "max_errors": 0,
        "pass_score": threshold,
        "source": Source(file="firewall.toml", line=1),
    }
    fields.update(overrides)
    if isinstance(fields.get("budgets"), dict):
        fields["budgets"] = Budgets(**fields["budgets"])
    return EvalSpec(**fields)


def command_spec(command: str, **overrides: Any) -> EvalSpec:
    return make_spec(kind="command", target=command, **overrides)


def python_spec(target: str, **overrides: Any) -> EvalSpec:
    return make_spec(kind="python", target=target, **overrides)


def trial(
    score: float,
    *,
    index: int = 0,
    seed: int | None = None,
    passed: bool | None = None,
    pass_score: float = DEFAULT_THRESHOLD,
    **extra: Any,
) -> TrialRecord:
    """A trial that scored; ``passed`` defaults to ``score >= pass_score``."""
    return TrialRecord(
        index=index,
        seed=1000 + index if seed is None else seed,
        score=score,
        passed=score >= pass_score if passed is None else passed,
        **extra,
    )


def error_trial(message: str = "judge unavailable", *, index: int = 0) -> TrialRecord:
    return TrialRecord(index=index, seed=1000 + index, error=message)


def trials(scores: Iterable[float], **extra: Any) -> list[TrialRecord]:
    """One trial per score, indexed in order."""
    return [trial(score, index=index, **extra) for index, score in enumerate(scores)]


def seeded(records: Iterable[TrialRecord], eval_id: str, base_seed: int) -> list[TrialRecord]:
    """The trials with the seeds ``base_seed`` derives for ``eval_id`` (contract §3), as a
    probe part's must be for `firewall gate` to take them."""
    return [
        record.model_copy(update={"seed": trial_seed(base_seed, eval_id, record.index)})
        for record in records
    ]


def with_metrics(records: Sequence[TrialRecord], **series: Sequence[float]) -> list[TrialRecord]:
    """Copies of the records, trial i reporting ``metrics[name] = series[name][i]``."""
    return [
        record.model_copy(update={"metrics": {name: values[i] for name, values in series.items()}})
        for i, record in enumerate(records)
    ]


def write_module(directory: Path, name: str, source: str) -> str:
    """Write ``name.py`` into ``directory`` (dedented) and return the module name."""
    (directory / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return name


def make_report(eval_id: str, status: Status, **overrides: Any) -> EvalReport:
    """One decided eval as the artefact holds it, with plausible numbers."""
    fields: dict[str, Any] = {
        "id": eval_id,
        "status": status,
        "blocking": True,
        "reason": f"{eval_id} reason",
        "source": Source(file="evals/triage.py", line=12),
        "k": 7,
        "threshold": 0.85,
        "flakiness": 0.03,
        "stats": Stats(median=0.9, iqr=0.01, pass_rate=1.0),
    }
    fields.update(overrides)
    return EvalReport(**fields)


def make_check(name: str, actual: str, allowed: str, *, ok: bool = True) -> Check:
    """One rule as it ran, e.g. ``make_check("median", "0.61", ">= 0.8", ok=False)``."""
    return Check(name=name, ok=ok, actual=actual, allowed=allowed)


def check_named(checks: Iterable[Check], name: str) -> Check:
    """The one check called ``name``; fails, naming the checks there are, if there is
    none or more than one."""
    checks = list(checks)
    found = [check for check in checks if check.name == name]
    if len(found) != 1:
        names = [check.name for check in checks]
        raise AssertionError(
            f"expected exactly one check named {name!r}, found {len(found)} in {names}"
        )
    return found[0]


def make_hint(kind: Cause, cause: str, evidence: str, *, weight: float = 0.5) -> Hint:
    """A likely cause as the diagnostics would state it."""
    return Hint(kind=kind, cause=cause, evidence=evidence, weight=weight)


def make_flip(case: str, passes: int, trials: int) -> CaseFlip:
    """A case that passed in ``passes`` of ``trials`` trials."""
    return CaseFlip(case=case, pass_rate=passes / trials, passes=passes, trials=trials)


def drifting_field(name: str, *values: tuple[JsonValue, int]) -> dict[str, Any]:
    """The ``drift`` and ``distributions`` overrides of ``make_report`` for one output field.

    ``values`` are (value, trials that returned it) pairs, most common first; the
    drift is the share of trials that disagree with the most common value. Use as
    ``make_report(..., **drifting_field("category", ("refund", 4), ("billing", 3)))``.
    """
    total = sum(count for _, count in values)
    top = max(count for _, count in values)
    distribution = [
        ValueCount(value=value, display=json.dumps(value), count=count) for value, count in values
    ]
    return {"drift": {name: 1 - top / total}, "distributions": {name: distribution}}


def exit_code_of(reports: Sequence[EvalReport], *, complete: bool = True) -> ExitCode:
    """The exit code a run of these reports makes (contract §5), restated for the tests."""
    blocking = {report.status for report in reports if report.blocking}
    if not complete:
        return ExitCode.INTERRUPTED
    if Status.FAIL in blocking:
        return ExitCode.FAIL
    if Status.ERROR in blocking:
        return ExitCode.ERROR
    return ExitCode.OK


def make_artefact(
    *reports: EvalReport,
    complete: bool = True,
    exit_code: int | None = None,
    **run: Any,
) -> Artefact:
    """A decided run of ``reports``: the summary counts them by status, and the exit code
    is ``exit_code_of`` the reports unless given (a test of the title may want another).

    ``run`` overrides fields of the run (mode, base_seed, git_sha, finished_at...).
    """
    fields: dict[str, Any] = {
        "mode": "run",
        "base_seed": 20261129,
        "started_at": STARTED,
        "finished_at": STARTED + dt.timedelta(seconds=42),
        "complete": complete,
        "git_sha": "0123456789abcdef",
        "git_ref": "refs/heads/main",
    }
    fields.update(run)
    counts = {status: sum(r.status is status for r in reports) for status in Status}
    summary = Summary(
        **{"pass": counts[Status.PASS]},
        fail=counts[Status.FAIL],
        quarantine=counts[Status.QUARANTINE],
        quarantined=counts[Status.QUARANTINED],
        error=counts[Status.ERROR],
        exit_code=(
            exit_code_of(reports, complete=complete) if exit_code is None else ExitCode(exit_code)
        ),
    )
    return Artefact(run=RunInfo(**fields), summary=summary, evals=list(reports))


def invoke_split(*args: str) -> Result:
    """Run the CLI with stdout and stderr kept apart, as tests that read them separately need."""
    from firewall.cli import main

    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        runner = CliRunner()  # click 8.2 removed the option: the streams are always apart
    return runner.invoke(main, list(args), catch_exceptions=False)
