"""The quarantine lifecycle as pure functions: enter, re-probe, count the streak, release.

  run / nightly --all         nightly (clearly stable)    streak >= release_after and the
──────────────────────► QUARANTINED ──────────────► streak+1 ── collapse test says ≤ 1% ──► released
 unstable probe            │  ▲   nightly (unstable): streak = 0 (the collapse test goes on)
                           │  └── nightly (errored): streak unchanged
                           └── `firewall quarantine release`: released by hand

Release needs two things. ``release_after`` stable nights in a row, clear of the
line (``clear_of_the_line``), say the eval is stable now. A sequential
probability ratio test of its collapse rate (``weigh``), accumulated over every
night since it was quarantined and never reset, says it does not collapse
often: Wald's test of a rate of at most 1% against at least 5%, which releases
an eval that collapses in 5% of its trials at most 5% of the time however many
nights it is re-probed (Ville's inequality; the test's ceiling, ``EVIDENCE_CAP``,
is what lets a fixed eval out within 17 nights). ``benchmarks/decisions.py``
measures both.
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
from firewall.policy import Status, fence_at, item_test
from firewall.text import fmt
from firewall.timeutil import Timestamp

DEFAULT_FENCE = 3.0  # the config's outlier_fence default, for a caller without the spec


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
    collapse_llr: float | None = None
    counted_trials: int = 0
    collapses: int = 0
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
    clean_trials: int = 0  # scored trials since the last collapse
    # The release test of the collapse rate (``weigh``), over every night since the entry:
    # its log-likelihood ratio (None in a file an older firewall wrote: then it is taken
    # from clean_trials, which counted trials without a collapse), the trials it counted
    # and how many of them collapsed.
    collapse_llr: float | None = None
    counted_trials: int = 0
    collapses: int = 0
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
    entry: Entry,
    report: EvalReport,
    *,
    release_after: int,
    at: dt.datetime,
    outlier_fence: float = DEFAULT_FENCE,
) -> tuple[Entry | None, Event]:
    """Count one nightly probe toward release; None as the entry means released.

    ``outlier_fence``: the eval's, for counting its collapsed trials (0: the rule is off
    for it, as for an eval judged on its pass rate, and nothing counts as a collapse)."""
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
    scored = sum(trial.error is None and trial.score is not None for trial in report.trials)
    collapsed = collapses(report, outlier_fence)
    llr = weigh(evidence(entry), collapsed, scored)
    total, trials = entry.collapses + collapsed, counted(entry) + scored
    probed = {
        "last_probe": at,
        "median": report.stats.median,
        "iqr": report.stats.iqr,
        "k": report.k,
        "collapse_llr": llr,
        "counted_trials": trials,
        "collapses": total,
        "clean_trials": 0 if collapsed else entry.clean_trials + scored,
    }
    test = _test_text(total, trials, llr)
    if report.status is Status.QUARANTINE:
        kept = entry.model_copy(update={**probed, "stable_streak": 0})
        return kept, Event(
            eval_id,
            "unstable",
            f"still unstable, streak reset to 0/{release_after}: {report.reason}; {test}",
            0,
            release_after,
        )
    margin = clear_of_the_line(report)
    if margin is not None:
        kept = entry.model_copy(update=probed)
        return kept, Event(
            eval_id,
            "stable",
            f"stable but {margin}: streak kept at {entry.stable_streak}/{release_after}; {test}",
            entry.stable_streak,
            release_after,
        )
    streak = entry.stable_streak + 1
    if streak < release_after or llr > RELEASE_LLR + EPSILON:
        kept = entry.model_copy(update={**probed, "stable_streak": streak})
        iqr = fmt(report.stats.iqr or 0)
        message = (
            f"stable probe {streak}/{release_after} toward release (iqr {iqr}); {test}"
            if streak < release_after
            else f"stable probe {streak}/{release_after} (iqr {iqr}), but the collapse test "
            f"does not release it yet: {test}"
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
        f"released after {streak} stable nightly probes; {test}{consequence}",
        streak,
        release_after,
        fails_gate=fails,
    )


SAFE_RATE = 0.01  # H0 of the release test: the eval collapses in at most 1% of its trials
RELEASE_COLLAPSE_RATE = 0.05  # H1: in at least 5%
RELEASE_ERROR = 0.05  # the chance of ever releasing an eval at RELEASE_COLLAPSE_RATE
COLLAPSE_STEP = math.log(RELEASE_COLLAPSE_RATE / SAFE_RATE)  # +1.609 per collapsed trial
CLEAN_STEP = math.log((1 - RELEASE_COLLAPSE_RATE) / (1 - SAFE_RATE))  # -0.0412 per clean one
RELEASE_LLR = math.log(RELEASE_ERROR)  # -3.0: at or below it, the test releases
EVIDENCE_CAP = -2.5 * RELEASE_LLR  # 7.5: the most evidence of collapses remembered
RELEASE_CLEAN_TRIALS = math.ceil(RELEASE_LLR / CLEAN_STEP)
"""Wald's sequential probability ratio test of the collapse rate, 1% against 5%.

Each scored trial adds log(0.05 / 0.01) when it collapsed and log(0.95 / 0.99)
when it did not; the eval may be released once the sum is at most log(0.05).
Under a collapse rate of 5% the likelihood ratio of 1% to 5% is a martingale
of mean 1, so by Ville's inequality it ever reaches 1 / 0.05 with probability
at most 0.05: the nights' repeated looks cost nothing, and higher rates are
released less often still. An eval that never collapses is released after
RELEASE_CLEAN_TRIALS = 73 trials (five nights of 15), one at 1% after about
eight nights. The sum is held at EVIDENCE_CAP at most, so that an eval fixed
after months of collapses is released after (7.5 + 3.0) / 0.0412 = 255 clean
trials (17 nights of 15) rather than never; in 20,000 simulated evals at 5% the
cap left the false releases within 90 nights within their Monte Carlo error
(4.05% against 4.03% without it)."""


def evidence(entry: Entry) -> float:
    """The release test's sum so far; from ``clean_trials`` in an older firewall's file."""
    if entry.collapse_llr is not None:
        return entry.collapse_llr
    return max(RELEASE_LLR, entry.clean_trials * CLEAN_STEP)


def counted(entry: Entry) -> int:
    """The trials the release test has counted; ``clean_trials`` in an older file."""
    return entry.counted_trials if entry.collapse_llr is not None else entry.clean_trials


def weigh(llr: float, collapsed: int, scored: int) -> float:
    """The release test's sum after a night of ``scored`` trials, ``collapsed`` of them."""
    step = collapsed * COLLAPSE_STEP + (scored - collapsed) * CLEAN_STEP
    return min(EVIDENCE_CAP, llr + step)


def collapses(report: EvalReport, outlier_fence: float = DEFAULT_FENCE) -> int:
    """How many of a probe's scored trials fell below its collapse fence: the policy's
    (contract §4, ``firewall.policy.fence_at``), with the eval's ``outlier_fence``."""
    stats = report.stats
    if stats.q1 is None or stats.iqr is None:
        return 0
    scored = [t for t in report.trials if t.error is None and t.score is not None]
    fence = fence_at(
        stats.q1, stats.iqr, report.flakiness, outlier_fence, len(scored), item_test(scored)
    )
    if fence is None:
        return 0
    return sum(1 for t in scored if t.score is not None and t.score < fence.at - EPSILON)


def _test_text(collapsed: int, trials: int, llr: float) -> str:
    return (
        f"{collapsed} collapse{'' if collapsed == 1 else 's'} in {trials} trials since "
        f"quarantined, collapse test {llr:.2f} (releases at {RELEASE_LLR:.2f} or below: "
        f"a rate of {SAFE_RATE:.0%} rather than {RELEASE_COLLAPSE_RATE:.0%})"
    )


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
