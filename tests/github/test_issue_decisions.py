"""Decisions on issues: a person's "not planned" stands; twins of concurrent runs are closed."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from github_standin import GitHubStandIn
from issue_builders import ID, context, entry, marker, night, probe, tracker

from firewall.config import Settings
from firewall.github import sync
from firewall.github.client import GitHubIssues
from firewall.github.issues import NotPlanned, RecordingIssues
from firewall.lifecycle import Entry, Event

SETTINGS = Settings()
BEFORE_ANY_CLOSING = dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)  # the stand-in's clock: Nov


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn(assignable={"alice"}) as standin:
        yield standin


def nightly(issues: GitHubIssues, entries: dict[str, Entry], events: list[Event]) -> sync.Sync:
    return sync.after_nightly(
        issues,
        reports=[probe(event.eval_id) for event in events],
        events=events,
        before=entries,
        after=entries,
        settings=SETTINGS,
        trends={},
    )


def catch_up_on_a_pull_request(issues: GitHubIssues, entries: dict[str, Entry]) -> sync.Sync:
    return sync.after_gate(
        issues, reports=[], new=[], entries=entries, settings=SETTINGS, trends={}
    )


# --- closed as not planned


def test_an_issue_closed_as_not_planned_is_never_reopened_commented_or_replaced(
    hub: GitHubStandIn,
) -> None:
    number = hub.add_issue("quarantined", f"{marker()}\nnotes", ["flaky-eval"])
    hub.close_by_hand(number, "not_planned")
    entries = {ID: entry(issue=number)}

    for streak in (1, 2):
        result = nightly(tracker(hub), entries, [night("stable", streak)])
        assert result.warnings == [] and result.numbers == {} and result.dropped == {}
    nightly(tracker(hub), entries, [night("released", 3)])

    issue = hub.issues[number]
    assert (issue.state, issue.state_reason) == ("closed", "not_planned")
    assert issue.body == f"{marker()}\nnotes" and issue.comments == []
    assert len(hub.issues) == 1 and hub.calls("PATCH") == [] and hub.calls("POST") == []


def test_the_tracker_reports_the_not_planned_closing(hub: GitHubStandIn) -> None:
    declined = hub.add_issue("declined", marker(), ["flaky-eval"])
    hub.close_by_hand(declined, "not_planned")
    done = hub.add_issue("done", marker("other"), ["flaky-eval"])
    hub.close_by_hand(done, "completed")

    found = tracker(hub).not_planned()

    assert found == {
        ID: NotPlanned(
            number=declined, closed_at=dt.datetime(2026, 11, 1, 0, 2, tzinfo=dt.timezone.utc)
        )
    }


def test_a_lost_number_does_not_bring_a_declined_issue_back(hub: GitHubStandIn) -> None:
    number = hub.add_issue("quarantined", marker(), ["flaky-eval"])
    hub.close_by_hand(number, "not_planned")

    for _ in range(2):  # e.g. every pull request's run, whose registry lacks the number
        catch_up_on_a_pull_request(tracker(hub), {ID: entry(since=BEFORE_ANY_CLOSING)})

    assert len(hub.issues) == 1 and hub.calls("POST") == []


def test_a_declined_issue_whose_label_github_dropped_is_still_honoured() -> None:
    with GitHubStandIn(triage=False) as hub:
        number = hub.add_issue("opened without its label", marker(), [])
        hub.close_by_hand(number, "not_planned")

        catch_up_on_a_pull_request(tracker(hub), {ID: entry(since=BEFORE_ANY_CLOSING)})

        assert len(hub.issues) == 1 and hub.calls("POST") == []


def test_a_quarantine_that_starts_after_the_closing_gets_an_issue_again(hub: GitHubStandIn) -> None:
    number = hub.add_issue("quarantined long ago", marker(), ["flaky-eval"])
    hub.close_by_hand(number, "not_planned")

    result = catch_up_on_a_pull_request(tracker(hub), {ID: entry()})  # since Nov 29: later

    assert result.numbers == {ID: number + 1} and hub.issues[number + 1].state == "open"


def test_an_issue_the_firewall_closed_is_not_taken_for_a_decision(hub: GitHubStandIn) -> None:
    number = tracker(hub).open_or_comment(ID, context())
    tracker(hub).close(ID, number, "released by hand")
    assert hub.issues[number].state_reason == "completed"
    assert hub.issues[number].comments[-1].rstrip().endswith("<!-- firewall:closed=released -->")

    result = catch_up_on_a_pull_request(tracker(hub), {ID: entry(issue=number)})

    assert result.numbers == {ID: number + 1}, "quarantined again: a new issue"


# --- twins


def test_twins_of_concurrent_runs_keep_the_oldest_and_close_the_others_as_duplicates(
    hub: GitHubStandIn,
) -> None:
    oldest = hub.add_issue("run A", marker(), ["flaky-eval"])
    twin = hub.add_issue("run B", marker(), ["flaky-eval"])
    other = hub.add_issue("run C", marker(), ["flaky-eval"])

    result = catch_up_on_a_pull_request(tracker(hub), {ID: entry(issue=twin)})

    assert result.numbers == {ID: oldest}
    assert hub.issues[oldest].state == "open" and hub.issues[oldest].comments == []
    for number in (twin, other):
        issue = hub.issues[number]
        assert (issue.state, issue.state_reason) == ("closed", "duplicate")
        [comment] = issue.comments
        assert comment.startswith(f"Duplicate of #{oldest}\n")
        assert comment.rstrip().endswith("<!-- firewall:closed=duplicate -->")
    assert not any(d.number == twin for d in tracker(hub).not_planned().values()), (
        "a duplicate is no decision"
    )


def test_a_github_without_the_duplicate_reason_closes_twins_as_completed(
    hub: GitHubStandIn,
) -> None:
    hub.add_issue("run A", marker(), ["flaky-eval"])
    twin = hub.add_issue("run B", marker(), ["flaky-eval"])
    hub.fail("422", method="PATCH", path=rf"/issues/{twin}$", times=1)

    assert tracker(hub).open_issues() == {ID: 1}

    assert (hub.issues[twin].state, hub.issues[twin].state_reason) == ("closed", "completed")
    reasons = [call.body.get("state_reason") for call in hub.calls("PATCH", rf"/issues/{twin}$")]
    assert reasons == ["duplicate", "completed"]


def test_an_eval_the_nightly_quarantines_keeps_the_issue_it_opened(hub: GitHubStandIn) -> None:
    new = Event("fresh", "quarantined", "newly unstable", 0, 3)
    after = {"fresh": entry("fresh")}

    result = nightly(tracker(hub), after, [new])

    assert result.numbers == {"fresh": 1}
    assert hub.issues[1].state == "open", "not closed as a stray by the catch-up after it"


def test_a_dry_run_catch_up_says_it_would_open_only_the_issues_owed() -> None:
    lines: list[str] = []
    recording = RecordingIssues(echo=lines.append)

    assert recording.adopt_or_open("known", context("known", issue=42)) == 42
    assert recording.adopt_or_open(ID, context()) is None

    assert lines == [
        "would open issue for triage-tone (labels flaky-eval), unless one is open",
    ]
    assert recording.not_planned() == {}
