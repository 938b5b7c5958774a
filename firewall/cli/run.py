"""`firewall run`: probe and gate the selected evals."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli import render
from firewall.cli.common import (
    config_option,
    dry_run_option,
    k_option,
    output_options,
    seed_option,
    selection_options,
    shard_option,
)
from firewall.discovery import Shard
from firewall.pipeline import context
from firewall.pipeline.run import RunOptions
from firewall.pipeline.run import run as run_pipeline
from firewall.runner.seeds import BaseSeed


@click.command()
@selection_options
@config_option
@k_option()
@seed_option('Base seed for this run, or "random" (default: the config\'s `seed`).')
@output_options
@click.option(
    "--include-quarantined",
    is_flag=True,
    help="Probe quarantined evals too (their results never block).",
)
@shard_option
@dry_run_option
@click.option(
    "--affected/--all",
    "affected",
    default=None,
    help="Probe only the evals a change can affect and carry the rest from the default "
    "branch (--affected; a pull request's default unless [affected] enabled = false), "
    "or probe every eval (--all).",
)
@click.option("-v", "--verbose", is_flag=True, help="Show every rule's check for every eval.")
def run(
    ids: tuple[str, ...],
    tags: tuple[str, ...],
    config_path: Path | None,
    k: int | None,
    seed: BaseSeed | None,
    report: Path | None,
    include_quarantined: bool,
    shard: Shard | None,
    no_issues: bool,
    dry_run: bool,
    affected: bool | None,
    fmt: str,
    verbose: bool,
) -> None:
    """Probe each selected eval K times and gate on the result.

    Unstable evals (IQR above `flakiness`, or one trial collapsing far below
    the rest) are quarantined instead of failing the build; stable evals
    fail when their median is below `threshold`. Evals already in the
    quarantine registry are skipped unless --include-quarantined.
    """
    ctx = context.load(config_path, ids, tags, require=True, dry_run=dry_run)
    options = RunOptions(
        k=k,
        seed=seed,
        include_quarantined=include_quarantined,
        shard=shard,
        dry_run=dry_run,
        report=report,
        issues=not no_issues,
        affected=affected,
    )
    present = render.run_result(fmt, verbose=verbose, registry=ctx.settings.registry)
    with output.progress() as progress:
        result = run_pipeline(ctx, options, progress=progress, present=present)
    raise SystemExit(result.exit_code)
