"""`firewall replay`: one trial of one eval, its raw result printed."""

from __future__ import annotations

import json
from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option
from firewall.errors import ExitCode
from firewall.pipeline import context, suites
from firewall.pipeline.replay import TrialReplay
from firewall.pipeline.replay import replay as replay_one


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
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Also print what the trial printed when it passed, and how long it and its "
    "module's import took.",
)
def replay(eval_id: str, seed: int, trial: int, config_path: Path | None, verbose: bool) -> None:
    """Run one trial of EVAL_ID with --seed and print what it reported.

    Prints the raw trial result, then the trial as the firewall records it. A
    trial that errored prints the eval's full traceback and what it printed on
    stdout and stderr; a plain test (`result = "exit-code"`) that failed prints
    its command's output. An eval with a judge prints its output and each of its
    judgements (``judge_repeats_max`` of them). The output comes once the trial has
    ended, through the same filter as everything the firewall prints: in a CI job no
    line of it can be read as a workflow command. Exits 0 when the trial produced a valid
    result, 3 when it errored.

    A suite's case (`SUITE/case`) is replayed by running the suite's command
    with the trial's seed and index and `FIREWALL_SELECT` set to the case: a
    pytest suite then runs that test alone (the firewall's pytest plugin reads
    it), any other suite runs whole. It prints that case's outcome, what ran, and
    whether the seed reached the command; exits 0 when the case ran, 3 when the
    suite's run wrote no report or the case was not in it.
    """
    replayed = replay_one(context.load(config_path), eval_id, seed=seed, trial=trial)
    if isinstance(replayed, suites.CaseReplay):
        _show_case(replayed, verbose=verbose)
    else:
        _show_trial(replayed, verbose=verbose)
    raise SystemExit(ExitCode.OK if replayed.reproduced else ExitCode.ERROR)


def _show_trial(replayed: TrialReplay, *, verbose: bool) -> None:
    outcome, record = replayed.outcome, replayed.record
    if outcome.error is None:
        output.echo_json(json.dumps(outcome.payload, indent=2, sort_keys=True))
    if outcome.traceback:
        output.echo(outcome.traceback.rstrip("\n"))
    if outcome.output and (record.errored or verbose or record.score == 0.0):
        output.echo(f"# what the trial printed:\n{outcome.output}")
    if outcome.judged is not None:
        output.echo("\n".join(f"# {line}" for line in outcome.judged.lines()))
    if verbose:
        imported = f", its module imported in {outcome.import_s:.3f} s" if outcome.import_s else ""
        output.echo(f"# took {record.duration_s:.3f} s{imported}")
    output.echo(
        f"# {replayed.spec.id} trial {replayed.trial} seed {replayed.seed}: "
        + (
            f"ERROR {record.error}"
            if record.errored
            else f"score {record.score} passed {record.passed}"
        )
    )


def _show_case(replayed: suites.CaseReplay, *, verbose: bool) -> None:
    passed = replayed.found is not None and replayed.found.outcome == "passed"
    if replayed.output and (verbose or not passed):
        output.echo(f"# what the suite's command printed:\n{replayed.output}")
    output.echo(replayed.summary())
