"""The HTML report's pictures without a browser: their geometry, and the trend data behind them.

``test_html_browser.py`` checks what Chromium draws; these check the numbers
it is handed and where they come from, fast and everywhere.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from builders import error_trial, invoke_split, make_artefact, make_report, trials

from firewall._stats import Stats
from firewall.artefact import Artefact
from firewall.pipeline.rendering import medians_up_to
from firewall.policy import Status
from firewall.report.charts import Mark, strip_plot, trend_chart
from firewall.report.html import render_html
from firewall.store.history import HistoryRow, LocalHistory, rows_for
from firewall.store.reports import write_report
from firewall.timeutil import to_text


def percent(text: str) -> float:
    assert text.endswith("%")
    return float(text[:-1])


def marks(*values: float) -> list[Mark]:
    return [Mark(value=v, title=f"trial {i}") for i, v in enumerate(values)]


# --- the strip plot ----------------------------------------------------------------------


def test_a_strip_plot_places_trials_band_median_and_threshold_on_the_score_axis() -> None:
    plot = strip_plot(marks(0.1, 0.5, 0.9), threshold=0.8, quartiles=(0.3, 0.5, 0.7))
    assert [percent(d.x) for d in plot.dots] == [10.0, 50.0, 90.0]
    assert percent(plot.threshold) == 80.0
    assert plot.band is not None and percent(plot.band[0]) == 30.0
    assert percent(plot.band[1]) == pytest.approx(40.0)
    assert plot.median is not None and percent(plot.median) == 50.0
    assert [t.label for t in plot.ticks] == ["0", "0.25", "0.5", "0.75", "1"]


def test_equal_scores_spread_over_the_strip_instead_of_hiding_each_other() -> None:
    plot = strip_plot(marks(*[0.9] * 40), threshold=0.8, quartiles=(0.9, 0.9, 0.9))
    heights = [float(d.y) for d in plot.dots]
    assert len(set(heights)) == 40 and min(heights) >= 8 and max(heights) <= 36
    # An IQR of 0 still shows, as a sliver centred on the median.
    assert plot.band is not None and 0 < percent(plot.band[1]) < 1
    assert percent(plot.band[0]) + percent(plot.band[1]) / 2 == pytest.approx(90.0)


def test_a_score_off_the_0_1_scale_widens_the_axis() -> None:
    plot = strip_plot(marks(-1.0, 0.5, 3.0), threshold=0.8, quartiles=None)
    assert [percent(d.x) for d in plot.dots] == [0.0, 37.5, 100.0]
    assert [t.label for t in plot.ticks] == ["-1", "1", "3"]
    assert plot.band is None and plot.median is None


# --- the trend chart ---------------------------------------------------------------------


def test_a_trend_chart_needs_two_medians() -> None:
    assert trend_chart([], threshold=0.8) is None
    assert trend_chart([Mark(0.9, "this run")], threshold=0.8) is None
    assert trend_chart([None, Mark(0.9, "this run")], threshold=0.8) is None
    assert trend_chart([Mark(0.8, "run 1"), Mark(0.9, "this run")], threshold=0.8) is not None


def test_a_trend_chart_has_one_fixed_scale_and_breaks_its_line_at_a_gap() -> None:
    chart = trend_chart(
        [Mark(1.0, "a"), Mark(0.5, "b"), None, Mark(0.0, "d"), Mark(2.0, "e")], threshold=0.8
    )
    assert chart is not None
    assert [percent(d.x) for d in chart.dots] == [0.0, 25.0, 75.0, 100.0]
    # 1 at the top of the 60 px scale, 0 at its foot; 2 is drawn at the edge.
    assert [float(d.y) for d in chart.dots] == [6.0, 36.0, 66.0, 6.0]
    assert float(chart.threshold) == pytest.approx(18.0)
    assert [(s.x1, s.x2) for s in chart.segments] == [("0.00%", "25.00%"), ("75.00%", "100.00%")]


# --- the page ----------------------------------------------------------------------------


def scattered() -> Artefact:
    return make_artefact(
        make_report(
            "wobbly",
            Status.QUARANTINE,
            threshold=0.8,
            stats=Stats(median=0.5, q1=0.3, q3=0.8, iqr=0.5),
            trials=trials([0.1, 0.9, 0.3, 0.8, 0.5]),
        ),
        make_report(
            "outage",
            Status.ERROR,
            stats=Stats(errors=3),
            trials=[error_trial(index=i) for i in range(3)],
        ),
        make_report("held", Status.QUARANTINED, blocking=False, stats=Stats()),
    )


def charts_of(page: str, kind: str) -> list[str]:
    return re.findall(rf'<svg class="chart {kind}".*?</svg>', page, re.DOTALL)


def test_the_page_draws_a_strip_plot_for_each_eval_with_a_scored_trial() -> None:
    page = render_html(scattered())
    (plot,) = charts_of(page, "strip")
    assert plot.count("<circle") == 5 and 'class="iqr"' in plot and 'class="threshold"' in plot
    assert "trial 1, seed 1001: 0.9 passed" in plot  # each dot's tooltip
    assert "0 of 3 trials scored; 3 errored" in page  # words where there is nothing to draw
    assert charts_of(page, "trend") == [] and "<th>Trend</th>" not in page


def test_the_page_draws_trends_of_two_points_or_more_with_a_sparkline_column() -> None:
    page = render_html(scattered(), trends={"wobbly": [0.4, None, 0.6], "outage": [None]})
    (chart,) = charts_of(page, "trend")
    assert chart.count("<circle") == 2 and "this run: median 0.6" in chart
    assert "<th>Trend</th>" in page and '<td class="spark">▄·▅</td>' in page
    assert "1 without a median (errored)" in page


# --- where the trend comes from ----------------------------------------------------------


def past(artefact: Artefact, days_ago: float, median: float | None, eval_id: str) -> HistoryRow:
    """``eval_id``'s row of a run ``days_ago`` before the artefact's (negative: after it)."""
    return HistoryRow(
        eval_id=eval_id,
        run_id=f"r{days_ago}",
        mode="run",
        status="pass" if median is not None else "error",
        k=7,
        median=median,
        build_ts=to_text(artefact.run.started_at - dt.timedelta(days=days_ago)),
    )


def test_the_trend_ends_with_this_run_and_leaves_later_runs_out() -> None:
    artefact = scattered()
    rows = [
        past(artefact, 3, 0.4, "wobbly"),
        past(artefact, 2, None, "wobbly"),
        past(artefact, 1, 0.6, "held"),  # skipped this run: no trend without a probe
        past(artefact, -1, 0.9, "wobbly"),  # a later run is not this report's past
    ]
    assert medians_up_to(artefact, rows) == {"wobbly": [0.4, None, 0.5], "outage": [None]}
    # A history that has this run already keeps its row, once.
    this = [r for r in rows_for(artefact) if r.eval_id == "wobbly"]
    assert medians_up_to(artefact, [*rows[:2], *this])["wobbly"] == [0.4, None, 0.5]


def test_report_html_reads_the_trend_from_the_projects_history(project: Path) -> None:
    artefact = scattered()
    write_report(project / "firewall-report.json", artefact)
    page = invoke_split("report", "firewall-report.json", "--html").stdout
    assert charts_of(page, "trend") == []  # no config here: rendered away from its project

    (project / "firewall.toml").write_text("", encoding="utf-8")
    history = LocalHistory(project / ".firewall" / "history.jsonl")
    history.append([past(artefact, day, 0.1 * day, "wobbly") for day in (5, 4, 3)])
    history.append(rows_for(artefact))
    result = invoke_split("report", "firewall-report.json", "--html")
    assert result.exit_code == 0, result.stderr
    (chart,) = charts_of(result.stdout, "trend")
    assert chart.count("<circle") == 4 and "this run: median 0.5" in chart
