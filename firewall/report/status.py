"""The triage view behind `firewall status`: registry entries joined with recent history."""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from firewall.store.registry import Entry
from firewall.text import sparkline
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
    drifting: dict[str, float] = {}  # output fields that varied in its latest probe


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
    rows: Iterable[dict[str, Any]],
    *,
    last_rows: list[dict[str, Any]] | None = None,
    at: dt.datetime,
    registry: str,
    release_after: int,
    days: int,
    defined: set[str],
) -> StatusView:
    """One pass over the history: the trend of every quarantined eval, and the last run.

    ``rows`` may be only the quarantined evals' rows when ``last_rows`` (the
    latest run's) is given; otherwise the last run is found in ``rows``.
    """
    window_start = to_text(at - dt.timedelta(days=days))
    trends: dict[str, list[float | None]] = {eval_id: [] for eval_id in entries}
    drifting: dict[str, dict[str, float]] = {}
    find_last = last_rows is None
    last_id: str | None = None
    latest: list[dict[str, Any]] = [] if last_rows is None else last_rows
    for row in rows:
        if find_last:
            run_id = row.get("run_id")
            if run_id != last_id:
                last_id, latest = run_id, []
            latest.append(row)
        trend = trends.get(row["eval_id"])
        if trend is None:
            continue
        if str(row.get("build_ts", "")) >= window_start:
            median = row.get("median")
            trend.append(float(median) if isinstance(median, (int, float)) else None)
        drift = row.get("drift")
        if isinstance(drift, dict) and row.get("median") is not None:
            drifting[row["eval_id"]] = {
                name: float(rate)
                for name, rate in drift.items()
                if isinstance(rate, (int, float)) and rate > 0
            }
    views = [
        _view(
            eval_id,
            entry,
            trends[eval_id],
            at=at,
            release_after=release_after,
            defined=eval_id in defined,
            drifting=drifting.get(eval_id, {}),
        )
        for eval_id, entry in sorted(entries.items(), key=lambda item: (item[1].since, item[0]))
    ]
    last_run = None
    if latest:
        first = latest[0]
        last_run = LastRun(
            run_id=str(first.get("run_id")),
            mode=str(first.get("mode")),
            build_ts=str(first.get("build_ts")),
            counts=dict(Counter(str(row.get("status")) for row in latest)),
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
    )


def issue_url(number: int | None) -> str | None:
    repository = os.environ.get("GITHUB_REPOSITORY")
    if number is None or not repository:
        return None
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    return f"{server}/{repository}/issues/{number}"


def trends(
    rows: Iterable[dict[str, Any]], ids: Iterable[str], *, at: dt.datetime, days: int = 14
) -> dict[str, str]:
    """A sparkline of each eval's median over the last ``days``, for the job summary."""
    window_start = to_text(at - dt.timedelta(days=days))
    series: dict[str, list[float | None]] = {eval_id: [] for eval_id in ids}
    for row in rows:
        trend = series.get(row["eval_id"])
        if trend is not None and str(row.get("build_ts", "")) >= window_start:
            median = row.get("median")
            trend.append(float(median) if isinstance(median, (int, float)) else None)
    return {eval_id: sparkline(values) for eval_id, values in series.items() if values}
