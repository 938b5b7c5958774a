"""`firewall status`: the triage view of the registry and the recent history."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option
from firewall.config import load_config
from firewall.errors import FirewallError
from firewall.report import status as triage
from firewall.store import history
from firewall.store.registry import Registry
from firewall.timeutil import now


@click.command()
@config_option
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=14,
    show_default=True,
    help="How far back the trend reaches.",
)
@click.option("--json", "as_json", is_flag=True, help="The same data as JSON, for scripts.")
def status(config_path: Path | None, days: int, as_json: bool) -> None:
    """Show every quarantined eval: age, reason, numbers, streak, trend, issue, owner.

    Entries past their review date are flagged; that never fails anything.
    A short block on the last recorded run follows.
    """
    cwd = Path.cwd()
    config = load_config(config_path, cwd)
    settings = config.settings
    entries = Registry(cwd / settings.registry).read()
    defined = _defined_ids(config_path, set(entries))
    path = cwd / settings.history
    view = triage.build(
        entries,
        history.scan(path, entries),
        last_rows=history.last_run(path),
        at=now(),
        registry=settings.registry,
        release_after=settings.nightly.release_after,
        days=days,
        defined=defined,
    )
    if as_json:
        output.echo(view.model_dump_json(indent=2))
        return
    output.echo_untrusted(output.status_text(view))


def _defined_ids(config_path: Path | None, wanted: set[str]) -> set[str]:
    """Which quarantined ids still exist; discovery failures only lose that detail."""
    if not wanted:
        return set()
    from firewall.cli.common import load_project

    try:
        return {spec.id for spec in load_project(config_path).specs} & wanted
    except FirewallError:
        return wanted
