"""`firewall calibrate`: suggest `flakiness` from history, as a TOML snippet."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option, load_project
from firewall.errors import FirewallError
from firewall.report.calibrate import MIN_POINTS, calibrate
from firewall.store import history


@click.command(name="calibrate")
@config_option
@click.option("--json", "as_json", is_flag=True, help="The suggestions as JSON.")
def calibrate_command(config_path: Path | None, as_json: bool) -> None:
    """Suggest `flakiness` per eval and overall: the P80 of the IQRs seen in history.

    Each suggestion shows the share of past probes it would have quarantined,
    next to the share at the current setting, so the cost of the choice is
    visible. Needs at least 10 probes per suggestion. Prints a snippet to
    copy; the config is never rewritten.
    """
    project = load_project(config_path)
    settings = project.config.settings
    current = {spec.id: spec.flakiness for spec in project.specs}
    result = calibrate(history.scan(project.cwd / settings.history), current, settings.flakiness)
    if as_json:
        output.echo(result.model_dump_json(indent=2))
        return
    if result.overall.points == 0:
        raise FirewallError(
            f"{settings.history}: no probes recorded yet; calibrate after some "
            "runs (two weeks of history is a good start)"
        )
    output.echo(
        output.calibration_text(
            result, prefix=project.config.prefix, history=settings.history, min_points=MIN_POINTS
        )
    )
