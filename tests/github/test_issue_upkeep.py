"""The upkeep of an eval's issue over many runs: few comments, its owner, few requests.

Real PyGithub against the stand-in, through the sync functions the pipeline calls.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from github_standin import GitHubStandIn
from issue_builders import AT, ID, entry, marker, night, probe, tracker

from firewall.config import Settings
from firewall.github import sync
from firewall.github.client import GitHubIssues
from firewall.github.issues import Candidate
from firewall.lifecycle import Entry, Event, EventKind

SETTINGS = Settings()
CANDIDATE = Candidate(
    sha="abc1234", ref="refs/pull/12/merge", median=0.7, iqr=0.2, k=7, reason="iqr", at=AT, pr=12
)


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn(assignable={"alice"}) as standin:
        yield standin


def nightly(issues: GitHubIssues, quarantined: Entry, event: Event) -> sync.Sync:
    return sync.after_nightly(
        issues,
        reports=[probe()],
        events=[event],
        before={},
        after={ID: quarantined},
        settings=SETTINGS,
        trends={},
    )


def comments(hub: GitHubStandIn, number: int) -> list[str]:
    return [c.splitlines()[0] for c in hub.comments_on(number)]


def test_a_status_comment_only_when_the_state_on_the_issue_changes(hub: GitHubStandIn) -> None:
    number = tracker(hub).record_candidate(ID, CANDIDATE) or 0
    assert comments(hub, number) == []

    # The nightly confirms the candidate each night until its adoption is merged.
    for night_number in range(3):
        at = AT + dt.timedelta(days=night_number)
        nightly(tracker(hub), entry(since=at), Event(ID, "quarantined", "confirmed"))
    assert len(comments(hub, number)) == 1, comments(hub, number)
    assert comments(hub, number)[0].startswith("Quarantined again")
    assert hub.issues[number].title == f"Flaky eval quarantined: {ID}"
    assert "<!-- firewall:state=unstable -->" in hub.issues[number].body

    # Merged: unstable nights say nothing new, a stable one does, and so does the next unstable.
    nights: list[tuple[EventKind, int]] = [
        ("unstable", 0),
        ("unstable", 0),
        ("stable", 1),
        ("stable", 2),
    ]
    for kind, streak in nights:
        nightly(tracker(hub), entry(issue=number), night(kind, streak))
    nightly(tracker(hub), entry(issue=number), night("unstable", 0))

    said = comments(hub, number)
    assert len(said) == 3, said
    assert said[1].startswith("**Stable**") and said[2].startswith("**Unstable again**"), said
    assert "toward release: 0 of 3" in hub.issues[number].body, "the block follows each night"


def test_a_candidate_is_opened_assigned_to_the_eval_owner(hub: GitHubStandIn) -> None:
    result = sync.after_candidates(tracker(hub), {ID: CANDIDATE}, owners={ID: "alice"})

    [issue] = hub.issues.values()
    assert result.numbers == {ID: issue.number} and issue.assignees == ["alice"]
    assert result.warnings == []


def test_an_adopted_candidate_gets_the_eval_owner(hub: GitHubStandIn) -> None:
    number = tracker(hub).record_candidate(ID, CANDIDATE) or 0  # opened without one
    assert hub.issues[number].assignees == []

    quarantined = entry().model_copy(update={"owner": "alice"})
    nightly(tracker(hub), quarantined, Event(ID, "quarantined", "confirmed"))

    assert hub.issues[number].assignees == ["alice"]
    nightly(tracker(hub), quarantined, Event(ID, "quarantined", "confirmed"))
    assert len(hub.calls("POST", r"/assignees$")) == 1, "assigned once"


def test_an_issue_found_again_keeps_the_assignee_a_person_chose(hub: GitHubStandIn) -> None:
    number = hub.add_issue("quarantined", marker(), ["bug"])  # not the firewall's label
    hub.issues[number].assignees = ["bob"]
    quarantined = entry(issue=number).model_copy(update={"owner": "alice"})

    result = sync.after_gate(
        tracker(hub), reports=[], new=[], entries={ID: quarantined}, settings=SETTINGS, trends={}
    )

    assert result.numbers == {} and result.warnings == [], "adopted by its number"
    assert hub.issues[number].assignees == ["bob"] and not hub.calls("POST")


def test_an_owner_that_cannot_be_assigned_to_an_adopted_issue_is_said_not_commented(
    hub: GitHubStandIn,
) -> None:
    number = tracker(hub).record_candidate(ID, CANDIDATE) or 0
    quarantined = entry().model_copy(update={"owner": "carol"})  # not assignable here

    result = nightly(tracker(hub), quarantined, Event(ID, "quarantined", "confirmed"))

    [warning] = result.warnings
    assert f"issue #{number} for {ID} is unassigned: could not assign owner carol" in warning
    assert len(comments(hub, number)) == 1, "the quarantine's comment, no other"


def test_a_dropped_label_is_said_once_a_command() -> None:
    with GitHubStandIn(triage=False) as hub:
        issues = tracker(hub)  # one command's tracker: the candidates' sync, then the gate's
        recorded = sync.after_candidates(issues, {"a-first": CANDIDATE})
        gate = sync.after_gate(
            issues,
            reports=[probe("b-middle")],
            new=["b-middle"],
            entries={"b-middle": entry("b-middle")},
            settings=SETTINGS,
            trends={},
        )

        said = [w for w in recorded.warnings + gate.warnings if "without the label" in w]
        assert len(said) == 1, said
        assert len(hub.open_issues()) == 2


def test_a_candidate_among_1500_open_issues_costs_a_few_requests(hub: GitHubStandIn) -> None:
    hub.labels["flaky-eval"] = {"color": "d93f0b", "description": None}
    for n in range(1500):  # in the stand-in's memory: no request
        hub.add_issue(f"a bug report {n}", f"it broke {n}", ["bug"])
    hub.add_issue("Flaky eval quarantined: other", marker("other"), ["flaky-eval"])
    hub.requests.clear()

    result = sync.after_candidates(tracker(hub), {ID: CANDIDATE}, owners={ID: "alice"})

    assert result.warnings == [] and hub.issues[result.numbers[ID]].assignees == ["alice"]
    listings = hub.calls("GET", r"/issues$")
    assert all(call.query.get("labels") == ["flaky-eval"] for call in listings), listings
    assert len(listings) == 2, "the open ones labelled, the closed ones labelled"
    assert len(hub.requests) <= 6, [(r.method, r.path) for r in hub.requests]
