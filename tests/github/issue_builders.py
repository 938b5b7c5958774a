"""What the issue tests share: a probe, its issue context, a nightly event, a fresh tracker.

Each tracker is made as a new CI run would make it: it knows nothing but what
GitHub (the stand-in, through the real PyGithub client) tells it.
"""

from __future__ import annotations

import datetime as dt

from builders import make_spec, trials
from github_standin import GitHubStandIn

from firewall.artefact import EvalReport
from firewall.github.client import GitHubIssues, Transport
from firewall.github.issues import IssueContext
from firewall.lifecycle import Entry, Event, EventKind
from firewall.policy import decide
from firewall.runner.trial import TrialRecord
from firewall.spec import Source

AT = dt.datetime(2026, 11, 29, 3, 0, tzinfo=dt.timezone.utc)
FAST = Transport(timeout=2, retries=1, backoff=0.01, request_gap=0, write_gap=0)
SCORES = [0.52, 0.91, 0.63, 0.95, 0.71, 0.44, 0.86]
ID = "triage-tone"


def probe(
    eval_id: str = ID,
    scores: list[float] = SCORES,
    *,
    owner: str | None = "alice",
    records: list[TrialRecord] | None = None,
    in_flight: int = 1,
) -> EvalReport:
    """An unstable eval's decided probe, as the issue tests quote it."""
    spec = make_spec(id=eval_id, threshold=0.85)
    if records is None:
        records = [
            t.model_copy(update={"seed": 4100 + t.index, "in_flight": in_flight})
            for t in trials(scores)
        ]
    decision = decide(spec, records)
    return EvalReport(
        id=eval_id,
        status=decision.status,
        blocking=True,
        reason=decision.reason,
        source=Source(file="evals/triage.py", line=12),
        k=len(records),
        threshold=spec.threshold,
        flakiness=spec.flakiness,
        stats=decision.stats,
        trials=records,
        owner=owner,
    )


def entry(
    eval_id: str = ID,
    *,
    issue: int | None = None,
    since: dt.datetime = AT,
    owner: str | None = None,
) -> Entry:
    report = probe(eval_id)
    return Entry(
        since=since,
        source="auto",
        reason=report.reason,
        median=report.stats.median,
        iqr=report.stats.iqr,
        k=report.k,
        git_sha="0a1b2c3",
        issue=issue,
        owner=owner,
        last_probe=since,
    )


def context(
    eval_id: str = ID, *, issue: int | None = None, since: dt.datetime = AT
) -> IssueContext:
    return IssueContext(
        report=probe(eval_id, owner=None),
        entry=entry(eval_id, issue=issue, since=since),
        replay=f"firewall replay {eval_id} --seed 4105",
        release_after=3,
    )


def night(kind: EventKind, streak: int, eval_id: str = ID) -> Event:
    return Event(eval_id, kind, f"{kind} {streak}/3", streak, 3)


def tracker(hub: GitHubStandIn, *, labels: tuple[str, ...] = ("flaky-eval",)) -> GitHubIssues:
    return GitHubIssues(hub.repository, hub.token, labels=labels, base_url=hub.url, transport=FAST)


def marker(eval_id: str = ID) -> str:
    return f"<!-- firewall:eval={eval_id} -->"
