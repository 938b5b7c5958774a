"""The artefact as one self-contained HTML page: inline CSS and SVG, no script, no outside asset.

The layout lives in ``templates/report.html.j2``; this module turns each eval
into display strings, and into the numbers of its pictures (``charts.py``): a
strip plot of its trials and, given the medians of recent runs, a trend chart.

Everything an eval supplied is untrusted: the template is rendered with
autoescape on, a Content-Security-Policy forbids scripts in case anything ever
slipped through, and every ``{{ value }}`` passes through ``_finalize``, which
drops control characters and writes line breaks as character references. That
keeps each value on the line where the template put it, so no line of the page
starts with eval text: printed in a GitHub job, a line starting with ``::``
would be read as a workflow command. The other form, ``##[`` anywhere in a
line, is defused where a page is printed or saved by ``firewall report``
(``output.inert_markup``, a character reference).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
from markupsafe import Markup, escape

from firewall._stats import Stats, quartiles
from firewall.artefact import Artefact, EvalReport, severity
from firewall.diagnostics import (
    FieldDrift,
    describe_drift,
    describe_flip,
    describe_hint,
    format_check,
)
from firewall.policy import Status
from firewall.report.charts import Mark, StripPlot, TrendChart, strip_plot, trend_chart
from firewall.runner.trial import TrialRecord
from firewall.text import MISSING, fmt, number, printable, sparkline
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
    open: bool  # what failed, errored or scattered starts unfolded
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
    strip: StripPlot | None
    strip_caption: str
    trend: TrendChart | None
    trend_caption: str
    sparkline: str


def render_html(
    artefact: Artefact, *, trends: Mapping[str, Sequence[float | None]] | None = None
) -> str:
    """The page, worst evals first.

    ``trends`` maps an eval id to its medians over recent runs, oldest first and
    this run last, None where a probe had none; an eval with two or more gets a
    trend chart, and the table a sparkline column.
    """
    trends = trends or {}
    ordered = sorted(artefact.evals, key=severity)
    views = [
        _view(report, position, trends.get(report.id, ()))
        for position, report in enumerate(ordered, start=1)
    ]
    return _ENV.get_template("report.html.j2").render(
        _context(artefact), evals=views, with_trends=any(view.trend for view in views)
    )


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


def _view(report: EvalReport, position: int, medians: Sequence[float | None]) -> EvalView:
    stats = report.stats
    # An errored probe's numbers come from the few trials that scored: not worth a glance.
    hide = report.status is Status.ERROR
    label = report.status.label
    css = report.status.value
    if report.status in (Status.FAIL, Status.ERROR) and not report.blocking:
        label, css = f"{label} (non-blocking)", "nonblocking"
    strip, strip_caption = _strip(report)
    return EvalView(
        anchor=f"eval-{position}",
        open=_unfolded(report),
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
        strip=strip,
        strip_caption=strip_caption,
        trend=_trend(medians, report.threshold),
        trend_caption=_trend_caption(medians, report.threshold),
        sparkline=sparkline(medians) if medians else MISSING,
    )


def _unfolded(report: EvalReport) -> bool:
    """Failing, errored and unstable evals are what a reader opens the page for."""
    if report.status in (Status.FAIL, Status.ERROR, Status.QUARANTINE):
        return True
    # Re-probed in quarantine (at night, or with --include-quarantined) and still scattering.
    return report.status is Status.QUARANTINED and any(not check.ok for check in report.checks)


def _strip(report: EvalReport) -> tuple[StripPlot | None, str]:
    """The strip plot of the trials that scored (none when none did), and the words under it."""
    if not report.trials:
        return None, ""
    marks = [
        Mark(
            value=trial.score,
            title=f"trial {trial.index}, seed {trial.seed}: {fmt(trial.score)}"
            + ("" if trial.passed is None else " passed" if trial.passed else " failed")
            + _judged(trial),
            css="" if trial.passed is None else "ok" if trial.passed else "bad",
            judgements=tuple(trial.judged.scores) if trial.judged is not None else (),
        )
        for trial in report.trials
        if trial.score is not None and trial.error is None
    ]
    # An errored probe's few scored trials are drawn, but their spread decided nothing.
    spread = None if report.status is Status.ERROR else _quartiles(report.stats, marks)
    words = [f"{len(marks)} of {len(report.trials)} trials scored"]
    if errored := sum(trial.error is not None for trial in report.trials):
        words.append(f"{errored} errored")
    if spread is not None:
        words.append(f"median {fmt(spread[1])}, IQR {fmt(spread[0])} to {fmt(spread[2])}")
    words.append(f"threshold {fmt(report.threshold)}")
    plot = strip_plot(marks, threshold=report.threshold, quartiles=spread) if marks else None
    return plot, "; ".join(words)


def _judged(trial: TrialRecord) -> str:
    """A judged output's judgements, for its dot's tooltip."""
    if trial.judged is None or len(trial.judged.scores) < 2:
        return ""
    return "; judged " + ", ".join(fmt(score) for score in trial.judged.scores)


def _quartiles(stats: Stats, marks: Sequence[Mark]) -> tuple[float, float, float] | None:
    """The artefact's quartiles; for an artefact without them, the same rules on its trials."""
    if stats.q1 is not None and stats.median is not None and stats.q3 is not None:
        return stats.q1, stats.median, stats.q3
    return quartiles([mark.value for mark in marks]) if marks else None


def _trend(medians: Sequence[float | None], threshold: float) -> TrendChart | None:
    last = len(medians) - 1
    marks = [
        None
        if median is None
        else Mark(
            value=median,
            title=("this run" if position == last else f"run {position + 1} of {last + 1}")
            + f": median {fmt(median)}",
            css="current" if position == last else "",
        )
        for position, median in enumerate(medians)
    ]
    return trend_chart(marks, threshold=threshold)


def _trend_caption(medians: Sequence[float | None], threshold: float) -> str:
    gaps = sum(median is None for median in medians)
    text = f"median of the last {len(medians)} runs, this one last, on a 0 to 1 scale"
    if gaps:
        text += f"; {gaps} without a median (errored)"
    return f"{text}; threshold {fmt(threshold)}"


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
