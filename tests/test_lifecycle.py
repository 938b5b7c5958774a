"""The quarantine lifecycle as pure functions: streaks, resets, errors and release."""

from __future__ import annotations

import datetime as dt
import math
import random

import pytest
from builders import trials
from scipy import stats

from firewall._stats import Stats, summarize
from firewall.artefact import EvalReport
from firewall.config import Settings
from firewall.lifecycle import (
    CLEAN_STEP,
    COLLAPSE_STEP,
    EVIDENCE_CAP,
    RELEASE_CLEAN_TRIALS,
    RELEASE_LLR,
    Entry,
    Progress,
    advance,
    collapses,
    evidence,
    overdue,
    quarantine_entry,
    weigh,
    with_progress,
)
from firewall.policy import Status
from firewall.spec import Source
from firewall.store.progress import PROGRESS
from firewall.timeutil import to_text

AT = dt.datetime(2026, 11, 29, 3, 0, tzinfo=dt.timezone.utc)


def report(
    status: Status,
    *,
    median: float = 0.9,
    iqr: float = 0.01,
    scored: int = 15,
    scores: list[float] | None = None,
) -> EvalReport:
    measured = (
        summarize(scores, [s >= 0.8 for s in scores], errors=0, confidence=0.95)
        if scores
        else Stats(median=median, iqr=iqr)
    )
    return EvalReport(
        id="tone",
        status=status,
        blocking=False,
        reason=f"{status.value} because",
        source=Source(file="evals/tone.py", line=3),
        k=15,
        threshold=0.8,
        flakiness=0.03,
        stats=measured,
        trials=trials(scores or [median] * scored),
    )


def entry(streak: int = 0, *, clean: int = 0) -> Entry:
    return Entry(
        since=AT - dt.timedelta(days=3),
        source="auto",
        reason="iqr 0.2 > 0.03",
        median=0.7,
        iqr=0.2,
        k=7,
        stable_streak=streak,
        clean_trials=clean,
    )


def test_a_stable_probe_adds_one_to_the_streak() -> None:
    kept, event = advance(entry(1), report(Status.PASS), release_after=3, at=AT)
    assert kept is not None and kept.stable_streak == 2
    assert kept.last_probe == AT and kept.iqr == 0.01 and kept.k == 15
    assert event.kind == "stable" and "2/3" in event.message


def test_an_unstable_probe_resets_the_streak_but_not_the_collapse_test() -> None:
    kept, event = advance(
        entry(2, clean=30), report(Status.QUARANTINE, iqr=0.2), release_after=3, at=AT
    )
    assert kept is not None and kept.stable_streak == 0
    # An older file's 30 clean trials, then tonight's 15 with no collapse: 45 counted.
    assert kept.collapse_llr == pytest.approx(45 * CLEAN_STEP)
    assert (kept.counted_trials, kept.collapses) == (45, 0)
    assert event.kind == "unstable" and "reset" in event.message
    assert "0 collapses in 45 trials since quarantined" in event.message


def test_an_erroring_probe_leaves_the_streak_and_says_so() -> None:
    kept, event = advance(entry(2), report(Status.ERROR), release_after=3, at=AT)
    assert kept is not None and kept.stable_streak == 2
    assert kept.median == 0.7, "an errored probe measured nothing"
    assert event.kind == "errored" and "unchanged at 2/3" in event.message


def test_the_streak_reaching_release_after_with_73_clean_trials_releases() -> None:
    kept, event = advance(entry(2, clean=58), report(Status.PASS), release_after=3, at=AT)
    assert kept is None
    assert event.kind == "released" and not event.fails_gate
    assert "released after 3 stable nightly probes; 0 collapses in 73 trials" in event.message


def test_a_streak_with_too_few_trials_for_the_collapse_test_waits_for_more() -> None:
    # Three nights of 14 scored trials: 42 without a collapse do not tell 1% from 5%.
    kept, event = advance(
        entry(2, clean=28), report(Status.PASS, scored=14), release_after=3, at=AT
    )
    assert kept is not None and (kept.stable_streak, kept.counted_trials) == (3, 42)
    assert event.kind == "stable" and "the collapse test does not release it yet" in event.message
    kept, event = advance(kept, report(Status.PASS, scored=17), release_after=3, at=AT)
    assert kept is not None and kept.counted_trials == 59 and event.kind == "stable"
    kept, event = advance(kept, report(Status.PASS, scored=14), release_after=3, at=AT)
    assert kept is None and event.kind == "released"


def test_the_release_test_is_walds_sprt_of_1_against_5_percent() -> None:
    assert pytest.approx(math.log(0.05 / 0.01)) == COLLAPSE_STEP
    assert (
        pytest.approx(stats.binom.logpmf(0, 1, 0.05) - stats.binom.logpmf(0, 1, 0.01)) == CLEAN_STEP
    )
    assert pytest.approx(math.log(0.05)) == RELEASE_LLR
    assert RELEASE_CLEAN_TRIALS == 73
    assert 73 * CLEAN_STEP <= RELEASE_LLR < 72 * CLEAN_STEP
    # A night's step is the binomial log-likelihood ratio of its collapses (scipy's).
    for collapsed, scored in [(0, 15), (2, 15), (15, 15), (1, 7)]:
        ratio = stats.binom.logpmf(collapsed, scored, 0.05) - stats.binom.logpmf(
            collapsed, scored, 0.01
        )
        assert weigh(0.0, collapsed, scored) == pytest.approx(min(EVIDENCE_CAP, ratio))


def test_collapsed_trials_are_counted_below_the_policys_fence() -> None:
    scores = [0.9, 0.91, 0.89, 0.9, 0.92, 0.9, 0.88, 0.9, 0.91, 0.9, 0.9, 0.89, 0.9, 0.1, 0.2]
    night = report(Status.QUARANTINE, scores=scores)
    assert collapses(night) == 2 and collapses(night, outlier_fence=0.0) == 0
    kept, event = advance(entry(), night, release_after=3, at=AT)
    assert kept is not None and kept.collapses == 2
    assert kept.collapse_llr == pytest.approx(2 * COLLAPSE_STEP + 13 * CLEAN_STEP)
    assert kept.clean_trials == 0 and "2 collapses in 15 trials" in event.message


def test_evidence_of_collapses_is_held_at_its_cap() -> None:
    assert weigh(EVIDENCE_CAP - 0.1, 15, 15) == EVIDENCE_CAP
    # From the cap, an eval that stopped collapsing is out after 255 clean trials.
    nights, llr = 0, EVIDENCE_CAP
    while llr > RELEASE_LLR:
        llr, nights = weigh(llr, 0, 15), nights + 1
    assert nights == 17


def release_night(rate: float, rng: random.Random, nights: int = 90) -> int | None:
    """The night the release test first allows an eval collapsing at ``rate`` out (with
    three stable nights before it, as release_after asks), or None within ``nights``."""
    llr = 0.0
    for night in range(1, nights + 1):
        collapsed = sum(rng.random() < rate for _ in range(15))
        llr = weigh(llr, collapsed, 15)
        if night >= 3 and llr <= RELEASE_LLR:
            return night
    return None


def test_an_eval_collapsing_in_5_percent_of_trials_is_rarely_released_in_90_nights() -> None:
    rng = random.Random(20261201)
    released = sum(release_night(0.05, rng) is not None for _ in range(2000))
    assert released / 2000 <= 0.05  # measured 4.0% (Monte Carlo se 0.45%)


def test_an_honest_eval_is_released_within_a_stated_number_of_nights() -> None:
    rng = random.Random(20261202)
    never = [release_night(0.0, rng) for _ in range(100)]
    assert set(never) == {5}  # 73 clean trials: five nights of 15
    one_percent = sorted(release_night(0.01, rng) or 91 for _ in range(2000))
    assert one_percent[int(0.95 * 2000)] <= 20  # 95% of evals at a 1% rate within 20 nights


def test_an_older_progress_file_still_loads_and_keeps_its_clean_trials() -> None:
    old = '{"schema_version": 1, "evals": {"tone": {"stable_streak": 2, "clean_trials": 40}}}'
    parsed = PROGRESS.parse(old)
    assert parsed is not None and parsed["tone"].collapse_llr is None
    laid = with_progress(entry(), parsed["tone"])
    assert evidence(laid) == pytest.approx(40 * CLEAN_STEP)


def test_a_release_below_threshold_says_it_will_now_fail() -> None:
    kept, event = advance(
        entry(0, clean=59), report(Status.FAIL, median=0.6), release_after=1, at=AT
    )
    assert kept is None and event.fails_gate
    assert "will now FAIL the gate" in event.message


@pytest.mark.parametrize("days, expected", [(29, []), (31, ["tone"])])
def test_overdue_after_review_days(days: int, expected: list[str]) -> None:
    made = quarantine_entry(report(Status.QUARANTINE), Settings(), at=AT, git_sha="abc")
    assert made.review_by == AT + dt.timedelta(days=30)
    assert overdue({"tone": made}, AT + dt.timedelta(days=days)) == expected


def test_a_stable_night_near_the_line_keeps_the_streak() -> None:
    # iqr 0.025: stable (<= F 0.03) but above 0.75 F = 0.0225, so it does not count.
    kept, event = advance(entry(1), report(Status.PASS, iqr=0.025), release_after=3, at=AT)
    assert kept is not None and kept.stable_streak == 1
    assert event.kind == "stable" and "streak kept at 1/3" in event.message
    assert "iqr 0.025 is above 0.022" in event.message


def test_a_night_at_three_quarters_of_f_counts() -> None:
    kept, _ = advance(entry(1), report(Status.PASS, iqr=0.0225), release_after=3, at=AT)
    assert kept is not None and kept.stable_streak == 2


def test_an_accuracy_over_items_counts_when_its_test_is_well_clear_of_its_level() -> None:
    near = report(Status.PASS, iqr=0.06)
    near = near.model_copy(update={"stats": near.stats.model_copy(update={"item_p": 0.02})})
    kept, event = advance(entry(1), near, release_after=3, at=AT)
    assert kept is not None and kept.stable_streak == 1 and "item test p 0.02" in event.message
    clear = near.model_copy(update={"stats": near.stats.model_copy(update={"item_p": 0.4})})
    kept, _ = advance(entry(1), clear, release_after=3, at=AT)
    assert kept is not None and kept.stable_streak == 2, "its IQR is binomial noise, not a margin"


def test_progress_laid_over_an_entry_keeps_its_times_typed() -> None:
    progress = Progress(stable_streak=2, clean_trials=40, last_probe=AT, median=0.9, k=30)

    laid = with_progress(entry().model_copy(update={"issue": 7}), progress)

    assert laid.last_probe == AT and isinstance(laid.last_probe, dt.datetime)
    assert (laid.stable_streak, laid.clean_trials, laid.issue) == (2, 40, 7)
    assert to_text(laid.last_probe) == "2026-11-29T03:00:00Z"
    assert laid.model_dump()["last_probe"] == "2026-11-29T03:00:00Z", "it still serialises"
