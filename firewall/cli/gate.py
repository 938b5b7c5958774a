"""`firewall gate`: merge probe parts, decide, and do the side effects of a run."""

from __future__ import annotations

from pathlib import Path

import click

from firewall.cli import render
from firewall.cli.common import config_option, dry_run_option, output_options
from firewall.pipeline import context
from firewall.pipeline.run import RunOptions
from firewall.pipeline.run import gate as gate_pipeline


@click.command()
@click.argument("parts", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@config_option
@output_options
@dry_run_option
@click.option("-v", "--verbose", is_flag=True, help="Show every rule's check for every eval.")
def gate(
    parts: tuple[Path, ...],
    config_path: Path | None,
    report: Path | None,
    no_issues: bool,
    dry_run: bool,
    fmt: str,
    verbose: bool,
) -> None:
    """Decide the evals probed in PARTS (from `firewall probe --out`), as `run` would.

    Exit codes are those of `firewall run`; a part that was interrupted makes
    the gate's result incomplete (exit 130).
    """
    ctx = context.load(config_path, with_evals=False)
    options = RunOptions(dry_run=dry_run, report=report, issues=not no_issues)
    present = render.run_result(fmt, verbose=verbose, registry=ctx.settings.registry)
    result = gate_pipeline(ctx, parts, options, present=present)
    raise SystemExit(result.exit_code)
