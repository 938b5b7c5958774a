"""The issue body explains the instability: hints, the rule checklist, flips, drifting fields."""

from __future__ import annotations

import datetime as dt

from builders import make_spec

from firewall.github.issues import IssueContext, render_body
from firewall.lifecycle import Entry
from firewall.pipeline.stages import judge
from firewall.runner.trial import TrialRecord

AT = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc)


def trial(index: int, score: float, *, category: str, flip: float) -> TrialRecord:
    return TrialRecord(
        index=index,
        seed=1000 + index,
        score=score,
        passed=score >= 0.8,
        fields={"category": category},
        items={"case-stable": 1.0, "case-flip": flip, "@everyone": 1.0},
    )


def test_body_names_causes_checks_flipping_cases_and_drift() -> None:
    scores = [0.95, 0.5, 0.96, 0.52, 0.94, 0.51, 0.97]
    trials = [
        trial(i, s, category="billing" if s > 0.9 else "refund", flip=float(s > 0.9))
        for i, s in enumerate(scores)
    ]
    report = judge(make_spec(id="tone", k=7), trials)
    assert report.status.value == "quarantine"
    entry = Entry(since=AT, source="auto", reason=report.reason, median=0.94, iqr=0.44, k=7)
    body = render_body(
        "tone", IssueContext(report=report, entry=entry, replay="firewall replay tone --seed 1001")
    )
    causes = body.split("### Likely causes", 1)[1].split("###", 1)[0]
    assert "two behaviours, not noise" in causes and "sampling randomness" in causes
    assert "FAIL iqr" in body and "ok   errors 0 <= 0" in body
    assert "case-flip passed 4/7" in body
    assert "category" in body and '"billing"' in body
    assert "@everyone" not in body, "an item id cannot ping anyone"
