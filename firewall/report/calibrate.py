"""`firewall calibrate`: suggest `flakiness` from each eval's own within-run spread.

The instability rule quarantines an eval whose trials' standard deviation is
significantly above F / 1.349, the sd an IQR of F has under normal noise
(``firewall.policy``: a chi-square test at ``SPREAD_LEVEL``). So the flakiness to
suggest for an eval is the one at which an eval as steady as this one has been is
quarantined in ``FALSE_QUARANTINE`` of its probes, no more:

- its within-run sd is pooled over the history's probes (each run's variance,
  weighted by its degrees of freedom), and taken at its 95% upper confidence bound,
  so that a short history errs towards a wider F;
- for a probe of n trials (the eval's usual count), a true sd s is quarantined with
  chance P(chi2(n-1) > c_level sd_F² / s²), where c_level is the test's critical value;
  that is ``FALSE_QUARANTINE`` at sd_F = s sqrt(c_rate / c_level), and F = 1.349 sd_F.

Each suggestion shows the share of past probes the spread test would have
quarantined at it, next to the share at the current setting. The global suggestion
is the median of the evals' own, so that a few wild evals do not pull it up for every
other one; no suggestion is below ``FLOOR``, since a flakiness of 0 quarantines an eval
for its first wobble. The sd pooled counts every probe, unstable ones too: an eval whose
runs scatter for a reason gets a wide suggestion, which the comment's sd shows. The
snippet comes commented out: a suggestion to read, not to paste.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

from pydantic import BaseModel

from firewall._stats import IQR_PER_SD, chi2_isf, spread_from_squares
from firewall.policy import SPREAD_LEVEL
from firewall.store.history import HistoryRow
from firewall.text import fmt, percent

MIN_POINTS = 10
FALSE_QUARANTINE = 0.01
"""The share of an honest eval's probes the suggested flakiness quarantines: one in 100
for an eval whose within-run sd is what its history shows (at its upper bound)."""
SD_CONFIDENCE = 0.95
"""The one-sided confidence of the upper bound the pooled sd is taken at."""
FLOOR = 0.01
"""The least flakiness suggested: an eval whose scores never scattered gets this, not 0."""


class Suggestion(BaseModel):
    eval_id: str | None  # None: the global suggestion
    points: int  # probes with a within-run sd (two or more scored trials); overall, any probe
    flakiness: float | None  # None when there are fewer than MIN_POINTS probes
    quarantined_share: float | None  # of past probes, at the suggested value
    current: float
    current_share: float
    sd: float | None = None  # the pooled within-run sd
    sd_high: float | None = None  # its upper confidence bound, which the suggestion uses
    trials: int | None = None  # the probe size the suggestion is for (the usual count)


class Calibration(BaseModel):
    overall: Suggestion
    evals: list[Suggestion]
    min_points: int = MIN_POINTS
    false_quarantine: float = FALSE_QUARANTINE
    level: float = SPREAD_LEVEL


def calibrate(rows: Iterable[HistoryRow], current: dict[str, float], default: float) -> Calibration:
    """Per eval, the flakiness its own within-run sd needs for ``FALSE_QUARANTINE``;
    overall, the median of those; each with what it would have quarantined."""
    observed: dict[str, list[HistoryRow]] = {}
    seen = 0  # every probe with a spread of any kind, older rows with an IQR alone too
    for row in rows:
        spread = row.sd is not None and row.n >= 2
        if spread or row.iqr is not None:
            observed.setdefault(row.eval_id, [])
            seen += 1
        if spread:
            observed[row.eval_id].append(row)
    evals = [
        _suggest(eval_id, probes, current.get(eval_id, default))
        for eval_id, probes in sorted(observed.items())
    ]
    own = [s.flakiness for s in evals if s.flakiness is not None]
    typical = round(statistics.median(own), 4) if own else None
    everything = [row for probes in observed.values() for row in probes]
    overall = Suggestion(
        eval_id=None,
        points=seen,
        flakiness=typical,
        quarantined_share=None if typical is None else _share(everything, typical),
        current=default,
        current_share=_share(everything, default),
    )
    return Calibration(overall=overall, evals=evals)


def suggested_flakiness(sd: float, trials: int) -> float:
    """The F at which a probe of ``trials`` normal scores with this sd is quarantined by
    the spread test (fixed K, at ``SPREAD_LEVEL``) with chance ``FALSE_QUARANTINE``."""
    df = max(1, trials - 1)
    ratio = chi2_isf(FALSE_QUARANTINE, df) / chi2_isf(SPREAD_LEVEL, df)
    return IQR_PER_SD * sd * math.sqrt(ratio)


def _suggest(eval_id: str, probes: list[HistoryRow], current: float) -> Suggestion:
    if len(probes) < MIN_POINTS:
        return Suggestion(
            eval_id=eval_id,
            points=len(probes),
            flakiness=None,
            quarantined_share=None,
            current=current,
            current_share=_share(probes, current),
        )
    df = sum(row.n - 1 for row in probes)
    squares = math.fsum((row.sd or 0.0) ** 2 * (row.n - 1) for row in probes)
    sd = math.sqrt(squares / df)
    # df s² / sd² is chi-square on df: the true sd is below this bound with SD_CONFIDENCE.
    sd_high = math.sqrt(squares / chi2_isf(SD_CONFIDENCE, df))
    trials = round(statistics.median(row.n for row in probes))
    flakiness = max(FLOOR, round(suggested_flakiness(sd_high, trials), 4))
    return Suggestion(
        eval_id=eval_id,
        points=len(probes),
        flakiness=flakiness,
        quarantined_share=_share(probes, flakiness),
        current=current,
        current_share=_share(probes, current),
        sd=sd,
        sd_high=sd_high,
        trials=trials,
    )


def _share(probes: list[HistoryRow], flakiness: float) -> float:
    """The share of these probes the spread test (fixed K) quarantines at ``flakiness``."""
    if not probes:
        return 0.0
    flagged = sum(
        spread_from_squares((row.sd or 0.0) ** 2 * (row.n - 1), row.n - 1, flakiness).p_value
        < SPREAD_LEVEL
        for row in probes
    )
    return flagged / len(probes)


def render_calibration(result: Calibration, *, prefix: str, history: str, min_points: int) -> str:
    """Suggestions as a TOML snippet with the cost of each choice in comments."""
    overall = result.overall
    rate = percent(result.false_quarantine)
    lines = [
        f"# flakiness from {overall.points} probes in {history}: per eval, the F at which an",
        "# eval as steady as its runs have been (its within-run sd, pooled, at the 95% upper",
        f"# bound) is quarantined in {rate} of probes by the spread test at "
        f"{percent(result.level)}; the",
        "# global line is the median of the evals' own, so a few wild evals do not pull it",
        f"# up; never below {FLOOR:g}. Read, then uncomment what you keep.",
    ]
    if prefix:
        lines.append(f"# [{prefix.rstrip('.')}]")
    if overall.flakiness is None:
        lines.append(
            f"# not enough history for an overall suggestion: no eval has {min_points} "
            "probes with a spread"
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
            assert s.sd is not None and s.sd_high is not None
            lines.append(
                f"# {name}  flakiness = {s.flakiness:g}  # within-run sd {fmt(s.sd)} "
                f"(upper {fmt(s.sd_high)}) over {s.points} probes of {s.trials}; would have "
                f"quarantined {percent(s.quarantined_share)} "
                f"(now {s.current:g}: {percent(s.current_share)})"
            )
    return "\n".join(lines)
