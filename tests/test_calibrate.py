"""`firewall calibrate` from each eval's own within-run spread (issue 23, item 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from builders import make_spec, trials

from firewall.policy import SPREAD_LEVEL, Status, decide
from firewall.report.calibrate import (
    FALSE_QUARANTINE,
    MIN_POINTS,
    calibrate,
    render_calibration,
    suggested_flakiness,
)
from firewall.store.history import HistoryRow


def rows(eval_id: str, sd: float, runs: int, n: int = 7, seed: int = 1) -> list[HistoryRow]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(runs):
        scores = rng.normal(0.85, sd, n)
        out.append(
            HistoryRow(
                eval_id=eval_id,
                run_id=f"run-{i}",
                mode="run",
                status="pass",
                k=n,
                build_ts=f"2026-01-{i % 28 + 1:02d}T00:00:00Z",
                median=float(np.median(scores)),
                iqr=float(np.subtract(*np.percentile(scores, [75, 25]))),
                sd=float(np.std(scores, ddof=1)),
                n=n,
            )
        )
    return out


@pytest.mark.parametrize("n", [3, 7, 15, 30])
@pytest.mark.parametrize("sd", [0.004, 0.01, 0.03])
def test_the_suggestion_quarantines_an_eval_with_that_sd_at_the_stated_rate(
    n: int, sd: float
) -> None:
    flakiness = suggested_flakiness(sd, n)
    sd_f = flakiness / (2 * scipy.stats.norm.ppf(0.75))
    bar = scipy.stats.chi2.isf(SPREAD_LEVEL, n - 1)  # the statistic the test needs
    rate = scipy.stats.chi2.sf(bar * sd_f**2 / sd**2, n - 1)
    assert rate == pytest.approx(FALSE_QUARANTINE, rel=1e-6)


def test_an_eval_calibrated_from_its_history_is_quarantined_about_one_probe_in_100() -> None:
    result = calibrate(rows("steady", 0.01, 40), {"steady": 0.03}, 0.03)
    [steady] = result.evals
    assert steady.flakiness is not None and steady.sd is not None and steady.sd_high is not None
    assert steady.sd == pytest.approx(0.01, rel=0.15)
    assert steady.sd < steady.sd_high < 1.3 * steady.sd  # 240 degrees of freedom
    assert steady.trials == 7
    spec = make_spec(k=7, adaptive=False, flakiness=steady.flakiness, threshold=0.5)
    rng = np.random.default_rng(5)
    probes = 4000
    flagged = sum(
        decide(spec, trials(rng.normal(0.85, 0.01, 7).tolist())).status is Status.QUARANTINE
        for _ in range(probes)
    )
    # At most the stated rate (the upper bound on the sd makes it a little less), with
    # room for the Monte Carlo error of 4,000 probes.
    assert flagged / probes <= FALSE_QUARANTINE + 3 * math.sqrt(0.01 * 0.99 / probes)


def test_past_probes_at_the_suggestion_are_quarantined_about_as_often_as_stated() -> None:
    """Where the P80 of past IQRs quarantined 1 probe in 5 by construction."""
    history = rows("steady", 0.01, 400, seed=3)
    p80 = float(np.percentile([row.iqr for row in history], 80))
    result = calibrate(history, {"steady": 0.5 * p80}, 0.03)
    [steady] = result.evals
    assert steady.quarantined_share is not None and steady.quarantined_share < 0.025
    assert steady.current_share > 0.5  # half the old P80: most probes beyond it
    assert steady.flakiness is not None and steady.flakiness > p80


def test_evals_without_a_within_run_sd_are_listed_without_a_suggestion() -> None:
    older = [
        HistoryRow(
            eval_id="old",
            run_id=f"r{i}",
            mode="run",
            status="pass",
            k=7,
            build_ts="2026-01-01T00:00:00Z",
            iqr=0.01,
            n=7,
        )
        for i in range(12)
    ]
    result = calibrate([*older, *rows("new", 0.01, 5)], {}, 0.03)
    assert [s.eval_id for s in result.evals] == ["new", "old"]
    assert all(s.flakiness is None for s in result.evals)
    assert result.overall.points == 17 and result.overall.flakiness is None
    text = render_calibration(result, prefix="tool.firewall.", history="h.jsonl", min_points=10)
    assert "# old  not enough history: 0 probes, need 10" in text
    assert "no eval has 10 probes with a spread" in text


def test_the_snippet_states_the_rate_and_the_sd_behind_each_suggestion() -> None:
    history = rows("steady", 0.01, MIN_POINTS + 5) + rows("wild", 0.04, MIN_POINTS + 5, seed=2)
    result = calibrate(history, {"steady": 0.03, "wild": 0.03}, 0.03)
    text = render_calibration(result, prefix="", history="h.jsonl", min_points=MIN_POINTS)
    assert "is quarantined in 1% of probes by the spread test at 5%" in text
    steady = next(s for s in result.evals if s.eval_id == "steady")
    wild = next(s for s in result.evals if s.eval_id == "wild")
    assert steady.flakiness is not None and wild.flakiness is not None
    assert wild.flakiness > 3 * steady.flakiness
    assert f"# steady  flakiness = {steady.flakiness:g}  # within-run sd 0.0" in text
    assert result.overall.flakiness == pytest.approx(
        (steady.flakiness + wild.flakiness) / 2, abs=1e-4
    )
