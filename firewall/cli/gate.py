"""`firewall gate`: merge probe parts, decide, and do the side effects of a run."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import Project, config_option, output_options
from firewall.config import load_config
from firewall.pipeline import run as pipeline
from firewall.pipeline.effects import after_decision


@click.command()
@click.argument("parts", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@config_option
@output_options
@click.option("--dry-run", is_flag=True, help="Decide and print; change no file and no issue.")
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

    Exit codes are those of `firewall run`.
    """
    project = Project(config=load_config(config_path, Path.cwd()), specs=[], cwd=Path.cwd())
    options = pipeline.RunOptions(dry_run=dry_run, report=report)
    outcome = pipeline.gate(project.config, parts, options, cwd=project.cwd)
    output.show_outcome(
        outcome, fmt=fmt, verbose=verbose, registry=project.config.settings.registry
    )
    after_decision(project, outcome, dry_run=dry_run, no_issues=no_issues)
    raise SystemExit(outcome.exit_code)
