"""`firewall report`: a saved artefact rendered as Markdown, JUnit XML or HTML."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option
from firewall.errors import UsageError
from firewall.pipeline.rendering import render_report


@click.command()
@click.argument("artefact", type=click.Path(path_type=Path, dir_okay=False))
@config_option
@click.option("--markdown", is_flag=True, help="The job summary as Markdown (the default).")
@click.option("--junit", is_flag=True, help="JUnit XML for CI test reporters.")
@click.option("--html", is_flag=True, help="One self-contained HTML page.")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the rendering here (atomically) instead of to stdout.",
)
def report(
    artefact: Path,
    config_path: Path | None,
    markdown: bool,
    junit: bool,
    html: bool,
    out: Path | None,
) -> None:
    """Render ARTEFACT, a saved firewall-report.json, as Markdown, JUnit XML or HTML.

    \b
    In JUnit XML, only blocking evals that failed or errored are failures and
    errors; quarantined and non-blocking ones are skipped tests, so a test
    reporter agrees with the firewall's exit code. The HTML page draws each
    eval's trials, and, with the project's config at hand, the trend of its
    median over the recorded runs up to this one. Exits 0 once rendered,
    whatever the run decided.
    """
    chosen = [
        name for name, flag in (("markdown", markdown), ("junit", junit), ("html", html)) if flag
    ]
    if len(chosen) > 1:
        raise UsageError(f"choose one of --markdown, --junit, --html (got {', '.join(chosen)})")
    fmt = chosen[0] if chosen else "markdown"
    text = render_report(artefact, fmt, config_path=config_path, out=out)
    if out is not None:
        output.note(f"{fmt} report: {out}")
        return
    output.echo(text.rstrip("\n"))
