"""The quarantine lifecycle as pure functions: streaks, resets, errors and release."""

from __future__ import annotations

import datetime as dt

import pytest
from builders import trials

from firewall._stats import Stats
from firewall.artefact import EvalReport
from firewall.config import Settings
from firewall.lifecycle import (
    RELEASE_CLEAN_TRIALS,
    Entry,
    Progress,
    advance,
    overdue,
    quarantine_entry,
    with_progress,
)
from firewall.policy import Status
from firewall.spec import Source
from firewall.timeutil import to_text

AT = dt.datetime(2026, 11, 29, 3, 0, tzinfo=dt.timezone.utc)


def report(
    status: Status, *, median: float = 0.9, iqr: float = 0.01, scored: int = 15
) -> EvalReport:
    return EvalReport(
        id="tone",
        status=status,
        blocking=False,
        reason=f"{status.value} because",
        source=Source(file="evals/tone.py", line=3),
        k=15,
        threshold=0.8,
        flakiness=0.03,
        stats=Stats(median=median, iqr=iqr),
        trials=trials([median] * scored),
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


def test_an_unstable_probe_resets_the_streak_and_the_clean_trials() -> None:
    kept, event = advance(
        entry(2, clean=30), report(Status.QUARANTINE, iqr=0.2), release_after=3, at=AT
    )
    assert kept is not None and (kept.stable_streak, kept.clean_trials) == (0, 0)
    assert event.kind == "unstable" and "reset" in event.message


def test_an_erroring_probe_leaves_the_streak_and_says_so() -> None:
    kept, event = advance(entry(2), report(Status.ERROR), release_after=3, at=AT)
    assert kept is not None and kept.stable_streak == 2
    assert kept.median == 0.7, "an errored probe measured nothing"
    assert event.kind == "errored" and "unchanged at 2/3" in event.message


def test_the_streak_reaching_release_after_with_59_clean_trials_releases() -> None:
    kept, event = advance(entry(2, clean=44), report(Status.PASS), release_after=3, at=AT)
    assert kept is None
    assert event.kind == "released" and not event.fails_gate
    assert "released after 3 stable nightly probes and 59 clean trials" in event.message


def test_a_streak_with_too_few_clean_trials_waits_for_more() -> None:
    # Three nights of 14 scored trials: 42 without a collapse do not bound a 5% rate.
    kept, event = advance(
        entry(2, clean=28), report(Status.PASS, scored=14), release_after=3, at=AT
    )
    assert kept is not None and (kept.stable_streak, kept.clean_trials) == (3, 42)
    assert event.kind == "stable"
    assert "only 42 of the 59 clean trials release needs" in event.message
    kept, event = advance(kept, report(Status.PASS, scored=17), release_after=3, at=AT)
    assert kept is None and event.kind == "released"


def test_59_clean_trials_bound_a_collapse_rate_below_5_percent_at_95_percent() -> None:
    assert RELEASE_CLEAN_TRIALS == 59
    assert 0.95**59 < 0.05 < 0.95**58


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
