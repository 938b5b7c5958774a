"""`firewall report`: a saved artefact rendered as Markdown, JUnit XML or HTML."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from pathlib import Path

import click

from firewall import output
from firewall.artefact import Artefact
from firewall.cli.common import config_option
from firewall.configfile import find_config
from firewall.constants import TREND_DAYS, TREND_RUNS
from firewall.errors import UsageError
from firewall.store.atomic import write_atomic
from firewall.store.history import HistoryRow
from firewall.store.reports import load_report
from firewall.timeutil import to_text


def _markdown(artefact: Artefact, source: Path, config_path: Path | None) -> str:
    from firewall.report.markdown import render_summary

    # Offline there is no history for trends and no issue links; the truncation
    # note, if GitHub's 1 MiB limit ever bites, points back at the JSON.
    return render_summary(artefact, report=str(source))


def _junit(artefact: Artefact, source: Path, config_path: Path | None) -> str:
    from firewall.report.junit import render_junit

    return render_junit(artefact)


def _html(artefact: Artefact, source: Path, config_path: Path | None) -> str:
    from firewall.report.html import render_html

    return render_html(artefact, trends=_read_trends(artefact, config_path))


def _read_trends(artefact: Artefact, config_path: Path | None) -> dict[str, list[float | None]]:
    """The medians of recent runs from the project's history: the team's, through the
    state branch where one is set up, as `firewall status` reads it. An artefact
    rendered away from its project (no config here) draws no trend."""
    if config_path is None and find_config(None, Path.cwd()) is None:
        return {}
    from firewall.pipeline import context

    history = context.load(config_path, with_evals=False).history
    since = artefact.run.started_at - dt.timedelta(days=TREND_DAYS)
    return medians_up_to(artefact, history.recent({r.id for r in artefact.evals}, since=since))


def medians_up_to(artefact: Artefact, rows: Iterable[HistoryRow]) -> dict[str, list[float | None]]:
    """Each probed eval's medians, oldest first, ending with this run's own.

    Rows of later runs are not this report's past and are left out; this run's
    median comes from the artefact when the history lacks it (a dry run, a
    report rendered before the history was written).
    """
    stamp = to_text(artefact.run.started_at)
    series: dict[str, list[float | None]] = {r.id: [] for r in artefact.evals if r.trials}
    recorded: set[str] = set()
    for row in rows:
        values = series.get(row.eval_id)
        if values is None or row.build_ts > stamp:
            continue
        values.append(row.median)
        if row.build_ts == stamp:
            recorded.add(row.eval_id)
    for report in artefact.evals:
        if report.id in series and report.id not in recorded:
            series[report.id].append(report.stats.median)
    return {eval_id: values[-TREND_RUNS:] for eval_id, values in series.items()}


# Imported on use: each renderer pulls in jinja2 or ElementTree, and a command
# needs only one of them.
RENDERERS: dict[str, Callable[[Artefact, Path, Path | None], str]] = {
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
    # The same bytes in the file as on stdout, where a job's runner reads them.
    text = INERT[fmt](RENDERERS[fmt](load_report(artefact), artefact, config_path))
    if out is not None:
        write_atomic(out, text)  # the one file a read-only command writes: the rendering
        output.note(f"{fmt} report: {out}")
        return
    output.echo(text.rstrip("\n"))
