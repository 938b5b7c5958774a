"""A failure that concerns one issue costs only that eval; any other ends the sync with one warning.

Real PyGithub against the stand-in, through the sync functions the pipeline calls.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator

import pytest
from github_standin import GitHubStandIn
from issue_builders import FAST, entry, marker, night, probe, tracker

from firewall.config import Settings
from firewall.github import sync
from firewall.github.client import GitHubIssues
from firewall.lifecycle import Entry

SETTINGS = Settings()


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn(assignable={"alice"}) as standin:
        standin.labels["flaky-eval"] = {"color": "d93f0b", "description": None}
        yield standin


def three_open(hub: GitHubStandIn) -> dict[str, Entry]:
    """Three quarantined evals, each with its open issue: a-first (#1), b-middle, c-last."""
    entries = {}
    for eval_id in ("a-first", "b-middle", "c-last"):
        number = hub.add_issue(
            f"Flaky eval quarantined: {eval_id}", marker(eval_id), ["flaky-eval"]
        )
        entries[eval_id] = entry(eval_id, issue=number)
    return entries


def nightly(issues: GitHubIssues, entries: dict[str, Entry]) -> sync.Sync:
    return sync.after_nightly(
        issues,
        reports=[probe(eval_id) for eval_id in entries],
        events=[night("stable", 1, eval_id) for eval_id in entries],
        before=entries,
        after=entries,
        settings=SETTINGS,
        trends={},
    )


def updated(hub: GitHubStandIn, number: int) -> bool:
    return "toward release: 1 of 3" in hub.issues[number].body


# --- one issue, one eval


def test_a_deleted_issue_costs_only_its_eval_and_is_opened_anew(hub: GitHubStandIn) -> None:
    entries = three_open(hub)
    hub.delete_issue(1)

    result = nightly(tracker(hub), entries)

    assert updated(hub, 2) and updated(hub, 3), "the evals after it were kept up to date"
    [warning] = result.warnings
    assert "update issue #1 for a-first: 410 This issue was deleted" in warning
    assert result.dropped == {"a-first": 1}
    [fresh] = [i for i in hub.open_issues() if i.number > 3]
    assert fresh.body.startswith(marker("a-first")) and result.numbers == {"a-first": fresh.number}


def test_a_transferred_issue_is_gone_from_this_repository(hub: GitHubStandIn) -> None:
    entries = three_open(hub)
    moved = hub.transfer_issue(1, to="acme/elsewhere")

    result = nightly(tracker(hub), entries)

    [warning] = result.warnings
    assert "issue #1 for a-first was transferred to acme/elsewhere" in warning
    assert result.dropped == {"a-first": 1} and result.numbers["a-first"] == 4
    assert hub.calls("GET", r"^/repositories/\d+/issues/9001$"), "PyGithub followed the 301"
    assert not hub.calls("POST", "^/repositories/") and not hub.calls("PATCH", "^/repositories/")
    assert moved.comments == [] and "firewall:status" not in moved.body, "nothing written there"
    assert updated(hub, 2) and updated(hub, 3)


def test_a_missing_issue_number_is_dropped_and_the_issue_opened_anew(hub: GitHubStandIn) -> None:
    entries = three_open(hub)
    entries["a-first"] = entry("a-first", issue=99)
    hub.issues[1].state = "closed"  # only #99 is known for it, and GitHub has no #99

    result = nightly(tracker(hub), entries)

    assert "update issue #99 for a-first: 404 Not Found" in result.warnings[0]
    assert result.dropped == {"a-first": 99} and result.numbers == {"a-first": 4}
    assert updated(hub, 2) and updated(hub, 3)


def test_an_issue_whose_marker_was_edited_away_is_left_alone(hub: GitHubStandIn) -> None:
    entries = three_open(hub)
    hub.issues[1].body = "someone rewrote this issue"

    result = nightly(tracker(hub), entries)

    [warning] = result.warnings
    assert warning.startswith("issue #1 is not the firewall's issue for a-first (no marker")
    assert hub.issues[1].body == "someone rewrote this issue" and not hub.calls("PATCH", "/1$")
    assert result.dropped == {"a-first": 1} and result.numbers == {"a-first": 4}
    assert updated(hub, 2) and updated(hub, 3)


def test_a_locked_issue_refuses_the_comment_and_the_others_go_on(hub: GitHubStandIn) -> None:
    entries = three_open(hub)
    hub.lock_issue(1)

    result = sync.after_gate(
        tracker(hub),
        reports=[probe(eval_id) for eval_id in entries],
        new=list(entries),
        entries=entries,
        settings=SETTINGS,
        trends={},
    )

    [warning] = result.warnings
    assert warning.startswith(
        "GitHub refused to comment on issue #1 for a-first: 403 Unable to create comment "
        "because issue is locked. (someone locked the issue"
    )
    assert hub.issues[1].comments == [] and len(hub.issues) == 3, "no twin for a locked issue"
    assert [len(hub.issues[n].comments) for n in (2, 3)] == [1, 1]
    assert result.numbers == {"a-first": 1, "b-middle": 2, "c-last": 3} and not result.dropped


def test_a_422_on_one_issue_costs_only_that_eval(hub: GitHubStandIn) -> None:
    entries = three_open(hub)
    hub.fail("422", method="PATCH", path=r"/issues/1$")

    result = nightly(tracker(hub), entries)

    [warning] = result.warnings
    assert warning.startswith(
        "GitHub refused to update issue #1 for a-first: 422 Validation Failed"
    )
    assert not updated(hub, 1) and updated(hub, 2) and updated(hub, 3)
    assert not result.dropped and len(hub.issues) == 3


# --- everything's failures: one warning, the sync ends


GLOBAL = {
    "401": "401 Bad credentials (is GITHUB_TOKEN valid",
    "read-only": "403 Resource not accessible by integration (a read-only token",
    "rate-limit": "403 API rate limit exceeded for installation ID 4242. (it resets at",
    "rate-limit-429": "429 API rate limit exceeded for installation ID 4242. (it resets at",
    "secondary-rate-limit": "403 You have exceeded a secondary rate limit. Please wait a few "
    "minutes before you try again. (GitHub asks to wait 3600 s; not waiting",
    "secondary-rate-limit-429": "429 You have exceeded a secondary rate limit. Please wait a "
    "few minutes before you try again. (GitHub asks to wait 3600 s",
    "secondary-rate-limit-no-retry-after": "403 You have exceeded a secondary rate limit. Please "
    "wait a few minutes before you try again. (a secondary rate limit: GitHub asks to wait at "
    "least a minute; not waiting",
    "503": "503 Server Error (GitHub is having trouble",
    "issues-disabled": "410 Issues are disabled for this repo (enable issues under Settings -> "
    "General -> Features, or turn the firewall's issues off with `[github] issues = false`)",
}


def three_new(issues: GitHubIssues) -> sync.Sync:
    entries = {eval_id: entry(eval_id) for eval_id in ("a-first", "b-middle", "c-last")}
    return sync.after_gate(
        issues,
        reports=[probe(eval_id) for eval_id in entries],
        new=list(entries),
        entries=entries,
        settings=SETTINGS,
        trends={},
    )


@pytest.mark.parametrize("mode", sorted(GLOBAL))
def test_a_failure_of_everything_ends_the_sync_with_one_warning(
    hub: GitHubStandIn, mode: str
) -> None:
    hub.fail(mode, method="POST", path=r"/issues$")

    result = three_new(tracker(hub))

    [warning] = result.warnings
    assert f"GitHub refused to open an issue for a-first: {GLOBAL[mode]}" in warning
    assert warning.endswith("the next run or nightly catches up on the issues")
    assert len(hub.calls("POST", r"/issues$")) == 1, "nothing was tried after it"
    assert result.numbers == {} and result.dropped == {} and hub.issues == {}


def test_a_repository_without_issues_says_how_to_turn_them_off() -> None:
    with GitHubStandIn(has_issues=False) as hub:
        result = three_new(tracker(hub))
        [warning] = result.warnings
        assert warning.startswith(
            "issues are disabled in acme/widgets: enable them (Settings -> General -> Features "
            "-> Issues) or turn the firewall's issues off with `[github] issues = false`"
        )
        assert hub.calls("GET", "/issues") == []


def test_an_unreachable_github_ends_the_sync_with_one_warning() -> None:
    with socket.socket() as taken:  # a port that was free a moment ago: nobody listens
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
    issues = GitHubIssues(
        "acme/widgets",
        "secret",
        base_url=f"http://127.0.0.1:{port}/api/v3",
        transport=dataclasses.replace(FAST, retries=0),
    )
    [warning] = three_new(issues).warnings
    assert warning.startswith(f"could not reach GitHub at http://127.0.0.1:{port}/api/v3 to ")


# --- labels GitHub dropped


def test_dropped_labels_warn_once_and_the_issues_are_found_again_by_marker() -> None:
    with GitHubStandIn(triage=False) as hub:
        first = three_new(tracker(hub, labels=("flaky-eval", "ci")))

        assert len(hub.issues) == 3 and all(issue.labels == [] for issue in hub.issues.values())
        [warning] = [w for w in first.warnings if "without the label" in w]
        assert warning.startswith(
            "GitHub opened issue #1 for a-first without the label flaky-eval, ci"
        )
        assert "`issues: write` may open issues" in warning and "triage (or push) access" in warning
        assert len(first.warnings) == 1, "once a run, not once an issue"

        again = three_new(tracker(hub, labels=("flaky-eval", "ci")))

        assert len(hub.issues) == 3, "no new issue on the next run"
        assert all(issue.comments == [] for issue in hub.issues.values()), "still unstable"
        assert again.numbers == {"a-first": 1, "b-middle": 2, "c-last": 3}
        assert len(hub.calls("GET", r"/issues$")) == 4, "each run: the labelled, then every open"
