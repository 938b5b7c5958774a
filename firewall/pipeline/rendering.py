"""`firewall report`: a saved artefact rendered as Markdown, JUnit XML or HTML.

The HTML page's trends are read from the project's history, as `firewall status`
reads it, when the project's configuration is at hand.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from pathlib import Path

from firewall import output
from firewall.artefact import Artefact
from firewall.configfile import find_config
from firewall.constants import TREND_DAYS, TREND_RUNS
from firewall.store.atomic import write_atomic
from firewall.store.history import HistoryRow
from firewall.store.reports import load_report
from firewall.timeutil import to_text


def render_report(source: Path, fmt: str, *, config_path: Path | None, out: Path | None) -> str:
    """The saved artefact at ``source`` rendered as ``fmt``, and written to ``out`` when given
    (atomically: the one file a read-only command writes)."""
    # The same bytes in the file as on stdout, where a job's runner reads them.
    text = INERT[fmt](RENDERERS[fmt](load_report(source), source, config_path))
    if out is not None:
        write_atomic(out, text)
    return text


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
