"""`firewall run`: probe and gate the selected evals."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import (
    SeedParam,
    config_option,
    load_project,
    output_options,
    selection_options,
)
from firewall.pipeline import run as pipeline
from firewall.pipeline.effects import after_decision


@click.command()
@selection_options
@config_option
@click.option("--k", type=click.IntRange(min=3), help="Trials per eval, overriding the config.")
@click.option("--seed", type=SeedParam(), help='Base seed for this run, or "random".')
@output_options
@click.option(
    "--include-quarantined",
    is_flag=True,
    help="Probe quarantined evals too (their results never block).",
)
@click.option("--shard", metavar="I/N", help="Run only shard I of N (1-based) of the evals.")
@click.option("--dry-run", is_flag=True, help="Decide and print; change no file and no issue.")
@click.option("-v", "--verbose", is_flag=True, help="Show every rule's check for every eval.")
def run(
    ids: tuple[str, ...],
    tags: tuple[str, ...],
    config_path: Path | None,
    k: int | None,
    seed: int | str | None,
    report: Path | None,
    include_quarantined: bool,
    shard: str | None,
    no_issues: bool,
    dry_run: bool,
    fmt: str,
    verbose: bool,
) -> None:
    """Probe each selected eval K times and gate on the result.

    Unstable evals (IQR above `flakiness`, or one trial collapsing far below
    the rest) are quarantined instead of failing the build; stable evals
    fail when their median is below `threshold`. Evals already in the
    quarantine registry are skipped unless --include-quarantined.
    """
    project = load_project(config_path, ids, tags)
    options = pipeline.RunOptions(
        k=k,
        seed=seed,
        include_quarantined=include_quarantined,
        shard=shard,
        dry_run=dry_run,
        report=report,
    )
    total = sum((k or spec.k) for spec in project.specs)
    with output.progress(total) as step:
        outcome = pipeline.run(
            project.config, project.specs, options, cwd=project.cwd, progress=step
        )
    output.show_outcome(
        outcome, fmt=fmt, verbose=verbose, registry=project.config.settings.registry
    )
    after_decision(project, outcome, dry_run=dry_run, no_issues=no_issues)
    raise SystemExit(outcome.exit_code)
