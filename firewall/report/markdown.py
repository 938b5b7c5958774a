"""The run as Markdown: the job summary (contract §7) and `firewall report --markdown`.

The layout lives in ``templates/summary.md.j2``; this module decides what goes
in it: the rows worst first, every cell escaped (an eval's reason is whatever
it printed, and must not become a table column, HTML or an image), and only
as many rows as fit in GitHub's 1 MiB per step. Beyond a screenful of evals it
leads with those that need a look (``firewall.report.selection``).
"""

from __future__ import annotations

import dataclasses
import html
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2

from firewall._stats import Stats
from firewall.artefact import Artefact, EvalReport, severity
from firewall.diagnostics import describe_flip, describe_hint, format_check
from firewall.policy import Status
from firewall.report import affected
from firewall.report.selection import select
from firewall.report.terminal import adaptivity
from firewall.text import fmt, number, printable

SUMMARY_LIMIT = 1024 * 1024 - 1024
"""GitHub refuses a step summary over 1 MiB; the rest is headroom for what else the step adds."""

REASON_LIMIT = 500
ID_LIMIT = 200
OVERDUE_SHOWN = 50

_BREAKS = re.compile(r"\r\n|[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")
_MARKDOWN = re.compile(r"([\\`*_\[\]!|~#])")
URL_SAFE = ":/?#@!$&'*+,;=%-._~"  # everything else (spaces, parentheses, <>) is quoted

ICONS = {"pass": "✅", "fail": "❌", "error": "💥"}
STATUS_ICONS = {
    Status.PASS: "✅",
    Status.FAIL: "❌",
    Status.ERROR: "💥",
    Status.QUARANTINE: "🚧",
    Status.QUARANTINED: "🔒",
}

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("firewall", "report/templates"),
    # Markdown, not HTML: cells are escaped by cell() instead.
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)


@dataclasses.dataclass(frozen=True)
class Row:
    """One eval as the summary shows it, every field already escaped."""

    status: str
    id: str
    median: str
    iqr: str
    k: str
    pass_rate: str
    trend: str
    reason: str
    issue: str
    quarantine: bool
    usage: str = "-"  # p50/p95 latency, mean tokens, mean cost: shown even without budgets
    details: tuple[str, ...] = ()  # checklist and likely causes of a failing or unstable eval


def cell(text: str, limit: int = REASON_LIMIT) -> str:
    """``text`` made inert in a Markdown table cell: one line, no HTML, no markup."""
    text = printable(_BREAKS.sub(" ", text))
    if len(text) > limit:
        text = text[:limit] + "…"
    # Entities first, then backslashes: '<' can open no tag, '|' no column,
    # '![x](url)' no image, '`' no code span.
    return _MARKDOWN.sub(r"\\\1", html.escape(text, quote=False))


def issue_link(url: str) -> str:
    """A Markdown link ``[#42](url)`` to an issue; anything not http(s) is shown as text."""
    if not url.startswith(("https://", "http://")):
        return cell(url)
    last = url.rstrip("/").rsplit("/", 1)[-1]
    label = f"#{last}" if last.isdigit() else "issue"
    return f"[{label}]({urllib.parse.quote(url, safe=URL_SAFE)})"


def render_summary(
    artefact: Artefact,
    *,
    trends: Mapping[str, str] | None = None,
    issue_links: Mapping[str, str] | None = None,
    overdue: Sequence[str] = (),
    report: str | None = None,
    limit_bytes: int = SUMMARY_LIMIT,
) -> str:
    """The run as Markdown, at most ``limit_bytes`` of UTF-8.

    Up to a screenful of evals (``selection.SCREENFUL``) the table has every
    one, worst first. Beyond, it has those that need a look, a line counts the
    rest, and every eval is in a collapsed table below, if that fits in
    ``limit_bytes``; else the line points to the JSON report. A table that still
    does not fit loses its last rows, with a note.

    ``trends`` maps an eval id to its sparkline, ``issue_links`` to the URL of
    its quarantine issue; ``overdue`` lists quarantines due for review and
    ``report`` names the JSON report the truncation note points to.
    """
    ordered = sorted(artefact.evals, key=severity)
    chosen = select(ordered)  # beyond a screenful: what needs a look, and a count of the rest
    every = [_row(r, trends or {}, issue_links or {}) for r in ordered]
    rows = every[: len(chosen.shown)]  # the first of the same order
    template = _ENV.get_template("summary.md.j2")
    context = _context(artefact, overdue, report) | {"more": chosen.counted(), "every": []}
    if chosen.rest:  # every eval in a collapsed table, if it fits
        text = template.render(context | {"every": every}, rows=rows, omitted=0)
        if _size(text) <= limit_bytes:
            return text
    text = template.render(context, rows=rows, omitted=0)
    if _size(text) <= limit_bytes:
        return text
    shown = _rows_that_fit(template, context, rows, limit_bytes)
    text = template.render(context, rows=rows[:shown], omitted=len(rows) - shown)
    while _size(text) > limit_bytes and shown > 0:  # the estimate is exact; this is a guard
        shown -= 1
        text = template.render(context, rows=rows[:shown], omitted=len(rows) - shown)
    if _size(text) > limit_bytes:
        raise ValueError(
            f"limit_bytes={limit_bytes} leaves no room for the summary's {_size(text)}-byte header"
        )
    return text


def _rows_that_fit(
    template: jinja2.Template, context: Mapping[str, Any], rows: Sequence[Row], limit_bytes: int
) -> int:
    """How many of the first rows fit, measured with the template's own macros."""
    # The fixed part with the longest possible note: fewer rows left out never
    # makes it longer.
    budget = limit_bytes - _size(template.render(context, rows=[], omitted=len(rows)))
    # Macros are attributes the template defines: typed Any, as jinja2 cannot know them.
    module: Any = template.make_module({**context, "rows": [], "omitted": 0})
    shown = 0
    for row in rows:
        cost = _size(str(module.row(row))) + 1
        if row.quarantine:
            cost += _size(str(module.quarantine_item(row))) + 1
        if row.details:
            cost += _size(str(module.details(row))) + 1
        if cost > budget:
            break
        budget -= cost
        shown += 1
    return shown


def _context(artefact: Artefact, overdue: Sequence[str], report: str | None) -> dict[str, Any]:
    result = artefact.summary.result
    return {
        "icon": ICONS[result],
        "result": result.upper() + ("" if artefact.run.complete else " (interrupted)"),
        "counts": counts(artefact),
        "run_line": _run_line(artefact),
        "affected": affected.markdown(artefact),
        "complete": artefact.run.complete,
        "total": len(artefact.evals),
        "report": cell(report, ID_LIMIT) if report else "",
        "overdue": ", ".join(cell(eval_id, ID_LIMIT) for eval_id in overdue[:OVERDUE_SHOWN]),
        "overdue_more": max(0, len(overdue) - OVERDUE_SHOWN),
    }


def counts(artefact: Artefact) -> str:
    """The run's counts in bold, as the job summary and the pull-request comment open."""
    s = artefact.summary
    nonblocking = sum(
        1 for r in artefact.evals if not r.blocking and r.status in (Status.FAIL, Status.ERROR)
    )
    parts = [
        f"**{s.pass_}** passed",
        f"**{s.fail}** failed",
        f"**{s.error}** errored",
        f"**{s.quarantine}** newly quarantined",
        f"**{s.quarantined}** in quarantine",
    ]
    note = f" ({nonblocking} of the failures and errors non-blocking)" if nonblocking else ""
    return " · ".join(parts) + note


def _run_line(artefact: Artefact) -> str:
    run = artefact.run
    parts = [f"mode {run.mode}", f"base seed {run.base_seed}"]
    if run.git_sha:
        parts.append(f"commit {cell(run.git_sha[:12], ID_LIMIT)}")
    if run.shard:
        parts.append(f"shard {cell(run.shard, ID_LIMIT)}")
    if run.partial:
        parts.append(f"**partial** ({cell('; '.join(run.partial))})")
    if run.stale:
        parts.append(f"**another commit's parts** ({cell('; '.join(run.stale))})")
    if note := adaptivity(artefact):
        parts.append(f"{artefact.summary.trials} trials ({note})")
    parts.append(f"exit code {artefact.summary.exit_code}")
    return "Run: " + ", ".join(parts)


def _in_quarantine(report: EvalReport) -> bool:
    return report.status in (Status.QUARANTINE, Status.QUARANTINED)


def _row(report: EvalReport, trends: Mapping[str, str], issue_links: Mapping[str, str]) -> Row:
    stats = report.stats
    errored = report.status is Status.ERROR
    label = report.status.label
    icon = STATUS_ICONS[report.status]
    if report.status in (Status.FAIL, Status.ERROR) and not report.blocking:
        icon, label = "⚠️", label + " (non-blocking)"
    url = issue_links.get(report.id)
    return Row(
        status=f"{icon} {label}",
        id=cell(report.id, ID_LIMIT),
        # An errored probe's numbers come from the few trials that scored: not worth a glance.
        median="-" if errored else _median_cell(stats),
        iqr="-" if errored else number(stats.iqr),
        k=str(len(report.trials) or report.k),
        pass_rate="-" if stats.pass_rate is None or errored else f"{stats.pass_rate * 100:.0f}%",
        trend=cell(trends.get(report.id, ""), ID_LIMIT),
        reason=cell(report.reason),
        issue=issue_link(url) if url else "",
        quarantine=_in_quarantine(report),
        usage=_usage(report),
        details=_details(report),
    )


def _usage(report: EvalReport) -> str:
    stats = report.stats
    parts = []
    if stats.p95_latency_ms is not None and stats.p50_latency_ms is not None:
        parts.append(f"p50 {stats.p50_latency_ms:.0f} ms, p95 {stats.p95_latency_ms:.0f} ms")
    if stats.mean_tokens is not None:
        parts.append(f"{stats.mean_tokens:.0f} tokens")
    if stats.mean_cost_usd is not None:
        parts.append("$" + (f"{stats.mean_cost_usd:.7f}".rstrip("0").rstrip(".") or "0"))
    return cell(", ".join(parts), ID_LIMIT) if parts else "-"


def _median_cell(stats: Stats) -> str:
    """The median with its distribution-free interval: ``0.85 [0.83, 0.87]``."""
    if stats.median_low is None or stats.median_high is None:
        return number(stats.median)
    return f"{number(stats.median)} [{fmt(stats.median_low)}, {fmt(stats.median_high)}]"


def intervals(stats: Stats) -> str:
    """Both intervals in words, with what each assumes; "" without a scored trial."""
    if stats.median_low is None or stats.median_high is None:
        return ""
    text = (
        f"median {number(stats.median)} in [{fmt(stats.median_low)}, {fmt(stats.median_high)}] "
        f"({stats.median_coverage or 0:.1%}, order statistics, distribution-free)"
    )
    if stats.mean_low is not None and stats.mean_high is not None:
        text += (
            f"; mean {number(stats.mean)} in [{fmt(stats.mean_low)}, {fmt(stats.mean_high)}] "
            "(Student's t)"
        )
    return text


def _details(report: EvalReport) -> tuple[str, ...]:
    """Every rule's check and the likely causes, for the evals someone has to look at."""
    if report.status is Status.PASS or not (report.checks or report.hints):
        return ()
    lines = [cell(format_check(check)) for check in report.checks]
    if intervals(report.stats):
        lines.append(cell("intervals: " + intervals(report.stats)))
    lines += [cell("likely: " + describe_hint(hint)) for hint in report.hints[:3]]
    lines += [cell("flipping: " + describe_flip(flip)) for flip in report.flips[:5]]
    return tuple(lines)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))
