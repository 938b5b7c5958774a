"""`firewall calibrate`: suggest `flakiness` from the IQRs the history has seen (their P80).

An eval's P80 is the IQR that 80% of its past probes stayed within. The global
suggestion is the median of the evals' own P80s, so that a few wild evals do
not pull it up for every other one; no suggestion is below ``FLOOR``, since a
flakiness of 0 quarantines an eval for its first wobble. The snippet comes
commented out: a suggestion to read, not to paste.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from pydantic import BaseModel

from firewall._stats import EPSILON, percentile
from firewall.store.history import HistoryRow
from firewall.text import percent

MIN_POINTS = 10
PERCENTILE = 80
FLOOR = 0.01
"""The least flakiness suggested: an eval whose scores never scattered gets this, not 0."""


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


def calibrate(rows: Iterable[HistoryRow], current: dict[str, float], default: float) -> Calibration:
    """P80 of the observed IQRs per eval and overall, with what each would have quarantined."""
    observed: dict[str, list[float]] = {}
    for row in rows:
        if row.iqr is not None:
            observed.setdefault(row.eval_id, []).append(row.iqr)
    everything = [value for values in observed.values() for value in values]
    evals = [
        _suggest(eval_id, values, current.get(eval_id, default))
        for eval_id, values in sorted(observed.items())
    ]
    own = [s.flakiness for s in evals if s.flakiness is not None]
    typical = round(statistics.median(own), 4) if own else None
    return Calibration(overall=_suggest(None, everything, default, typical=typical), evals=evals)


def _suggest(
    eval_id: str | None, values: list[float], current: float, *, typical: float | None = None
) -> Suggestion:
    def share(limit: float) -> float:
        return sum(value > limit + EPSILON for value in values) / len(values) if values else 0.0

    if typical is not None:  # the global one: the evals' own, not the pooled probes'
        suggested: float | None = typical
    elif len(values) >= MIN_POINTS:
        suggested = max(FLOOR, round(percentile(values, PERCENTILE), 4))
    else:
        suggested = None
    return Suggestion(
        eval_id=eval_id,
        points=len(values),
        flakiness=suggested,
        quarantined_share=None if suggested is None else share(suggested),
        current=current,
        current_share=share(current),
    )


def render_calibration(result: Calibration, *, prefix: str, history: str, min_points: int) -> str:
    """Suggestions as a TOML snippet with the cost of each choice in comments."""
    overall = result.overall
    lines = [
        f"# flakiness from {overall.points} probes in {history}: an eval's P80 is the IQR that",
        "# 80% of its past probes stayed within (so it would have quarantined about 1 in 5 of",
        "# them); the global line is the median of the evals' own, so a few wild evals do not",
        f"# pull it up; never below {FLOOR:g}. Read, then uncomment what you keep.",
    ]
    if prefix:
        lines.append(f"# [{prefix.rstrip('.')}]")
    if overall.flakiness is None:
        lines.append(
            f"# not enough history for an overall suggestion: {overall.points} probes, "
            f"need {min_points}"
        )
    else:
        lines.append(
            f"# flakiness = {overall.flakiness:g}  # would have quarantined "
            f"{percent(overall.quarantined_share)} of past probes "
            f"(now {overall.current:g}: {percent(overall.current_share)})"
        )
    lines.append("")
    lines.append("# per eval: set `flakiness` in its evals entry or @firewall.eval(flakiness=...)")
    width = max((len(s.eval_id or "") for s in result.evals), default=0)
    for s in result.evals:
        name = (s.eval_id or "").ljust(width)
        if s.flakiness is None:
            lines.append(f"# {name}  not enough history: {s.points} probes, need {min_points}")
        else:
            lines.append(
                f"# {name}  flakiness = {s.flakiness:g}  # {s.points} probes; would "
                f"have quarantined {percent(s.quarantined_share)} "
                f"(now {s.current:g}: {percent(s.current_share)})"
            )
    return "\n".join(lines)
