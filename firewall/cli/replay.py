"""`firewall replay`: one trial of one eval, its raw result printed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option, load_project
from firewall.runner import Task, execute, to_record
from firewall.runner.python import PythonWorker


@click.command()
@click.argument("eval_id")
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    required=True,
    help="The trial's seed, as recorded in the artefact.",
)
@click.option(
    "--trial",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The trial index passed to the eval.",
)
@config_option
def replay(eval_id: str, seed: int, trial: int, config_path: Path | None) -> None:
    """Run one trial of EVAL_ID with --seed and print what it reported.

    Prints the raw trial result, then the trial as the firewall records it.
    Exits 0 when the trial produced a valid result, 3 when it errored.
    """
    project = load_project(config_path, [eval_id])
    spec = project.specs[0]
    task = Task(spec, trial, seed, spec.k)
    worker = PythonWorker(project.cwd)
    try:
        with tempfile.TemporaryDirectory(prefix="firewall-") as scratch:
            outcome = execute(
                task, cwd=project.cwd, worker=worker, result_path=Path(scratch) / "result.json"
            )
    finally:
        worker.close()
    record = to_record(task, outcome, 0.0, 1)
    if outcome.error is None:
        output.echo_untrusted(json.dumps(outcome.payload, indent=2, sort_keys=True))
    output.echo_untrusted(
        f"# {spec.id} trial {trial} seed {seed}: "
        + (
            f"ERROR {record.error}"
            if record.errored
            else f"score {record.score} passed {record.passed}"
        )
    )
    raise SystemExit(3 if record.errored else 0)
