"""`firewall calibrate`: suggest `flakiness` from the IQRs the history has seen (their P80)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from firewall.stats import EPSILON, percentile

MIN_POINTS = 10
PERCENTILE = 80


class Suggestion(BaseModel):
    eval_id: str | None  # None: the global suggestion
    points: int
    flakiness: float | None  # None when there are fewer than MIN_POINTS probes
    quarantined_share: float | None  # of past probes, at the suggested value
    current: float
    current_share: float


class Calibration(BaseModel):
    overall: Suggestion
    evals: list[Suggestion]
    min_points: int = MIN_POINTS


def calibrate(
    rows: Iterable[dict[str, Any]], current: dict[str, float], default: float
) -> Calibration:
    """P80 of the observed IQRs per eval and overall, with what each would have quarantined."""
    observed: dict[str, list[float]] = {}
    for row in rows:
        iqr = row.get("iqr")
        if isinstance(iqr, (int, float)) and not isinstance(iqr, bool):
            observed.setdefault(row["eval_id"], []).append(float(iqr))
    everything = [value for values in observed.values() for value in values]
    return Calibration(
        overall=_suggest(None, everything, default),
        evals=[
            _suggest(eval_id, values, current.get(eval_id, default))
            for eval_id, values in sorted(observed.items())
        ],
    )


def _suggest(eval_id: str | None, values: list[float], current: float) -> Suggestion:
    def share(limit: float) -> float:
        return sum(value > limit + EPSILON for value in values) / len(values) if values else 0.0

    suggested = round(percentile(values, PERCENTILE), 4) if len(values) >= MIN_POINTS else None
    return Suggestion(
        eval_id=eval_id,
        points=len(values),
        flakiness=suggested,
        quarantined_share=None if suggested is None else share(suggested),
        current=current,
        current_share=share(current),
    )
