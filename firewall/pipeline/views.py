"""The read-only commands' one call each: the triage view and the calibration."""

from __future__ import annotations

import datetime as dt

from firewall.discovery import discover
from firewall.errors import FirewallError
from firewall.pipeline import effects
from firewall.pipeline.context import Context
from firewall.pipeline.defined import kind_of
from firewall.report.calibrate import Calibration, calibrate
from firewall.report.status import StatusView, build


def status_view(ctx: Context, *, days: int) -> StatusView:
    """`firewall status`: every quarantined eval with its trend, and the last recorded run."""
    entries = ctx.keeper.team_entries()
    at = ctx.clock()
    view = build(
        entries,
        ctx.history.recent(set(entries), since=at - dt.timedelta(days=days)),
        last_rows=ctx.history.last_run(),
        at=at,
        registry=ctx.settings.registry,
        release_after=ctx.settings.nightly.release_after,
        days=days,
        defined=_defined_ids(ctx, set(entries)),
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
