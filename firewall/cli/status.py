"""`firewall status`: the triage view of the registry and the recent history."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option
from firewall.constants import RECENT_RUNS, TREND_DAYS
from firewall.pipeline import context
from firewall.pipeline.views import status_view
from firewall.report.status import render_status


@click.command()
@config_option
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=TREND_DAYS,
    show_default=True,
    help=(
        f"How far back the trend reaches. Up to {TREND_DAYS} days it is drawn from each"
        f" eval's newest {RECENT_RUNS} runs; beyond, the state branch's weekly rollups"
        " are fetched for it."
    ),
)
@click.option("--json", "as_json", is_flag=True, help="The same data as JSON, for scripts.")
def status(config_path: Path | None, days: int, as_json: bool) -> None:
    """Show every quarantined eval: age, reason, numbers, streak, trend, issue, owner.

    Entries past their review date are flagged; that never fails anything.
    A short block on the last recorded run follows.
    """
    view = status_view(context.load(config_path, with_evals=False), days=days)
    if as_json:
        output.echo_json(view.model_dump_json(indent=2))
        return
    output.echo(render_status(view))
