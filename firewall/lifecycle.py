"""The quarantine lifecycle as pure functions: enter, re-probe, count the streak, release.

  run / nightly --all         nightly (clearly stable)    streak >= release_after and
──────────────────────► QUARANTINED ──────────────► streak+1 ──── 59 clean trials ────► released
 unstable probe            │  ▲   nightly (unstable): streak = 0, clean trials = 0
                           │  └── nightly (errored): streak unchanged
                           └── `firewall quarantine release`: released by hand
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

from firewall._stats import EPSILON
from firewall.artefact import EvalReport
from firewall.config import Settings
from firewall.policy import Status
from firewall.text import fmt
from firewall.timeutil import Timestamp


class Entry(BaseModel):
    """Why and since when an eval is quarantined, and its road back."""

    model_config = ConfigDict(extra="forbid")

    since: Timestamp
    source: Literal["auto", "manual"]
    reason: str
    median: float | None = None
    iqr: float | None = None
    k: int | None = None
    git_sha: str | None = None
    issue: int | None = None
    stable_streak: int = 0
    clean_trials: int = 0
    last_probe: Timestamp | None = None
    review_by: Timestamp | None = None
    owner: str | None = None

    def overdue(self, at: dt.datetime) -> bool:
        return self.review_by is not None and at > self.review_by


class Progress(BaseModel):
    """The part of an entry that changes every night: where the eval is on its road back.

    In CI the registry is the reviewed truth and changes only through commits, so
    this part lives apart from it (on the state branch, ``firewall.store.progress``)
    and is laid over the reviewed entries when they are read.
    """

    model_config = ConfigDict(extra="forbid")

    stable_streak: int = 0
    clean_trials: int = 0  # scored trials since the last unstable night: none collapsed
    last_probe: Timestamp | None = None
    median: float | None = None
    iqr: float | None = None
    k: int | None = None
    issue: int | None = None


PROGRESS_FIELDS = tuple(Progress.model_fields)


class ProbeNumbers(BaseModel):
    """What one probe of an eval found, as an issue's marker and the state branch record it."""

    model_config = ConfigDict(extra="ignore", frozen=True)  # a newer firewall may add keys

    sha: str | None = None
    ref: str | None = None  # e.g. refs/pull/12/merge, refs/heads/main
    median: float | None = None
    iqr: float | None = None
    k: int
    reason: str = ""
    at: Timestamp


class Candidate(ProbeNumbers):
    """An instability found on a pull request: not yet a quarantine. Recorded on the state
    branch (``candidates.json``) and on the eval's issue where there is one, for the nightly
    to confirm or dismiss on the default branch."""

    pr: int | None = None


def progress_of(entry: Entry) -> Progress:
    return Progress(**{field: getattr(entry, field) for field in PROGRESS_FIELDS})


def with_progress(entry: Entry, progress: Progress | None) -> Entry:
    """The reviewed entry with the nightly's latest progress laid over it.

    Validated, not ``model_copy(update=...)``: that takes values as they are, and a
    dump's are the file's (a ``Timestamp`` dumps to text, which then has no ``astimezone``).
    """
    if progress is None:
        return entry
    update = {field: getattr(progress, field) for field in PROGRESS_FIELDS}
    if update["issue"] is None:
        update["issue"] = entry.issue  # a number the reviewed file knows and progress does not
    return Entry.model_validate({**dict(entry), **update})


def reviewed_change(before: Entry | None, after: Entry | None) -> bool:
    """Whether a reviewer should see this change: an eval adopted or released, or its
    reason, owner or review date changed; not a streak, a probe time, a number."""
    if before is None or after is None:
        return before is not after
    keep = set(Entry.model_fields) - set(PROGRESS_FIELDS)
    return before.model_dump(include=keep) != after.model_dump(include=keep)


EventKind = Literal[
    "quarantined", "stable", "unstable", "errored", "released", "missing", "dismissed"
]


@dataclasses.dataclass(frozen=True)
class Event:
    """Something that happened to a quarantine, for the terminal, the report and GitHub."""

    eval_id: str
    kind: EventKind
    message: str
    streak: int = 0
    release_after: int = 0
    fails_gate: bool = False


def quarantine_entry(
    report: EvalReport,
    settings: Settings,
    *,
    at: dt.datetime,
    git_sha: str | None,
    source: Literal["auto", "manual"] = "auto",
) -> Entry:
    """A new registry entry for an eval that a probe found unstable."""
    return Entry(
        since=at,
        source=source,
        reason=report.reason,
        median=report.stats.median,
        iqr=report.stats.iqr,
        k=report.k,
        git_sha=git_sha,
        last_probe=at,
        review_by=at + dt.timedelta(days=settings.nightly.review_days),
        owner=report.owner,
    )


def advance(
    entry: Entry, report: EvalReport, *, release_after: int, at: dt.datetime
) -> tuple[Entry | None, Event]:
    """Count one nightly probe toward release; None as the entry means released."""
    eval_id = report.id
    if report.status is Status.ERROR:
        kept = entry.model_copy(update={"last_probe": at})
        return kept, Event(
            eval_id,
            "errored",
            f"probe errored, streak unchanged at {entry.stable_streak}/"
            f"{release_after}: {report.reason}",
            entry.stable_streak,
            release_after,
        )
    probed = {
        "last_probe": at,
        "median": report.stats.median,
        "iqr": report.stats.iqr,
        "k": report.k,
    }
    if report.status is Status.QUARANTINE:
        kept = entry.model_copy(update={**probed, "stable_streak": 0, "clean_trials": 0})
        return kept, Event(
            eval_id,
            "unstable",
            f"still unstable, streak reset to 0/{release_after}: {report.reason}",
            0,
            release_after,
        )
    # Not unstable: none of its trials collapsed (the fence held), clear of the line or not.
    clean = entry.clean_trials + sum(trial.error is None for trial in report.trials)
    probed["clean_trials"] = clean
    margin = clear_of_the_line(report)
    if margin is not None:
        kept = entry.model_copy(update=probed)
        return kept, Event(
            eval_id,
            "stable",
            f"stable but {margin}: streak kept at {entry.stable_streak}/{release_after}",
            entry.stable_streak,
            release_after,
        )
    streak = entry.stable_streak + 1
    if streak < release_after or clean < RELEASE_CLEAN_TRIALS:
        kept = entry.model_copy(update={**probed, "stable_streak": streak})
        iqr = fmt(report.stats.iqr or 0)
        message = (
            f"stable probe {streak}/{release_after} toward release "
            f"(iqr {iqr}, {clean}/{RELEASE_CLEAN_TRIALS} clean trials)"
            if streak < release_after
            else f"stable probe {streak}/{release_after} (iqr {iqr}), but only {clean} of the "
            f"{RELEASE_CLEAN_TRIALS} clean trials release needs, to bound a collapse rate "
            f"below {RELEASE_COLLAPSE_RATE:.0%}"
        )
        return kept, Event(eval_id, "stable", message, streak, release_after)
    fails = report.status is Status.FAIL
    consequence = (
        f"; note: it will now FAIL the gate: {report.reason}"
        if fails
        else f"; it passes the gate: {report.reason}"
    )
    return None, Event(
        eval_id,
        "released",
        f"released after {streak} stable nightly probes and {clean} clean trials{consequence}",
        streak,
        release_after,
        fails_gate=fails,
    )


RELEASE_COLLAPSE_RATE = 0.05
RELEASE_CONFIDENCE = 0.95
RELEASE_CLEAN_TRIALS = math.ceil(
    math.log(1 - RELEASE_CONFIDENCE) / math.log(1 - RELEASE_COLLAPSE_RATE)
)
"""Release also needs this many trials in a row (59) without a collapse since the last
unstable night: an eval that collapses in 5% of its trials shows 59 clean ones in a row
with probability 0.95^59 < 5%, so its release bounds the collapse rate below 5% at 95%
confidence. Three stable nights of 15 trials see only 45, which a 10% collapse rate
passes 0.9^45 = 0.9% of the time per try, and over 30 nights of tries far more often."""
RELEASE_IQR_SHARE = 0.75  # a night counts toward release at an IQR of at most 0.75 F
RELEASE_ITEM_P = 0.05  # or, for an accuracy over items, an item test this far from its 1%


def clear_of_the_line(report: EvalReport) -> str | None:
    """Why a stable night is too close to the line to count toward release, or None.

    Entry needs an IQR above F; release needs one well below it (0.75 F), or for an
    accuracy over items an item test that is not merely above its 1% level but at
    5% or more. Without this margin an eval that sits near F is released on a lucky
    run of nights and re-quarantined by the next pull request (the issue opens and
    closes again); ``benchmarks/decisions.py`` measures both rates.
    """
    stats = report.stats
    if stats.item_p is not None:
        if stats.item_p < RELEASE_ITEM_P:
            return f"its item test p {stats.item_p:.3g} is below {RELEASE_ITEM_P:g}"
        return None
    limit = RELEASE_IQR_SHARE * report.flakiness
    if stats.iqr is not None and stats.iqr > limit + EPSILON:
        return (
            f"its iqr {fmt(stats.iqr)} is above {fmt(limit)} ({RELEASE_IQR_SHARE:g} of flakiness)"
        )
    return None


def overdue(entries: dict[str, Entry], at: dt.datetime) -> list[str]:
    """Ids whose review date has passed: flagged, never failed."""
    return sorted(eval_id for eval_id, entry in entries.items() if entry.overdue(at))
