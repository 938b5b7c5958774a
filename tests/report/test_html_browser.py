"""The HTML report as a person sees it: opened from a file in headless Chromium, then measured.

Parsing the page says what it contains; only a browser says what it draws. So
these tests ask Chromium where each dot, band and line landed, whether each
section starts open or folded, and whether any text spills out of its box, at
a phone's width and a desktop's. Chromium and its driver come from Debian's
packages (``chromium``, ``chromium-driver``; ``.ci/run`` installs them), driven
through selenium. Where either is missing the tests skip, saying which.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from builders import error_trial, make_artefact, make_report, trials

from firewall._stats import Stats, quartiles
from firewall.artefact import Artefact
from firewall.policy import Status
from firewall.report.html import render_html

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
if CHROMIUM is None or DRIVER is None:
    pytest.skip(
        "needs Chromium and ChromeDriver (Debian: apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

NARROW, WIDE = 480, 1600
THRESHOLD = 0.8
STABLE = "support-bot/refund-policy-tone"
SCATTERED = "triage-accuracy-multilingual"
FAILING = "retrieval/recall-at-10"
ERRORED = "judge-outage"
# A steady eval and a coin toss, each with its past medians.
TRENDS: dict[str, list[float | None]] = {
    STABLE: [0.85, 0.86, 0.84, None, 0.85, 0.855],
    SCATTERED: [0.3, 0.7, 0.5, 0.2, 0.8, 0.45],
}


def probed(eval_id: str, status: Status, scores: list[float], **overrides: Any) -> Any:
    q1, median, q3 = quartiles(scores)
    stats = Stats(median=median, q1=q1, q3=q3, iqr=q3 - q1, pass_rate=0.5)
    fields = {"stats": stats, "trials": trials(scores, pass_score=THRESHOLD), **overrides}
    return make_report(eval_id, status, threshold=THRESHOLD, **fields)


def every_status() -> Artefact:
    rng = random.Random(12)
    stable = [round(0.84 + rng.random() * 0.03, 3) for _ in range(40)]
    scattered = [round(rng.random(), 3) for _ in range(15)]
    failing = [round(0.5 + rng.random() * 0.05, 3) for _ in range(7)]
    errored = make_report(
        ERRORED,
        Status.ERROR,
        threshold=THRESHOLD,
        reason="4 of 7 trials errored (max_errors 0); trial 3 (seed 1003): judge returned 503",
        stats=Stats(errors=4),
        trials=[
            *trials([0.9, 0.88, 0.91], pass_score=THRESHOLD),
            *(error_trial("judge returned 503", index=i) for i in range(3, 7)),
        ],
    )
    return make_artefact(
        probed(STABLE, Status.PASS, stable),
        probed(SCATTERED, Status.QUARANTINE, scattered, reason="iqr 0.41 > flakiness 0.03"),
        probed(FAILING, Status.FAIL, failing, reason="median 0.53 < threshold 0.8"),
        errored,
    )


ARTEFACT = every_status()
SCORED = {
    r.id: [t.score for t in r.trials if t.score is not None and t.error is None]
    for r in ARTEFACT.evals
}


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(render_html(ARTEFACT, trends=TRENDS), encoding="utf-8")
    return path.as_uri()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    # No network for a file:// page: background fetches and updates are switched
    # off, so nothing tries to reach the outside from this machine.
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",  # the viewport is the window, whichever way the page scrolls
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(argument)
    # Naming the driver keeps Selenium Manager from looking for (or fetching) one.
    service = Service(executable_path=str(DRIVER), log_output=subprocess.DEVNULL)
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


def open_at(browser: Any, page: str, width: int) -> Any:
    browser.set_window_size(width, 1000)
    browser.get(page)
    return browser


def section(browser: Any, eval_id: str) -> Any:
    """The eval's <details>, found by the id its summary shows."""
    found = browser.execute_script(
        "return [...document.querySelectorAll('details.eval')]"
        ".find(d => d.querySelector('summary .id').textContent === arguments[0]) || null",
        eval_id,
    )
    assert found is not None, f"no section for {eval_id}"
    return found


def visible(browser: Any, element: Any) -> bool:
    """Whether a person could see it: not inside a folded section, not hidden by style."""
    return bool(browser.execute_script("return arguments[0].checkVisibility()", element))


def box(browser: Any, element: Any) -> dict[str, float]:
    rect: dict[str, float] = browser.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return {left: r.left, right: r.right, top: r.top, width: r.width, height: r.height,"
        " x: r.left + r.width / 2, y: r.top + r.height / 2};",
        element,
    )
    return rect


def across(browser: Any, plot: Any, element: Any) -> float:
    """Where an element's centre sits along a plot, 0 at its left edge and 1 at its right."""
    outer, inner = box(browser, plot), box(browser, element)
    return (inner["x"] - outer["left"]) / outer["width"]


@pytest.mark.parametrize("width", [NARROW, WIDE])
def test_failing_errored_and_unstable_sections_open_and_the_stable_one_folded(
    browser: Any, page: str, width: int
) -> None:
    open_at(browser, page, width)
    opened = {
        eval_id: browser.execute_script("return arguments[0].open", section(browser, eval_id))
        for eval_id in (STABLE, SCATTERED, FAILING, ERRORED)
    }
    assert opened == {STABLE: False, SCATTERED: True, FAILING: True, ERRORED: True}
    # Folded, the stable eval's plot is out of sight; a click on its summary shows it.
    stable = section(browser, STABLE)
    plot = stable.find_element("css selector", "svg.strip")
    assert not visible(browser, plot)
    stable.find_element("css selector", "summary").click()
    assert browser.execute_script("return arguments[0].open", stable) is True
    assert visible(browser, plot) and box(browser, plot)["height"] > 0


@pytest.mark.parametrize("width", [NARROW, WIDE])
def test_each_strip_plot_draws_every_scored_trial_the_band_and_the_threshold(
    browser: Any, page: str, width: int
) -> None:
    open_at(browser, page, width)
    browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    for report in ARTEFACT.evals:
        plot = section(browser, report.id).find_element("css selector", "svg.strip")
        frame = box(browser, plot)
        assert frame["width"] > 0.5 * width and frame["height"] > 0, report.id
        dots = plot.find_elements("css selector", "circle")
        assert len(dots) == len(SCORED[report.id]), report.id
        for dot, score in zip(dots, SCORED[report.id], strict=True):
            assert box(browser, dot)["width"] > 0, f"{report.id}: a dot is not drawn"
            assert across(browser, plot, dot) == pytest.approx(score, abs=0.01), report.id
        (threshold,) = plot.find_elements("css selector", "line.threshold")
        assert box(browser, threshold)["height"] > 0
        assert across(browser, plot, threshold) == pytest.approx(THRESHOLD, abs=0.01)
        bands = plot.find_elements("css selector", "rect.iqr")
        if report.status is Status.ERROR:
            assert bands == []  # an errored probe's few scores decided nothing
            continue
        (band,) = bands
        q1, _, q3 = quartiles(SCORED[report.id])
        drawn = box(browser, band)
        assert (drawn["left"] - frame["left"]) / frame["width"] == pytest.approx(q1, abs=0.01)
        assert (drawn["right"] - frame["left"]) / frame["width"] == pytest.approx(q3, abs=0.01)


def test_trend_charts_share_the_0_1_scale_and_appear_only_with_history(
    browser: Any, page: str
) -> None:
    open_at(browser, page, WIDE)
    browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    heights: dict[str, list[float]] = {}  # each dot's centre, in pixels below its chart's top
    for report in ARTEFACT.evals:
        charts = section(browser, report.id).find_elements("css selector", "svg.trend")
        if report.id not in TRENDS:
            assert charts == [], report.id
            continue
        (chart,) = charts
        frame = box(browser, chart)
        assert frame["width"] > 0.5 * WIDE
        dots = chart.find_elements("css selector", "circle")
        assert len(dots) == sum(m is not None for m in TRENDS[report.id])
        heights[report.id] = [box(browser, dot)["y"] - frame["top"] for dot in dots]
        assert all(0 < y < frame["height"] for y in heights[report.id])
        assert across(browser, chart, dots[-1]) == pytest.approx(1.0, abs=0.01)  # this run last
    # One scale for every chart: the steady eval's 0.84-0.86 is a flat line, near
    # the scattered eval's 0.8, while the scattered one's 0.2-0.8 spans the chart.
    steady, scattered = heights[STABLE], heights[SCATTERED]
    assert max(steady) - min(steady) < 3
    assert abs(steady[0] - scattered[4]) < 5  # 0.85 beside 0.8
    assert max(scattered) - min(scattered) > 30


@pytest.mark.parametrize("width", [NARROW, WIDE])
def test_no_text_spills_out_of_its_box_and_ids_stay_on_one_line(
    browser: Any, page: str, width: int
) -> None:
    open_at(browser, page, width)
    browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    spilled = browser.execute_script(
        """
        const text = 'h1, h2, h3, p, li, dt, dd, th, td, summary, figcaption, .id';
        return [...document.querySelectorAll(text)]
          .filter(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1)
          .map(e => e.tagName + ' ' + e.textContent.slice(0, 40));
        """
    )
    assert spilled == []
    # The page itself never scrolls sideways; on a phone a wide table scrolls in its frame.
    assert browser.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"
    )
    wrapped = browser.execute_script(
        """
        return [...document.querySelectorAll('summary .id, td.id a')].filter(e => {
          const range = document.createRange();
          range.selectNodeContents(e);
          const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
          return lines.size !== 1;
        }).map(e => e.textContent);
        """
    )
    assert wrapped == []


def test_the_page_uses_the_window_width(browser: Any, page: str) -> None:
    open_at(browser, page, WIDE)
    viewport = browser.execute_script("return window.innerWidth")
    main = box(browser, browser.find_element("css selector", "main"))
    assert main["width"] >= 0.97 * viewport
    # With the room, the eval table shows whole, without its own scroll bar.
    frame = browser.find_element("css selector", "div.wide")
    assert (
        browser.execute_script("return arguments[0].scrollWidth", frame)
        <= box(browser, frame)["width"]
    )


def test_the_page_loads_nothing(browser: Any, page: str) -> None:
    open_at(browser, page, WIDE)
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    csp = browser.execute_script(
        "return document.querySelector('meta[http-equiv=Content-Security-Policy]').content"
    )
    assert "default-src 'none'" in csp and "script" not in csp
