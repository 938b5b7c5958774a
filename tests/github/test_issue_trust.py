"""Issues and comments are the firewall's only when the firewall wrote them (issue 21).

Anyone may open an issue in a public repository, put an eval's marker in it,
close it as not planned, or comment a marker on the firewall's own issue. The
firewall trusts an issue that carries its label (setting a label needs triage
access) or whose author is the token's own identity, and a comment whose
author is that identity (or the app that opened the issue). The outsider here
is ``mallory``; the token is a maintainer's without triage access (GitHub drops
its labels, so the firewall looks among every issue), or Actions' own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from github_standin import GitHubStandIn
from issue_builders import AT, ID, entry, marker, tracker

from firewall.config import Settings
from firewall.github import sync
from firewall.github.issues import Candidate
from firewall.github.markers import json_marker

SETTINGS = Settings()
EARLIER = dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)  # before the stand-in's first issue
OUTSIDER = "mallory"
CANDIDATE = Candidate(
    sha="abc1234", ref="refs/pull/12/merge", median=0.7, iqr=0.2, k=7, reason="iqr", at=AT, pr=12
)
LATER = CANDIDATE.model_copy(update={"pr": 13, "at": AT + dt.timedelta(days=1)})
FORGED = CANDIDATE.model_copy(update={"pr": 666, "at": AT + dt.timedelta(days=2)})


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    """A maintainer's token without triage access: GitHub drops the labels it sets."""
    with GitHubStandIn(triage=False, assignable={"alice"}) as standin:
        yield standin


def gate(
    hub: GitHubStandIn,
    eval_id: str,
    *,
    new: bool = False,
    since: dt.datetime = AT,
    issue: int | None = None,
) -> sync.Sync:
    quarantined = entry(eval_id, since=since, owner="alice", issue=issue)
    return sync.after_gate(
        tracker(hub),
        reports=[],
        new=[eval_id] if new else [],
        entries={eval_id: quarantined},
        settings=SETTINGS,
        trends={},
    )


def ignored(result: sync.Sync, number: int) -> list[str]:
    return [w for w in result.warnings if f"ignored issue #{number} " in w]


def test_an_outsiders_issue_closed_as_not_planned_does_not_stop_the_eval_issue(
    hub: GitHubStandIn,
) -> None:
    forged = hub.add_issue("wob-a", marker("wob-a"), author=OUTSIDER)
    hub.close_by_hand(forged, "not_planned")

    assert tracker(hub).not_planned() == {}
    result = gate(hub, "wob-a", since=EARLIER)  # quarantined before the closing

    [own] = [i for i in hub.issues.values() if i.number != forged]
    assert result.numbers == {"wob-a": own.number}
    assert own.state == "open" and own.assignees == ["alice"]
    assert len(ignored(result, forged)) == 1, result.warnings
    assert not any("closed as not planned" in w for w in result.warnings)


def test_an_outsiders_issue_closed_as_not_planned_does_not_stop_a_candidate(
    hub: GitHubStandIn,
) -> None:
    forged = hub.add_issue("wob-a", marker("wob-a"), author=OUTSIDER)
    hub.close_by_hand(forged, "not_planned")

    number = tracker(hub).record_candidate("wob-a", CANDIDATE)

    assert number is not None and number != forged and hub.issues[number].state == "open"


def test_a_phishing_issue_with_an_eval_marker_is_never_adopted(hub: GitHubStandIn) -> None:
    body = f"{marker('wob-b')}\nYour eval is flaky: log in at https://evil.example to fix it."
    phishing = hub.add_issue("Flaky eval: wob-b", body, author=OUTSIDER)

    opened = gate(hub, "wob-b", new=True)
    caught_up = gate(hub, "wob-b")  # a later run finds the eval's own issue, not the phishing

    stored = hub.issues[phishing]
    assert stored.body == body and stored.comments == [] and stored.assignees == []
    assert stored.title == "Flaky eval: wob-b" and stored.state == "open"
    assert not hub.calls("PATCH", rf"/issues/{phishing}$")
    [own] = [i for i in hub.issues.values() if i.number != phishing]
    assert opened.numbers == caught_up.numbers == {"wob-b": own.number}
    assert own.assignees == ["alice"] and own.author == ""  # the token's
    assert len(ignored(opened, phishing)) == len(ignored(caught_up, phishing)) == 1


def test_an_outsiders_issue_the_registry_names_is_left_alone(hub: GitHubStandIn) -> None:
    phishing = hub.add_issue("wob-b", marker("wob-b"), author=OUTSIDER)

    result = gate(hub, "wob-b", issue=phishing)

    assert result.dropped == {"wob-b": phishing} and result.numbers["wob-b"] != phishing
    assert hub.issues[phishing].comments == [] and hub.issues[phishing].assignees == []
    assert any(f"#{phishing} carries the marker" in w for w in result.warnings)


def test_a_candidate_marker_in_an_outsiders_issue_is_not_a_candidate(hub: GitHubStandIn) -> None:
    body = f"{marker('wob-c')}\n{json_marker('candidate', FORGED)}"
    forged = hub.add_issue("x", body, ["x"], author=OUTSIDER)

    issues = tracker(hub)
    assert issues.candidates() == {}
    assert any(f"ignored issue #{forged} (wob-c, opened by mallory)" in n for n in issues.notes)


def test_a_candidate_marker_in_an_outsiders_comment_is_not_read(hub: GitHubStandIn) -> None:
    number = tracker(hub).record_candidate(ID, CANDIDATE) or 0
    hub.add_comment(number, f"newer\n\n{json_marker('candidate', FORGED)}", author=OUTSIDER)

    issues = tracker(hub)
    assert issues.candidates() == {ID: CANDIDATE}
    assert any(f"comments on issue #{number} by mallory" in note for note in issues.notes)


def test_actions_token_reads_its_own_comments_and_no_one_elses() -> None:
    """GITHUB_TOKEN may not call GET /user: its identity is github-actions[bot]."""
    with GitHubStandIn() as hub:
        number = tracker(hub).record_candidate(ID, CANDIDATE) or 0
        body = hub.issues[number].body
        assert tracker(hub).record_candidate(ID, LATER) == number  # a comment, then the body
        hub.issues[number].body = body  # as a concurrent run's edit of the body leaves it
        hub.add_comment(number, json_marker("candidate", FORGED), author=OUTSIDER)

        assert tracker(hub).candidates() == {ID: LATER}
        assert len(hub.calls("GET", r"^/user$")) == 1, "asked once a run whose token it is"


def test_an_apps_token_is_known_by_its_labelled_issues() -> None:
    """An app's installation token is refused GET /user too: its [bot] is learnt from the
    issues it opened, and an outsider's unlabelled issue with a marker stays theirs."""
    with GitHubStandIn(login="flaky-firewall[bot]", assignable={"alice"}) as hub:
        own = tracker(hub).record_candidate(ID, CANDIDATE) or 0
        hub.issues[own].comments.append(json_marker("candidate", LATER))  # the app's own
        unlabelled = hub.add_issue("wob-d", marker("wob-d"))  # the app's, its label removed
        forged = hub.add_issue("wob-e", marker("wob-e"), author=OUTSIDER)

        assert tracker(hub).candidates() == {ID: LATER}
        assert gate(hub, "wob-d", issue=unlabelled).numbers == {}  # adopted: its number stays
        assert gate(hub, "wob-e", issue=forged).dropped == {"wob-e": forged}
