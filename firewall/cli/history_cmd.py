"""`firewall history compact`: keep the history file from growing without bound."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option
from firewall.pipeline import context, manual


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
    ctx = context.load(config_path, with_evals=False)
    kept, dropped = manual.compact_history(ctx, keep_days=keep_days)
    output.echo(
        f"{ctx.settings.history}: kept {kept} rows, dropped {dropped} older than {keep_days} days"
    )
