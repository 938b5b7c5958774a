"""`firewall calibrate`: suggest `flakiness` from history, as a TOML snippet."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option
from firewall.errors import UsageError
from firewall.pipeline import context
from firewall.pipeline.views import calibration
from firewall.report.calibrate import MIN_POINTS, render_calibration


@click.command(name="calibrate")
@config_option
@click.option("--json", "as_json", is_flag=True, help="The suggestions as JSON.")
def calibrate_command(config_path: Path | None, as_json: bool) -> None:
    """Suggest `flakiness` per eval and overall from each eval's within-run spread.

    Per eval: the flakiness at which an eval as steady as its runs have been
    (their sd, pooled, at its 95% upper bound) is quarantined in 1% of probes
    by the spread test; overall, the median of those. Each suggestion shows
    the share of past probes it would have quarantined, next to the share at
    the current setting, so the cost of the choice is visible. Needs at least
    10 probes per suggestion. Prints a snippet to copy; the config is never
    rewritten.
    """
    ctx = context.load(config_path)
    result = calibration(ctx)
    if as_json:
        output.echo_json(result.model_dump_json(indent=2))
        return
    history = ctx.settings.history
    if result.overall.points == 0:
        raise UsageError(
            f"{history}: no probes recorded yet; calibrate after some "
            "runs (two weeks of history is a good start)"
        )
    output.echo(
        render_calibration(result, prefix=ctx.config.prefix, history=history, min_points=MIN_POINTS)
    )
