"""The geometry of the HTML report's two pictures, as numbers a template can draw as SVG.

A **strip plot** puts every scored trial of one probe on the score axis, with
the IQR band, the median and the threshold: the scatter the firewall decides
on, at a glance. A **trend chart** draws one eval's median over recent runs on
a fixed 0-1 scale, with its threshold, so that charts read against each other.

Horizontal positions are percentages of the chart's width, so a chart fills
the window at any size while its dots and text keep their size; vertical ones
are pixels. Scores live in [0, 1]; a strip plot widens its axis to show one
outside it, a trend chart draws it at the edge. Nothing here knows about HTML:
``html.py`` hands in plain values and the words each dot's tooltip says.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from firewall.text import fmt

# The strip plot, in pixels from its top: dots scatter over the strip, the band
# and the threshold reach a little beyond it, the tick labels sit under the axis.
STRIP_TOP, STRIP_HEIGHT = 8.0, 28.0
BAND_TOP, BAND_HEIGHT = 4.0, 36.0
AXIS_Y = 44.0
STRIP_SVG_HEIGHT = 60
# The trend chart: the 0-1 scale spans these pixels.
TREND_TOP, TREND_HEIGHT = 6.0, 60.0
TREND_SVG_HEIGHT = 72
# Successive fractional parts of multiples of the golden ratio fill [0, 1) evenly
# in any prefix: dots of equal score spread over the strip instead of hiding each other.
_GOLDEN = 0.6180339887498949
MIN_BAND = 0.4  # percent: an IQR of 0 still shows, as a sliver at the median


@dataclasses.dataclass(frozen=True)
class Mark:
    """One value to plot, the words a pointer over it shows, and how it is drawn."""

    value: float
    title: str
    css: str = ""
    judgements: tuple[float, ...] = ()  # an eval with a judge: each judgement of the output


@dataclasses.dataclass(frozen=True)
class Dot:
    x: str  # percent of the width, as the template writes it
    y: str  # pixels
    title: str
    css: str
    # An output judged more than once: its judgements' span (x from, x to) and each one's x,
    # drawn as a small range through the dot.
    span: tuple[str, str] | None = None
    judgements: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Tick:
    at: str  # x in percent (strip plot) or y in pixels (trend chart)
    label: str


@dataclasses.dataclass(frozen=True)
class StripPlot:
    dots: tuple[Dot, ...]
    ticks: tuple[Tick, ...]
    threshold: str  # x
    band: tuple[str, str] | None  # x and width of the IQR band
    median: str | None  # x
    height: int = STRIP_SVG_HEIGHT


@dataclasses.dataclass(frozen=True)
class Segment:
    x1: str
    y1: str
    x2: str
    y2: str


@dataclasses.dataclass(frozen=True)
class TrendChart:
    dots: tuple[Dot, ...]
    segments: tuple[Segment, ...]
    ticks: tuple[Tick, ...]
    threshold: str  # y
    height: int = TREND_SVG_HEIGHT


def strip_plot(
    marks: Sequence[Mark],
    *,
    threshold: float,
    quartiles: tuple[float, float, float] | None,
) -> StripPlot:
    """Trials on the score axis, with ``quartiles`` (q1, median, q3) as band and line."""
    values = [mark.value for mark in marks] + [v for mark in marks for v in mark.judgements]
    low = min([0.0, threshold, *values])
    high = max([1.0, threshold, *values])

    def x(value: float) -> float:
        return (value - low) / (high - low) * 100

    dots = tuple(
        Dot(
            x=_pct(x(mark.value)),
            y=_px(STRIP_TOP + STRIP_HEIGHT * ((position * _GOLDEN) % 1.0)),
            title=mark.title,
            css=mark.css,
            **_judgements(mark, x),
        )
        for position, mark in enumerate(marks)
    )
    steps = (0.0, 0.25, 0.5, 0.75, 1.0) if (low, high) == (0.0, 1.0) else (0.0, 0.5, 1.0)
    ticks = tuple(Tick(at=_pct(step * 100), label=fmt(low + step * (high - low))) for step in steps)
    band = median = None
    if quartiles is not None:
        q1, middle, q3 = quartiles
        width = max(x(q3) - x(q1), MIN_BAND)
        centre = (x(q1) + x(q3)) / 2
        band = (_pct(centre - width / 2), _pct(width))
        median = _pct(x(middle))
    return StripPlot(dots=dots, ticks=ticks, threshold=_pct(x(threshold)), band=band, median=median)


def trend_chart(marks: Sequence[Mark | None], *, threshold: float) -> TrendChart | None:
    """Medians oldest first, None for a run whose probe had none; None below two points."""
    if sum(mark is not None for mark in marks) < 2:
        return None
    last = len(marks) - 1

    def x(position: int) -> str:
        return _pct(position / last * 100)

    def y(value: float) -> str:
        return _px(TREND_TOP + (1.0 - min(max(value, 0.0), 1.0)) * TREND_HEIGHT)

    dots = tuple(
        Dot(x=x(position), y=y(mark.value), title=mark.title, css=mark.css)
        for position, mark in enumerate(marks)
        if mark is not None
    )
    segments = tuple(
        Segment(x1=x(position), y1=y(before.value), x2=x(position + 1), y2=y(after.value))
        for position, (before, after) in enumerate(itertools.pairwise(marks))
        if before is not None and after is not None
    )
    ticks = tuple(Tick(at=y(value), label=fmt(value)) for value in (1.0, 0.5, 0.0))
    return TrendChart(dots=dots, segments=segments, ticks=ticks, threshold=y(threshold))


def _judgements(mark: Mark, x: Callable[[float], float]) -> dict[str, Any]:
    """A dot's judgements, when its output was judged more than once."""
    if len(mark.judgements) < 2:
        return {}
    return {
        "span": (_pct(x(min(mark.judgements))), _pct(x(max(mark.judgements)))),
        "judgements": tuple(_pct(x(value)) for value in mark.judgements),
    }


def _pct(value: float) -> str:
    return f"{value:.2f}%"


def _px(value: float) -> str:
    return f"{value:.1f}"
