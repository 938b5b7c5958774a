"""The read-only commands' one call each: the triage view and the calibration."""

from __future__ import annotations

import datetime as dt

from firewall.constants import TREND_DAYS
from firewall.discovery import discover
from firewall.errors import FirewallError
from firewall.pipeline import effects
from firewall.pipeline.context import Context
from firewall.pipeline.defined import kind_of
from firewall.report.calibrate import Calibration, calibrate
from firewall.report.status import LastRun, StatusView, build
from firewall.store.shared import SharedHistory


def status_view(ctx: Context, *, days: int) -> StatusView:
    """`firewall status`: every quarantined eval with its trend, and the last recorded run."""
    if isinstance(ctx.history, SharedHistory):
        ctx.history.triage()  # what it shows is cut for it on the branch: read that
    entries = ctx.keeper.team_entries()
    at = ctx.clock()
    # The default window's trend is drawn from each eval's newest runs, which the state
    # branch keeps whole (RECENT_RUNS of them: a month of nightly probes, and more points
    # than a sparkline draws at any cadence); a longer window adds the older runs' weekly
    # means, which the branch keeps off its tip and fetches only for this.
    since = at - dt.timedelta(days=days)
    view = build(
        entries,
        ctx.history.recent(set(entries), since=since, weeks=days > TREND_DAYS),
        last_rows=[],  # the last run's counts are read alone, below
        at=at,
        registry=ctx.settings.registry,
        release_after=ctx.settings.nightly.release_after,
        days=days,
        defined=_defined_ids(ctx, set(entries)),
    )
    if (last := ctx.history.last_run_summary()) is not None:
        view.last_run = LastRun(
            run_id=last.run_id, mode=last.mode, build_ts=last.build_ts, counts=dict(last.counts)
        )
    declined = effects.declined_issues(ctx) if entries else {}
    for quarantined in view.quarantined:
        if quarantined.id in declined:
            quarantined.not_planned = declined[quarantined.id]
    return view


def calibration(ctx: Context) -> Calibration:
    """`firewall calibrate`: per eval, the flakiness at which its within-run sd is
    quarantined in 1% of probes (``firewall.report.calibrate``), and the evals' median."""
    current = {spec.id: spec.flakiness for spec in ctx.specs}
    return calibrate(ctx.history.scan(), current, ctx.settings.flakiness)


def _defined_ids(ctx: Context, wanted: set[str]) -> set[str]:
    """Which quarantined ids still name a test: an eval, a suite's case, a pytest test. A
    discovery failure only loses that detail."""
    if not wanted:
        return set()
    try:
        specs = discover(ctx.config, ctx.cwd)
    except FirewallError:
        return wanted
    return {eval_id for eval_id in wanted if kind_of(specs, eval_id, ctx.cwd) is not None}
