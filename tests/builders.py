"""Shared builders for the tests: specs, trial records and eval files, with sane defaults."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from firewall.artefact import EvalReport
from firewall.config import Budgets
from firewall.policy import Status
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec, Source
from firewall.stats import Stats

DEFAULT_THRESHOLD = 0.8


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
