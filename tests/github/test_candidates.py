"""Candidates (contract §6): recorded on the eval's issue, listed, dismissed; proposals noted."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator

import pytest
from github_standin import GitHubStandIn
from issue_builders import ID, context, marker, tracker

from firewall.github import sync
from firewall.github.issues import Candidate, ProbeNumbers, RecordingIssues
from firewall.github.markers import json_marker, read_markers

AT = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
FIRST = Candidate(
    pr=12,
    sha="abc1234",
    ref="refs/pull/12/merge",
    median=0.7,
    iqr=0.2,
    k=7,
    reason="IQR 0.2 > 0.03",
    at=AT,
)
SECOND = FIRST.model_copy(
    update={"pr": 13, "ref": "refs/pull/13/merge", "at": AT + dt.timedelta(days=1)}
)
STABLE = ProbeNumbers(sha="def5678", ref="refs/heads/main", median=0.91, iqr=0.01, k=7, at=AT)


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn(assignable={"alice"}) as standin:
        yield standin


def candidate_markers(text: str) -> list[Candidate]:
    return list(read_markers("candidate", text, Candidate))


def test_a_candidate_opens_the_eval_issue_with_its_numbers_in_a_marker(hub: GitHubStandIn) -> None:
    number = tracker(hub).record_candidate(ID, FIRST)

    issue = hub.issues[number or 0]
    assert issue.title == f"Flaky eval candidate: {ID}" and issue.labels == ["flaky-eval"]
    assert issue.body.startswith(marker() + "\n") and "pull request #12" in issue.body
    assert "| median | 0.7 |" in issue.body and "| k | 7 |" in issue.body
    assert candidate_markers(issue.body) == [FIRST]
    assert re.search(r'<!-- firewall:candidate \{"sha": "abc1234", .*"pr": 12\} -->', issue.body), (
        issue.body
    )


def test_a_later_candidate_comments_and_the_body_keeps_the_latest(hub: GitHubStandIn) -> None:
    number = tracker(hub).record_candidate(ID, FIRST)
    assert tracker(hub).record_candidate(ID, SECOND) == number

    issue = hub.issues[number or 0]
    assert len(hub.issues) == 1
    [comment] = issue.comments
    assert comment.startswith("**Unstable again on pull request #13**")
    assert candidate_markers(comment) == [SECOND] and candidate_markers(issue.body) == [SECOND]
    assert tracker(hub).candidates() == {ID: SECOND}


def test_candidates_are_read_from_the_body_and_its_comments() -> None:
    with GitHubStandIn(triage=False) as hub:  # a token that GitHub drops the labels of
        candidates_read_from_the_body_and_its_comments(hub)


def candidates_read_from_the_body_and_its_comments(hub: GitHubStandIn) -> None:
    number = hub.add_issue("candidate", f"{marker()}\n{json_marker('candidate', FIRST)}", ["x"])
    hub.issues[number].comments.append(f"newer\n\n{json_marker('candidate', SECOND)}")
    quarantine = hub.add_issue("quarantined", marker("other"), ["flaky-eval"])
    hub.issues[quarantine].comments.append("**Stable** on the nightly probe")

    assert tracker(hub).candidates() == {ID: SECOND}, "found though unlabelled, latest wins"
    assert not hub.calls("GET", rf"/issues/{quarantine}/comments"), "no candidate: not read"


def test_a_value_cannot_end_the_marker_or_mention_anyone() -> None:
    evil = FIRST.model_copy(
        update={"reason": 'x --> <!-- firewall:eval=other --> @octocat & "q" --!>'}
    )

    text = json_marker("candidate", evil)

    assert text.count("-->") == 1 and text.endswith(" -->") and "<!--" not in text[4:]
    assert "@" not in text and ">" not in text[:-3]
    assert candidate_markers(f"before {text} after") == [evil]
    assert (
        json.loads(text.removeprefix("<!-- firewall:candidate ").removesuffix(" -->"))["pr"] == 12
    )


def test_a_damaged_marker_is_skipped() -> None:
    text = '<!-- firewall:candidate {"pr": 12, "k": "many"} -->\n' + json_marker("candidate", FIRST)
    assert candidate_markers(text) == [FIRST]


def test_a_dismissed_candidate_says_so_with_the_numbers_and_closes_as_completed(
    hub: GitHubStandIn,
) -> None:
    number = tracker(hub).record_candidate(ID, FIRST) or 0
    tracker(hub).dismiss_candidate(ID, STABLE)

    issue = hub.issues[number]
    assert (issue.state, issue.state_reason) == ("closed", "completed")
    [comment] = issue.comments
    assert comment.startswith("**Not reproduced on the default branch**")
    assert "the candidate from #12 is dismissed" in comment
    assert "| median | 0.91 |" in comment and "| commit | `def5678` |" in comment
    assert list(read_markers("dismissed", comment, ProbeNumbers)) == [STABLE]
    assert comment.rstrip().endswith("<!-- firewall:closed=dismissed -->")
    assert tracker(hub).candidates() == {} and tracker(hub).not_planned() == {}

    again = tracker(hub).record_candidate(ID, SECOND)
    assert again == number + 1, "a dismissal is no decision against the eval: a new issue"


def test_a_candidate_of_an_eval_whose_issue_was_closed_as_not_planned_opens_nothing(
    hub: GitHubStandIn,
) -> None:
    number = hub.add_issue("declined", marker(), ["flaky-eval"])
    hub.close_by_hand(number, "not_planned")

    assert tracker(hub).record_candidate(ID, FIRST) is None
    assert len(hub.issues) == 1 and hub.issues[number].comments == []


def test_a_proposal_is_said_once_and_the_issue_stays_open(hub: GitHubStandIn) -> None:
    number = tracker(hub).record_candidate(ID, FIRST) or 0
    for _ in range(2):  # two nights, one rolling pull request
        tracker(hub).note_proposal(ID, 7, "adoption")
    tracker(hub).note_proposal(ID, 9, "release")

    issue = hub.issues[number]
    assert issue.state == "open"
    assert [c.split("\n")[0] for c in issue.comments] == [
        "**Quarantine proposed** in #7: the nightly probe reproduced the instability of "
        "`triage-tone` on the default branch. Merging the pull request quarantines the eval; "
        "this issue then follows the quarantine.",
        "**Release proposed** in #9: the eval `triage-tone` was stable on enough nightly probes "
        "in a row. This issue stays open until the release reaches the default branch.",
    ]
    assert '<!-- firewall:proposed {"pr": 9, "change": "release"} -->' in issue.body
    assert 'firewall:proposed {"pr": 7' not in issue.body


def test_a_candidate_that_becomes_a_quarantine_keeps_its_issue(hub: GitHubStandIn) -> None:
    number = tracker(hub).record_candidate(ID, FIRST)

    assert tracker(hub).open_or_comment(ID, context()) == number
    issue = hub.issues[number or 0]
    assert issue.title == f"Flaky eval quarantined: {ID}" and len(hub.issues) == 1
    assert issue.comments[-1].startswith("Quarantined again at `0a1b2c3`")


def test_recording_issues_say_what_they_would_do_with_candidates() -> None:
    lines: list[str] = []
    recording = RecordingIssues(echo=lines.append)

    assert recording.record_candidate(ID, FIRST) is None
    recording.dismiss_candidate(ID, STABLE)
    recording.note_proposal(ID, 7, "release")

    assert lines == [
        "would record a candidate for triage-tone on pull request #12 (median 0.7, IQR 0.2, "
        "k 7) on its open issue, or open one",
        "would dismiss the candidate triage-tone (median 0.91, IQR 0.01, k 7 on the default "
        "branch at 2026-12-01T00:00:00Z) and close its issue (completed)",
        "would say on the issue for triage-tone that #7 proposes its release",
    ]
    assert recording.candidates() == {} and recording.not_planned() == {}


def test_after_candidates_records_each_and_a_locked_issue_costs_only_its_eval(
    hub: GitHubStandIn,
) -> None:
    locked = hub.add_issue("candidate", f"{marker('a-locked')}\n", ["flaky-eval"])
    hub.lock_issue(locked)

    result = sync.after_candidates(tracker(hub), {"a-locked": FIRST, "b-fresh": SECOND})

    [warning] = result.warnings
    assert warning.startswith(
        f"GitHub refused to record a candidate on issue #{locked} for a-locked"
    )
    assert result.numbers == {"a-locked": locked, "b-fresh": locked + 1}
    assert candidate_markers(hub.issues[locked + 1].body) == [SECOND]


def test_after_candidates_stops_at_a_failure_of_everything_with_one_warning(
    hub: GitHubStandIn,
) -> None:
    hub.fail("read-only", method="POST", path=r"/issues$")

    result = sync.after_candidates(tracker(hub), {"a": FIRST, "b": SECOND})

    [warning] = result.warnings
    assert "403 Resource not accessible by integration" in warning and result.numbers == {}
    assert len(hub.calls("POST", r"/issues$")) == 1


def test_after_reprobe_dismisses_and_notes_the_proposals(hub: GitHubStandIn) -> None:
    gone = tracker(hub).record_candidate("not-again", FIRST) or 0
    kept = tracker(hub).record_candidate("again", SECOND) or 0

    result = sync.after_reprobe(
        tracker(hub), dismissed={"not-again": STABLE}, proposed={"again": (7, "adoption")}
    )

    assert result.warnings == []
    assert hub.issues[gone].state == "closed" and hub.issues[kept].state == "open"
    assert hub.issues[kept].comments[-1].startswith("**Quarantine proposed** in #7")
