"""`firewall nightly`: re-probe quarantined evals and release the ones that became stable."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option, load_project, output_options
from firewall.pipeline.effects import announce, sync_after_nightly
from firewall.pipeline.nightly import NightlyOptions, nightly
from firewall.store.registry import Registry


@click.command(name="nightly")
@config_option
@click.option(
    "--all",
    "probe_all",
    is_flag=True,
    help="Probe every eval, and quarantine those that turned unstable.",
)
@click.option("--k", type=click.IntRange(min=3), help="Trials per eval (default: [nightly] k).")
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    help="Base seed (default: a fresh one, recorded in the report).",
)
@output_options
@click.option("--dry-run", is_flag=True, help="Probe and print; change no file and no issue.")
def nightly_command(
    config_path: Path | None,
    probe_all: bool,
    k: int | None,
    seed: int | None,
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
    project = load_project(config_path)
    settings = project.config.settings
    options = NightlyOptions(k=k, seed=seed, probe_all=probe_all, dry_run=dry_run, report=report)
    entries = Registry(project.cwd / settings.registry).read()
    count = len(project.specs) if probe_all else sum(s.id in entries for s in project.specs)
    with output.progress(count * (k or settings.nightly.k)) as step:
        outcome = nightly(project.config, project.specs, options, cwd=project.cwd, progress=step)
    artefact = outcome.artefact
    if fmt == "json":
        output.echo(artefact.to_json().rstrip("\n"))
    else:
        if artefact.evals:
            output.echo_untrusted(output.table(artefact.evals))
            output.echo()
        elif not outcome.events:
            output.echo(f"nothing to re-probe: {settings.registry} is empty")
        for event in outcome.events:
            if event.kind in ("released", "quarantined", "missing"):
                output.echo_untrusted(f"{event.eval_id}: {event.message}")
        output.echo(
            f"base seed {artefact.run.base_seed}"
            + ("" if artefact.run.complete else " -- INTERRUPTED, nothing was counted")
        )
        output.echo(
            f"report: {outcome.report_path}"
            if outcome.report_path
            else "dry run: no file was changed"
        )
    sync_after_nightly(project, outcome, entries, dry_run=dry_run, no_issues=no_issues)
    announce(project, artefact, outcome.report_path)
    raise SystemExit(0 if artefact.run.complete else 130)
