"""`firewall probe`: trials only, written to a part file for a later `firewall gate`."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import SeedParam, config_option, load_project, selection_options
from firewall.pipeline import run as pipeline
from firewall.store import parts as sharding


@click.command()
@selection_options
@config_option
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="The probe part to write.",
)
@click.option("--k", type=click.IntRange(min=3), help="Trials per eval, overriding the config.")
@click.option(
    "--seed", type=SeedParam(), help='Base seed, or "random". Give every shard the same one.'
)
@click.option("--shard", metavar="I/N", help="Probe only shard I of N (1-based) of the evals.")
@click.option("--include-quarantined", is_flag=True, help="Probe quarantined evals too.")
def probe(
    ids: tuple[str, ...],
    tags: tuple[str, ...],
    config_path: Path | None,
    out: Path,
    k: int | None,
    seed: int | str | None,
    shard: str | None,
    include_quarantined: bool,
) -> None:
    """Run the trials of the selected evals and write them to --out; decide nothing.

    For sharding a large suite across CI jobs: each job runs
    `firewall probe --shard I/N --out part-I.json`, and one final job runs
    `firewall gate part-*.json` to decide and do the side effects. The part
    is written even when interrupted (then it is marked incomplete).
    """
    project = load_project(config_path, ids, tags)
    options = pipeline.RunOptions(
        k=k, seed=seed, shard=shard, include_quarantined=include_quarantined
    )
    total = sum((k or spec.k) for spec in sharding.shard(project.specs, shard))
    with output.progress(total) as step:
        part = pipeline.collect(
            project.config, project.specs, options, cwd=project.cwd, progress=step
        )
    part.write(out)
    trials = sum(len(trials) for trials in part.trials.values())
    output.echo(
        f"probed {len(part.trials)} evals ({trials} trials, base seed {part.base_seed}) "
        f"-> {out}" + ("" if part.complete else " -- INTERRUPTED, incomplete")
    )
    raise SystemExit(0 if part.complete else pipeline.EXIT_INTERRUPTED)
