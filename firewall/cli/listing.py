"""`firewall list`: the discovered evals, their effective settings, and gates that cannot be met."""

from __future__ import annotations

import json
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
    notes = {spec.id: warnings_for(spec) + suites.warnings(spec) for spec in project.specs}
    if fmt == "json":
        document = [
            {
                **spec.model_dump(mode="json"),
                "warnings": notes[spec.id],
                "power": power_notes(spec),
                "suite": suites.notes(spec),
                "always_probed": unknowable(spec),
            }
            for spec in project.specs
        ]
        output.echo_json(json.dumps(document, indent=2))
        return
    if not project.specs:
        output.echo("no evals found: add [[evals]] to the config, or `paths` with @firewall.eval")
        return
    header = ("EVAL", "KIND", "K", "THRESHOLD", "FLAKINESS", "TIMEOUT", "GATE", "TAGS", "SOURCE")
    rows = [
        (
            spec.id,
            _kind(spec),
            str(spec.k),
            number(spec.threshold),
            number(spec.flakiness),
            f"{spec.timeout:g}s",
            ("blocking" if spec.blocking else "non-blocking")
            + (f", pass rate >= {number(spec.min_pass_rate)}" if spec.min_pass_rate else ""),
            ",".join(spec.tags) or "-",
            str(spec.source),
        )
        for spec in project.specs
    ]
    output.echo("\n".join(columns([header, *rows])))
    for spec in project.specs:
        for note in notes[spec.id]:
            output.warn(f"{spec.id} ({spec.source}): {note}")
    fanout = sync_fanout(project.specs, project.config.settings.concurrency)
    if fanout is not None:
        output.warn(fanout)
    output.echo("")
    output.echo("what each gate can do at its k:")
    for spec in project.specs:
        for note in power_notes(spec):
            output.echo(f"  {spec.id}: {note}")
    always = [(spec.id, unknowable(spec)) for spec in project.specs if unknowable(spec)]
    if always:
        output.echo("")
        output.echo("probed on every pull request, never carried from the default branch:")
        for eval_id, why in always:
            output.echo(f"  {eval_id}: {why}")
    described = [(spec.id, suites.notes(spec)) for spec in project.specs if suites.notes(spec)]
    if described:
        output.echo("")
        output.echo("how each suite's cases are known:")
        for eval_id, lines in described:
            for note in lines:
                output.echo(f"  {eval_id}: {note}")


def _kind(spec: EvalSpec) -> str:
    """python, python async (its trials share pool workers), python async isolated, ..."""
    if spec.result != "json":
        return spec.result
    if spec.asynchronous:
        return "python async isolated" if spec.isolate else "python async"
    return spec.kind
