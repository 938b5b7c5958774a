"""The triage view behind `firewall status`: registry entries joined with recent history."""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from collections.abc import Collection, Iterable

from pydantic import BaseModel

from firewall.constants import TREND_DAYS, TREND_POINTS
from firewall.lifecycle import Entry
from firewall.store.history import HistoryRow, HistoryStore
from firewall.text import columns, fmt, number, sparkline
from firewall.timeutil import Timestamp, to_text


class QuarantineView(BaseModel):
    id: str
    source: str
    since: Timestamp
    age_days: int
    reason: str
    median: float | None
    iqr: float | None
    streak: int
    release_after: int
    trend: list[float | None]
    sparkline: str
    issue: int | None
    issue_url: str | None
    review_by: Timestamp | None
    overdue: bool
    owner: str | None
    defined: bool
    drifting: dict[str, float] = {}  # output fields that varied in its latest probe in the window
    not_planned: int | None = None  # its issue, closed by a person as not planned
    # Its latest probe in the window failed consistently: broken, not flaky (contract §4).
    failing: bool = False


class LastRun(BaseModel):
    run_id: str
    mode: str
    build_ts: str
    counts: dict[str, int]


class StatusView(BaseModel):
    generated_at: Timestamp
    registry: str
    trend_days: int
    quarantined: list[QuarantineView]
    overdue: list[str]
    last_run: LastRun | None


def build(
    entries: dict[str, Entry],
    rows: Iterable[HistoryRow],
    *,
    last_rows: list[HistoryRow] | None = None,
    at: dt.datetime,
    registry: str,
    release_after: int,
    days: int,
    defined: set[str],
) -> StatusView:
    """One pass over the history: the trend of every quarantined eval, and the last run.

    ``rows`` may be only the quarantined evals' rows of the last ``days`` when
    ``last_rows`` (the latest run's) is given; otherwise the last run is found in
    ``rows``. An eval's drifting fields are those of its latest probe in ``rows``.
    """
    window_start = to_text(at - dt.timedelta(days=days))
    trends: dict[str, list[float | None]] = {eval_id: [] for eval_id in entries}
    drifting: dict[str, dict[str, float]] = {}
    latest_status: dict[str, str] = {}
    find_last = last_rows is None
    last_id: str | None = None
    latest: list[HistoryRow] = [] if last_rows is None else last_rows
    for row in rows:
        if find_last:
            if row.run_id != last_id:
                last_id, latest = row.run_id, []
            latest.append(row)
        trend = trends.get(row.eval_id)
        if trend is None:
            continue
        if row.build_ts >= window_start:
            trend.append(row.median)
        if row.median is not None:  # a probe, not a run that skipped it
            drifting[row.eval_id] = {name: rate for name, rate in row.drift.items() if rate > 0}
            latest_status[row.eval_id] = row.status
    views = [
        _view(
            eval_id,
            entry,
            trends[eval_id],
            at=at,
            release_after=release_after,
            defined=eval_id in defined,
            drifting=drifting.get(eval_id, {}),
            failing=latest_status.get(eval_id) == "fail",
        )
        for eval_id, entry in sorted(entries.items(), key=lambda item: (item[1].since, item[0]))
    ]
    last_run = None
    if latest:
        first = latest[0]
        last_run = LastRun(
            run_id=first.run_id,
            mode=first.mode,
            build_ts=first.build_ts,
            counts=dict(Counter(row.status for row in latest)),
        )
    return StatusView(
        generated_at=at,
        registry=registry,
        trend_days=days,
        quarantined=views,
        overdue=[view.id for view in views if view.overdue],
        last_run=last_run,
    )


def _view(
    eval_id: str,
    entry: Entry,
    trend: list[float | None],
    *,
    at: dt.datetime,
    release_after: int,
    defined: bool,
    drifting: dict[str, float],
    failing: bool = False,
) -> QuarantineView:
    return QuarantineView(
        id=eval_id,
        source=entry.source,
        since=entry.since,
        age_days=(at - entry.since).days,
        reason=entry.reason,
        median=entry.median,
        iqr=entry.iqr,
        streak=entry.stable_streak,
        release_after=release_after,
        trend=trend,
        sparkline=sparkline(trend),
        issue=entry.issue,
        issue_url=issue_url(entry.issue),
        review_by=entry.review_by,
        overdue=entry.overdue(at),
        owner=entry.owner,
        defined=defined,
        drifting=drifting,
        failing=failing,
    )


def issue_url(number: int | None) -> str | None:
    repository = os.environ.get("GITHUB_REPOSITORY")
    if number is None or not repository:
        return None
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    return f"{server}/{repository}/issues/{number}"


def read_trends(
    history: HistoryStore, ids: Collection[str], *, at: dt.datetime, days: int = TREND_DAYS
) -> dict[str, str]:
    """``trends`` of these evals, reading only what a sparkline draws: each eval's newest
    ``TREND_POINTS`` medians of the window, and no row built where the store can help it."""
    since = at - dt.timedelta(days=days)
    series = history.medians(ids, since=since, last=TREND_POINTS)
    return {
        eval_id: sparkline(values, TREND_POINTS)
        for eval_id in ids
        if (values := series.get(eval_id))
    }


def trends(
    rows: Iterable[HistoryRow], ids: Iterable[str], *, at: dt.datetime, days: int = TREND_DAYS
) -> dict[str, str]:
    """A sparkline of each eval's median over the last ``days``, for the job summary."""
    window_start = to_text(at - dt.timedelta(days=days))
    series: dict[str, list[float | None]] = {eval_id: [] for eval_id in ids}
    for row in rows:
        trend = series.get(row.eval_id)
        if trend is not None and row.build_ts >= window_start:
            trend.append(row.median)
    return {
        eval_id: sparkline(values, TREND_POINTS) for eval_id, values in series.items() if values
    }


def render_status(view: StatusView) -> str:
    """The triage view for people."""
    lines = []
    if not view.quarantined:
        lines.append(f"no eval is quarantined ({view.registry})")
    else:
        lines.append(
            f"{len(view.quarantined)} quarantined in {view.registry} "
            f"(trend: last {view.trend_days} days)"
        )
        header = ("EVAL", "AGE", "MEDIAN", "IQR", "STREAK", "TREND", "ISSUE", "OWNER", "REVIEW")
        rows = [
            (
                q.id,
                f"{q.age_days}d",
                number(q.median),
                number(q.iqr),
                f"{q.streak}/{q.release_after}",
                q.sparkline or "-",
                q.issue_url or (f"#{q.issue}" if q.issue else "-"),
                f"@{q.owner}" if q.owner else "-",
                "OVERDUE" if q.overdue else (f"by {q.review_by:%Y-%m-%d}" if q.review_by else "-"),
            )
            for q in view.quarantined
        ]
        lines.extend(columns([header, *rows]))
        lines.append("")
        for q in view.quarantined:
            gone = "" if q.defined else " [no longer defined: release it]"
            lines.append(f"  {q.id} ({q.source}, since {q.since:%Y-%m-%d}){gone}: {q.reason}")
            if q.failing:
                lines.append(
                    "    its latest probe failed consistently: broken, not flaky; it blocks "
                    "wherever it is probed, and fails the gate once released: fix it"
                )
            if q.not_planned is not None:
                lines.append(
                    f"    issue #{q.not_planned} was closed as not planned: the quarantine stays, "
                    "without an issue; release it when the team is done with it"
                )
            if q.drifting:
                fields = ", ".join(
                    f"{name} {fmt(rate)}"
                    for name, rate in sorted(q.drifting.items(), key=lambda item: -item[1])[:5]
                )
                lines.append(f"    drifting fields: {fields}")
    if view.overdue:
        lines.append("")
        lines.append(f"review overdue: {', '.join(view.overdue)} (a flag, never a failure)")
    lines.append("")
    if view.last_run is None:
        lines.append("last run: none recorded yet")
    else:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(view.last_run.counts.items()))
        lines.append(f"last run: {view.last_run.mode} at {view.last_run.build_ts}: {counts}")
    return "\n".join(lines)
