"""`firewall nightly`: re-probe quarantined evals and release the ones that became stable."""

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
)
from firewall.pipeline import context
from firewall.pipeline.nightly import NightlyOptions, nightly
from firewall.runner.seeds import RANDOM, BaseSeed


@click.command(name="nightly")
@config_option
@click.option(
    "--all",
    "probe_all",
    is_flag=True,
    help="Probe every eval, and quarantine those that turned unstable.",
)
@k_option("Trials per eval (default: [nightly] k).")
@seed_option('Base seed, or "random" (the default: a fresh one, recorded in the report).')
@output_options
@dry_run_option
def nightly_command(
    config_path: Path | None,
    probe_all: bool,
    k: int | None,
    seed: BaseSeed | None,
    report: Path | None,
    no_issues: bool,
    dry_run: bool,
    fmt: str,
) -> None:
    """Re-probe every quarantined eval and move it toward release.

    A stable probe adds one to the eval's streak, an unstable one resets it,
    an errored one leaves it. At `release_after` stable nights in a row the
    eval leaves the registry and is gated again. Always exits 0 unless it
    could not run at all: the nightly run never blocks anything.
    """
    ctx = context.load(config_path, dry_run=dry_run)
    options = NightlyOptions(
        k=k,
        seed=seed or RANDOM,
        probe_all=probe_all,
        dry_run=dry_run,
        report=report,
        issues=not no_issues,
    )
    present = render.nightly_result(fmt, registry=ctx.settings.registry)
    with output.progress() as progress:
        result = nightly(ctx, options, progress=progress, present=present)
    raise SystemExit(result.exit_code)
