"""`firewall gate`: merge probe parts, decide, and do the side effects of a run."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
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
@click.option(
    "--allow-partial",
    is_flag=True,
    help="Decide the parts given even if a shard is missing or their base seeds differ "
    "(the report and the summary say what was missing).",
)
@click.option(
    "--allow-stale",
    is_flag=True,
    help="Decide parts probed on another commit than the checkout's (GITHUB_SHA, else "
    "git's HEAD); the report says which.",
)
def gate(
    parts: tuple[Path, ...],
    config_path: Path | None,
    report: Path | None,
    no_issues: bool,
    dry_run: bool,
    fmt: str,
    verbose: bool,
    allow_partial: bool,
    allow_stale: bool,
) -> None:
    """Decide the evals probed in PARTS (from `firewall probe --out`), as `run` would.

    PARTS must be one whole probe: every shard I/N of it, one base seed. A
    missing shard (an artefact that failed to download) is exit 2, not a green
    gate over half the evals, unless --allow-partial. Exit codes are those of
    `firewall run`; a part that was interrupted makes the gate's result
    incomplete (exit 130).

    Every eval is decided on this checkout's configuration, not on the settings a
    part carries: an eval the configuration does not know is exit 2 (with
    --allow-partial, left undecided and said so), a trial whose seed does not derive
    from its part's base seed is exit 2, and so is a part probed on another commit
    unless --allow-stale. A test probed by `pytest --firewall-k` is held to the
    configuration's global settings, or to the defaults in a project without one.
    """
    ctx = context.load(config_path, dry_run=dry_run, or_defaults=True)
    if ctx.config.path is None:
        output.note("no [tool.firewall] or firewall.toml: deciding pytest's tests on the defaults")
    options = RunOptions(
        dry_run=dry_run,
        report=report,
        issues=not no_issues,
        allow_partial=allow_partial,
        allow_stale=allow_stale,
    )
    present = render.run_result(fmt, verbose=verbose, registry=ctx.settings.registry)
    result = gate_pipeline(ctx, parts, options, present=present)
    raise SystemExit(result.exit_code)
