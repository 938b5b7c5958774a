"""Trend sparklines: a series of medians as one short line of block characters."""

from __future__ import annotations

from collections.abc import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"
GAP = "·"  # a run whose probe produced no median (it errored)


def sparkline(values: Sequence[float | None], width: int = 14) -> str:
    """The last ``width`` values, scaled between their own min and max."""
    values = list(values)[-width:]
    present = [v for v in values if v is not None]
    if not present:
        return GAP * len(values)
    low, high = min(present), max(present)
    span = high - low
    out = []
    for value in values:
        if value is None:
            out.append(GAP)
        elif span < 1e-12:
            out.append(BLOCKS[len(BLOCKS) // 2])
        else:
            out.append(BLOCKS[round((value - low) / span * (len(BLOCKS) - 1))])
    return "".join(out)
