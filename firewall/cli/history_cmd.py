"""`firewall history compact`: keep the history file from growing without bound."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option
from firewall.config import load_config
from firewall.store import history
from firewall.timeutil import now, to_text


@click.group(name="history")
def history_group() -> None:
    """Maintain the append-only history file."""


@history_group.command()
@click.option(
    "--keep-days",
    type=click.IntRange(min=1),
    default=90,
    show_default=True,
    help="Keep the rows of the last N days.",
)
@config_option
def compact(keep_days: int, config_path: Path | None) -> None:
    """Drop history rows older than --keep-days, atomically and under the lock."""
    config = load_config(config_path, Path.cwd())
    path = Path.cwd() / config.settings.history
    kept, dropped = history.compact(path, keep_after=to_text(now() - dt.timedelta(days=keep_days)))
    output.echo(
        f"{config.settings.history}: kept {kept} rows, dropped {dropped} older than "
        f"{keep_days} days"
    )
