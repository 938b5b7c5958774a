"""`firewall probe`: trials only, written to a part file for a later `firewall gate`."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import (
    config_option,
    k_option,
    seed_option,
    selection_options,
    shard_option,
)
from firewall.discovery import Shard
from firewall.errors import ExitCode
from firewall.pipeline import context
from firewall.pipeline.run import RunOptions, probe_to
from firewall.runner.seeds import BaseSeed


@click.command()
@selection_options
@config_option
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="The probe part to write.",
)
@k_option()
@seed_option('Base seed, or "random". Give every shard the same one.')
@shard_option
@click.option("--include-quarantined", is_flag=True, help="Probe quarantined evals too.")
@click.option(
    "--affected/--all",
    "affected",
    default=None,
    help="Probe only the evals a change can affect, the part naming the rest as carried "
    "from the default branch for `firewall gate` to check (--affected; a pull request's "
    "default unless [affected] enabled = false), or probe every eval (--all).",
)
def probe(
    ids: tuple[str, ...],
    tags: tuple[str, ...],
    config_path: Path | None,
    out: Path,
    k: int | None,
    seed: BaseSeed | None,
    shard: Shard | None,
    include_quarantined: bool,
    affected: bool | None,
) -> None:
    """Run the trials of the selected evals and write them to --out; decide nothing.

    For sharding a large suite across CI jobs: each job runs
    `firewall probe --shard I/N --seed S --out part-I.json`, and one final job
    runs `firewall gate part-*.json` to decide and do the side effects. No
    other file is touched: not the registry, not the history. The part is
    written even when interrupted (then it is marked incomplete, exit 130).

    On a pull request (or with --affected) an eval whose fingerprint equals its latest
    default-branch probe's is carried: not probed, and named in the part; the gate
    decides again, on its own checkout and the history, whether it is carried.
    """
    ctx = context.load(config_path, ids, tags, require=True)
    options = RunOptions(
        k=k,
        seed=seed,
        shard=shard,
        include_quarantined=include_quarantined,
        affected=affected,
    )
    with output.progress() as progress:
        part = probe_to(ctx, options, out, progress=progress)
    trials = sum(len(trials) for trials in part.trials.values())
    carried = f", {len(part.carried)} carried" if part.carried else ""
    output.echo(
        f"probed {len(part.trials)} evals ({trials} trials, base seed {part.base_seed}"
        f"{carried}) -> {out}" + ("" if part.complete else " -- INTERRUPTED, incomplete")
    )
    raise SystemExit(ExitCode.OK if part.complete else ExitCode.INTERRUPTED)
