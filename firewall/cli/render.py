"""How the deciding commands show their result: the table and closing lines, or the JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from firewall import output
from firewall.report import affected
from firewall.report.terminal import closing_lines, table

if TYPE_CHECKING:  # each command loads only its own pipeline
    from firewall.pipeline.nightly import NightlyResult
    from firewall.pipeline.run import RunResult


def run_result(fmt: str, *, verbose: bool, registry: str) -> Callable[[RunResult], None]:
    """The ``present`` stage of `run` and `gate`."""

    def present(result: RunResult) -> None:
        artefact = result.artefact
        if fmt == "json":
            output.echo_json(artefact.to_json().rstrip("\n"))
            return
        output.echo(
            table(artefact.evals, verbose=verbose) if artefact.evals else "no evals selected"
        )
        output.echo()
        lines = closing_lines(
            artefact,
            added=result.added,
            registry=registry,
            report_path=result.report_path,
            dry_run=result.dry_run,
            candidates=result.candidates,
            written=result.written,
        )
        output.echo("\n".join([*lines, *affected.terminal_lines(artefact)]))

    return present


def nightly_result(fmt: str, *, registry: str) -> Callable[[NightlyResult], None]:
    """The ``present`` stage of `nightly`."""

    def present(result: NightlyResult) -> None:
        artefact = result.artefact
        if fmt == "json":
            output.echo_json(artefact.to_json().rstrip("\n"))
            return
        if artefact.evals:
            output.echo(table(artefact.evals))
            output.echo()
        elif not result.events:
            output.echo(f"nothing to re-probe: {registry} is empty")
        for event in result.events:
            if event.kind in ("released", "quarantined", "missing", "dismissed"):
                output.echo(f"{event.eval_id}: {event.message}")
        output.echo(
            f"base seed {artefact.run.base_seed}"
            + ("" if artefact.run.complete else " -- INTERRUPTED, nothing was counted")
        )
        if result.dry_run:
            output.echo("dry run: no file was changed")
        else:
            written = result.written
            output.echo(f"report: {result.report_path}" if written else "report: not written")

    return present
