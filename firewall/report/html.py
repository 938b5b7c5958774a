"""The artefact as one self-contained HTML page: inline CSS, no script, no outside asset.

The layout lives in ``templates/report.html.j2``; this module turns each eval
into display strings. Everything an eval supplied is untrusted: the template
is rendered with autoescape on, a Content-Security-Policy forbids scripts in
case anything ever slipped through, and every ``{{ value }}`` passes through
``_finalize``, which drops control characters and writes line breaks as
character references. That keeps each value on the line where the template put
it, so no line of the page starts with eval text: printed in a GitHub job, a
line starting with ``::`` would be read as a workflow command. The other form,
``##[`` anywhere in a line, is defused where a page is printed or saved by
``firewall report`` (``output.inert_markup``, a character reference).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jinja2
from markupsafe import Markup, escape

from firewall.artefact import Artefact, EvalReport, severity
from firewall.diagnostics import (
    FieldDrift,
    describe_drift,
    describe_flip,
    describe_hint,
    format_check,
)
from firewall.policy import Status
from firewall.runner.trial import TrialRecord
from firewall.text import fmt, number, printable
from firewall.timeutil import to_text


@dataclasses.dataclass(frozen=True)
class TrialRow:
    index: int
    seed: int
    score: str
    passed: str
    duration: str
    in_flight: int
    error: str


@dataclasses.dataclass(frozen=True)
class EvalView:
    """One eval as the page shows it; strings are raw here and escaped by the template."""

    anchor: str
    open: bool  # what blocked the run starts unfolded
    id: str
    status: str
    css: str
    source: str
    median: str
    iqr: str
    k: str
    pass_rate: str
    reason: str
    settings: str
    checks: tuple[str, ...]
    hints: tuple[str, ...]
    flips: tuple[str, ...]
    drift: tuple[str, ...]
    trials: tuple[TrialRow, ...]


def render_html(artefact: Artefact) -> str:
    """The page, worst evals first."""
    ordered = sorted(artefact.evals, key=severity)
    views = [_view(report, position) for position, report in enumerate(ordered, start=1)]
    return _ENV.get_template("report.html.j2").render(_context(artefact), evals=views)


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}``: clean, escaped, and kept on one line of the page."""
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    text = printable(value).replace("\r\n", "\n").replace("\r", "\n")
    # A character reference is the same newline to a browser, but not to a log reader.
    return Markup(str(escape(text)).replace("\n", "&#10;"))


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("firewall", "report/templates"),
    autoescape=True,
    finalize=_finalize,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)


def _context(artefact: Artefact) -> dict[str, Any]:
    run, summary = artefact.run, artefact.summary
    info = [
        ("mode", run.mode),
        ("base seed", str(run.base_seed)),
        ("started", to_text(run.started_at)),
        ("finished", to_text(run.finished_at) if run.finished_at else "-"),
        ("commit", run.git_sha or "-"),
        ("ref", run.git_ref or "-"),
        ("shard", run.shard or "-"),
        ("exit code", str(summary.exit_code)),
        ("tool", f"{artefact.tool.name} {artefact.tool.version}"),
    ]
    counts = [
        ("pass", "passed", summary.pass_),
        ("fail", "failed", summary.fail),
        ("error", "errored", summary.error),
        ("quarantine", "newly quarantined", summary.quarantine),
        ("quarantined", "in quarantine", summary.quarantined),
    ]
    result = summary.result
    headline = result.upper() + ("" if run.complete else " (interrupted)")
    return {
        "result": result,
        "headline": headline,
        "info": info,
        "counts": counts,
        "complete": run.complete,
    }


def _view(report: EvalReport, position: int) -> EvalView:
    stats = report.stats
    # An errored probe's numbers come from the few trials that scored: not worth a glance.
    hide = report.status is Status.ERROR
    label = report.status.label
    css = report.status.value
    if report.status in (Status.FAIL, Status.ERROR) and not report.blocking:
        label, css = f"{label} (non-blocking)", "nonblocking"
    return EvalView(
        anchor=f"eval-{position}",
        open=report.blocking and report.status in (Status.FAIL, Status.ERROR),
        id=report.id,
        status=label,
        css=css,
        source=str(report.source),
        median="-" if hide else number(stats.median),
        iqr="-" if hide else number(stats.iqr),
        k=str(len(report.trials) or report.k),
        pass_rate="-" if hide or stats.pass_rate is None else f"{stats.pass_rate * 100:.0f}%",
        reason=report.reason,
        settings=f"threshold {fmt(report.threshold)}, flakiness {fmt(report.flakiness)}, "
        f"k {report.k}" + ("" if report.blocking else ", non-blocking"),
        checks=tuple(format_check(check) for check in report.checks),
        hints=tuple(describe_hint(hint) for hint in report.hints),
        flips=tuple(describe_flip(flip) for flip in report.flips),
        drift=_drift(report),
        trials=tuple(_trial(trial) for trial in report.trials),
    )


def _drift(report: EvalReport) -> tuple[str, ...]:
    """Drifting fields first, each with its most common values."""
    entries = [
        FieldDrift(
            name=name,
            drift=rate,
            trials=len(report.trials),
            distribution=report.distributions.get(name, []),
        )
        for name, rate in report.drift.items()
    ]
    entries.sort(key=lambda entry: -entry.drift)
    return tuple(describe_drift(entry) for entry in entries)


def _trial(trial: TrialRecord) -> TrialRow:
    passed = "-" if trial.passed is None else ("yes" if trial.passed else "no")
    if trial.violations:
        passed += f" (violations: {', '.join(trial.violations)})"
    return TrialRow(
        index=trial.index,
        seed=trial.seed,
        score=number(trial.score),
        passed=passed,
        duration=f"{trial.duration_s:.2f} s",
        in_flight=trial.in_flight,
        error=trial.error or "",
    )
