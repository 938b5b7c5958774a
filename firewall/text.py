"""The text helpers every renderer uses: numbers, columns, one-line reasons, sparklines,
and eval-supplied text made safe to show.

Reasons and errors quote whatever an eval printed. Every rendering that puts
them on a page (the job summary, the HTML and JUnit reports) strips the same
things: ANSI sequences whole (not just their ESC, which would leave ``[31m``),
then the C0 and C1 controls other than tab and line breaks, and what XML 1.0
cannot carry at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")

BLOCKS = "▁▂▃▄▅▆▇█"
GAP = "·"  # a run whose probe produced no median (it errored)
MISSING = "-"


def fmt(value: float) -> str:
    """A number as a reason shows it: up to 3 decimals, no trailing zeros."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def number(value: float | None) -> str:
    """``fmt`` for a value that may be missing (an errored probe has no median)."""
    return MISSING if value is None else fmt(value)


def percent(value: float | None) -> str:
    return MISSING if value is None else f"{value * 100:.0f}%"


def one_line(text: str) -> str:
    """Line breaks folded into `` | ``, so that a multi-line message stays one row."""
    return " | ".join(part.strip() for part in text.splitlines() if part.strip())


def columns(rows: Sequence[Sequence[str]], *, ragged_last: bool = False) -> list[str]:
    """Rows padded into aligned columns, two spaces apart, trailing blanks trimmed.

    With ``ragged_last`` the last column (a free-text reason) is neither measured
    nor padded, so one long reason does not push every other row wide.
    """
    if not rows:
        return []
    count = len(rows[0]) - (1 if ragged_last else 0)
    widths = [max(len(row[i]) for row in rows) for i in range(count)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        if ragged_last:
            cells.append(row[-1])
        lines.append("  ".join(cells).rstrip())
    return lines


def printable(text: str) -> str:
    """``text`` without escape sequences and control characters; tab, LF and CR stay."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def sparkline(values: Sequence[float | None], width: int = 14) -> str:
    """The last ``width`` values as block characters on one fixed scale, 0 to 1.

    Scores live in [0, 1], and every sparkline shares that scale, so that one
    reads against another: a steady eval at 0.85 draws a flat ``▇▇▇``, not the
    full height its own min and max would stretch it to, and a single point sits
    at its level. Values outside the scale are drawn at its edge.
    """
    out = []
    for value in list(values)[-width:]:
        if value is None:
            out.append(GAP)
        else:
            level = round(min(max(value, 0.0), 1.0) * (len(BLOCKS) - 1))
            out.append(BLOCKS[level])
    return "".join(out)
