"""`firewall list`: the discovered evals, their effective settings, and gates that cannot be met."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import click

from firewall import output
from firewall.adaptive import power_notes
from firewall.cli.common import config_option, format_option, selection_options
from firewall.fingerprint import unknowable
from firewall.pipeline import context, suites
from firewall.runner.python import sync_fanout
from firewall.spec import EvalSpec, warnings_for
from firewall.text import columns, number


@click.command(name="list")
@selection_options
@config_option
@format_option()
def list_evals(
    ids: tuple[str, ...], tags: tuple[str, ...], config_path: Path | None, fmt: str
) -> None:
    """List the evals a run would probe, with effective settings and source location.

    Warns about gates that cannot be met at all, such as a `min_pass_rate`
    whose Wilson lower bound stays below it even when every trial passes, and about
    suites whose runner names cases by their place (promptfoo without descriptions).
    Says how each suite's cases are known, replayed and seeded.
    """
    project = context.load(config_path, ids, tags)
    specs = project.specs
    notes = {spec.id: warnings_for(spec) + suites.warnings(spec) for spec in specs}
    if fmt == "json":
        output.echo_json(json.dumps([_document(spec, notes[spec.id]) for spec in specs], indent=2))
        return
    if not specs:
        output.echo("no evals found: add [[evals]] to the config, or `paths` with @firewall.eval")
        return
    output.echo("\n".join(columns([_HEADER, *(_row(spec) for spec in specs)])))
    for spec in specs:
        for note in notes[spec.id]:
            output.warn(f"{spec.id} ({spec.source}): {note}")
    fanout = sync_fanout(specs, project.config.settings.concurrency)
    if fanout is not None:
        output.warn(fanout)
    power = [(spec.id, note) for spec in specs for note in power_notes(spec)]
    _notes("what each gate can do at its k:", power)
    if always := [(spec.id, why) for spec in specs if (why := unknowable(spec))]:
        _notes("probed on every pull request, never carried from the default branch:", always)
    if described := [(spec.id, note) for spec in specs for note in suites.notes(spec)]:
        _notes("how each suite's cases are known:", described)


def _document(spec: EvalSpec, warnings: list[str]) -> dict[str, object]:
    """An eval as `--format json` lists it: its settings and what the table's notes say."""
    return {
        **spec.model_dump(mode="json"),
        "warnings": warnings,
        "power": power_notes(spec),
        "suite": suites.notes(spec),
        "always_probed": unknowable(spec),
    }


_HEADER = ("EVAL", "KIND", "K", "THRESHOLD", "FLAKINESS", "TIMEOUT", "GATE", "TAGS", "SOURCE")


def _row(spec: EvalSpec) -> tuple[str, ...]:
    """An eval's line of the table, under ``_HEADER``."""
    gate = "blocking" if spec.blocking else "non-blocking"
    if spec.min_pass_rate:
        gate += f", pass rate >= {number(spec.min_pass_rate)}"
    return (
        spec.id,
        _kind(spec),
        str(spec.k),
        number(spec.threshold),
        number(spec.flakiness),
        f"{spec.timeout:g}s",
        gate,
        ",".join(spec.tags) or "-",
        str(spec.source),
    )


def _notes(title: str, notes: Sequence[tuple[str, str]]) -> None:
    """A titled block of notes after the table, one an eval and line."""
    output.echo("")
    output.echo(title)
    for eval_id, note in notes:
        output.echo(f"  {eval_id}: {note}")


def _kind(spec: EvalSpec) -> str:
    """python, python async (its trials share pool workers), python async isolated, ..."""
    if spec.result != "json":
        return spec.result
    if spec.asynchronous:
        return "python async isolated" if spec.isolate else "python async"
    return spec.kind
