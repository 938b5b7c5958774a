"""`firewall report`: a saved artefact rendered as Markdown, JUnit XML or HTML."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from firewall import output
from firewall.artefact import Artefact
from firewall.errors import UsageError
from firewall.store.atomic import write_atomic
from firewall.store.reports import load_report


def _markdown(artefact: Artefact, source: Path) -> str:
    from firewall.report.markdown import render_summary

    # Offline there is no history for trends and no issue links; the truncation
    # note, if GitHub's 1 MiB limit ever bites, points back at the JSON.
    return render_summary(artefact, report=str(source))


def _junit(artefact: Artefact, source: Path) -> str:
    from firewall.report.junit import render_junit

    return render_junit(artefact)


def _html(artefact: Artefact, source: Path) -> str:
    from firewall.report.html import render_html

    return render_html(artefact)


# Imported on use: each renderer pulls in jinja2 or ElementTree, and a command
# needs only one of them.
RENDERERS: dict[str, Callable[[Artefact, Path], str]] = {
    "markdown": _markdown,
    "junit": _junit,
    "html": _html,
}

# How each rendering is kept from holding a workflow command, in its own syntax:
# character references, which an XML or HTML parser reads back as the character,
# and for Markdown (read by people) the sink's invisible word joiner.
INERT: dict[str, Callable[[str], str]] = {
    "markdown": output.inert,
    "junit": output.inert_markup,
    "html": output.inert_markup,
}


@click.command()
@click.argument("artefact", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--markdown", is_flag=True, help="The job summary as Markdown (the default).")
@click.option("--junit", is_flag=True, help="JUnit XML for CI test reporters.")
@click.option("--html", is_flag=True, help="One self-contained HTML page.")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the rendering here (atomically) instead of to stdout.",
)
def report(artefact: Path, markdown: bool, junit: bool, html: bool, out: Path | None) -> None:
    """Render ARTEFACT, a saved firewall-report.json, as Markdown, JUnit XML or HTML.

    \b
    In JUnit XML, only blocking evals that failed or errored are failures and
    errors; quarantined and non-blocking ones are skipped tests, so a test
    reporter agrees with the firewall's exit code. Exits 0 once rendered,
    whatever the run decided.
    """
    chosen = [
        name for name, flag in (("markdown", markdown), ("junit", junit), ("html", html)) if flag
    ]
    if len(chosen) > 1:
        raise UsageError(f"choose one of --markdown, --junit, --html (got {', '.join(chosen)})")
    fmt = chosen[0] if chosen else "markdown"
    # The same bytes in the file as on stdout, where a job's runner reads them.
    text = INERT[fmt](RENDERERS[fmt](load_report(artefact), artefact))
    if out is not None:
        write_atomic(out, text)  # the one file a read-only command writes: the rendering
        output.note(f"{fmt} report: {out}")
        return
    output.echo(text.rstrip("\n"))
