"""GitHub issues through the real PyGithub client, against a local stand-in of GitHub's API."""

from __future__ import annotations

import dataclasses
import re
import socket
from collections.abc import Iterator

import pytest
from builders import trials
from github_standin import GitHubStandIn
from issue_builders import AT, FAST, ID, SCORES
from issue_builders import probe as shared_probe

from firewall.artefact import EvalReport
from firewall.errors import IssueError
from firewall.github.client import GitHubIssues, Transport, from_environment
from firewall.github.issue_text import fenced, inline_code
from firewall.github.issues import IssueContext, RecordingIssues
from firewall.github.markers import marked_eval
from firewall.github.sync import Sync, catch_up
from firewall.lifecycle import Entry, Event, EventKind
from firewall.runner.trial import TrialRecord


def probe(
    eval_id: str = ID,
    scores: list[float] = SCORES,
    *,
    owner: str | None = "alice",
    records: list[TrialRecord] | None = None,
) -> EvalReport:
    """The shared probe, its trials run four at a time (the bodies quote concurrency)."""
    return shared_probe(eval_id, scores, owner=owner, records=records, in_flight=4)


def context(
    report: EvalReport | None = None, *, owner: str | None = "alice", streak: int = 0
) -> IssueContext:
    report = report or probe(owner=owner)
    entry = Entry(
        since=AT,
        source="auto",
        reason=report.reason,
        median=report.stats.median,
        iqr=report.stats.iqr,
        k=report.k,
        git_sha="0a1b2c3",
        owner=owner,
        stable_streak=streak,
        last_probe=AT,
    )
    return IssueContext(
        report=report,
        entry=entry,
        trend="▂▅▃▇",
        replay=f"firewall replay {report.id} --seed 4105",
        release_after=3,
    )


def night(kind: EventKind, streak: int, message: str = "") -> Event:
    return Event(ID, kind, message or f"{kind} {streak}/3", streak, 3)


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn(assignable={"alice"}) as standin:
        yield standin


def tracker(
    hub: GitHubStandIn, *, token: str | None = None, transport: Transport = FAST
) -> GitHubIssues:
    """A fresh client, as a new CI run would make: it knows nothing but what GitHub says."""
    return GitHubIssues(
        hub.repository,
        token or hub.token,
        labels=["flaky-eval", "ci"],
        base_url=hub.url,
        transport=transport,
    )


# --- opening, finding again


def test_a_new_quarantine_opens_one_labelled_assigned_issue(hub: GitHubStandIn) -> None:
    issues = tracker(hub)
    number = issues.open_or_comment(ID, context())

    [issue] = hub.issues.values()
    assert issue.number == number and issue.state == "open"
    assert issue.title == f"Flaky eval quarantined: {ID}"
    assert issue.labels == ["flaky-eval", "ci"] and issue.assignees == ["alice"]
    assert {call.body["name"] for call in hub.calls("POST", r"/labels$")} == {"flaky-eval", "ci"}
    assert all(call.body["color"] for call in hub.calls("POST", r"/labels$"))
    assert issues.notes == [] and issue.comments == []


def test_the_body_holds_the_numbers_the_trials_the_replay_and_the_marker(
    hub: GitHubStandIn,
) -> None:
    report = probe()
    tracker(hub).open_or_comment(ID, context(report))
    body = hub.issues[1].body

    assert body.startswith(f"<!-- firewall:eval={ID} -->\n")
    assert marked_eval(body) == ID
    assert "| median | 0.71 |" in body and "| threshold | 0.85 |" in body
    assert "| k | 7 |" in body and f"| IQR | {report.stats.iqr:.3f}".rstrip("0") in body
    assert "(allowed: 0.03)" in body
    for index, score in enumerate(SCORES):
        assert re.search(
            rf"^\| {index} \| {4100 + index} \| {score} \| (yes|no) \| 4 \|$", body, re.MULTILINE
        ), (index, score)
    assert "```sh\nfirewall replay triage-tone --seed 4105\n```" in body
    assert "▂▅▃▇" in body
    for advice in ("temperature 0", "Snapshot retrieval", "rate limits", "judge deterministic"):
        assert advice in body
    assert "<!-- firewall:status -->" in body and "<!-- /firewall:status -->" in body
    assert "0 of 3" in body


def test_a_second_quarantine_comments_on_the_open_issue_once_its_state_changed(
    hub: GitHubStandIn,
) -> None:
    first = tracker(hub).open_or_comment(ID, context())
    second = tracker(hub).open_or_comment(ID, context())
    assert second == first and len(hub.issues) == 1
    assert hub.issues[first].comments == [], "the issue says unstable already: no comment"

    tracker(hub).update_status(ID, first, context(), night("stable", 1))
    tracker(hub).open_or_comment(ID, context())

    assert len(hub.issues) == 1
    comment = hub.issues[first].comments[-1]
    assert comment.startswith("Quarantined again at `0a1b2c3`")
    assert "firewall replay triage-tone --seed 4105" in comment
    assert "<!-- firewall:state=unstable -->" in hub.issues[first].body


def test_an_issue_is_found_again_by_its_marker_while_open_labelled_or_not() -> None:
    with GitHubStandIn(triage=False) as hub:  # a token that GitHub drops the labels of
        found_again_labelled_or_not(hub)


def found_again_labelled_or_not(hub: GitHubStandIn) -> None:
    marker = f"<!-- firewall:eval={ID} -->\nold"
    hub.add_issue("closed", marker, ["flaky-eval"], state="closed")
    hub.add_issue("a pull request", marker, ["flaky-eval"], pull=True)
    hub.add_issue("another eval", "<!-- firewall:eval=other -->", ["flaky-eval"])
    unlabelled = hub.add_issue("its label dropped", marker, ["bug"])

    assert tracker(hub).open_issues() == {"other": 3}, "the cheap listing: labelled only"
    number = tracker(hub).open_or_comment(ID, context())
    assert number == unlabelled and len(hub.issues) == 4, "no new issue"
    assert [i.number for i in hub.issues.values() if i.comments] == [unlabelled]


def test_open_issues_reads_every_page_and_keeps_the_oldest_duplicate(hub: GitHubStandIn) -> None:
    hub.add_issue("oldest", f"<!-- firewall:eval={ID} -->", ["flaky-eval"])
    for n in range(150):
        hub.add_issue(f"filler {n}", f"<!-- firewall:eval=eval-{n} -->", ["flaky-eval"])
    hub.add_issue("duplicate", f"<!-- firewall:eval={ID} -->", ["flaky-eval"])

    found = tracker(hub).open_issues()
    assert len(found) == 151 and found[ID] == 1
    assert len(hub.calls("GET", r"/issues$")) == 2, "two pages of 100, one request each"


def test_an_owner_that_cannot_be_assigned_still_gets_the_issue_opened(hub: GitHubStandIn) -> None:
    issues = tracker(hub)
    number = issues.open_or_comment(ID, context(owner="ghost"))

    assert hub.issues[number].state == "open" and hub.issues[number].assignees == []
    assert len(issues.notes) == 1 and "could not assign owner ghost" in issues.notes[0]
    [comment] = hub.issues[number].comments
    assert "`ghost`" in comment and "not a team" in comment


def test_a_team_owner_is_not_sent_as_an_assignee(hub: GitHubStandIn) -> None:
    issues = tracker(hub)
    issues.open_or_comment(ID, context(owner="@acme/evals"))

    assert hub.calls("POST", r"/assignees$") == []
    assert "a team cannot be assigned" in issues.notes[0]


def test_a_refused_assignment_still_opens_the_issue(hub: GitHubStandIn) -> None:
    hub.fail("422", method="POST", path=r"/assignees$")
    issues = tracker(hub)
    number = issues.open_or_comment(ID, context())

    assert hub.issues[number].state == "open"
    assert "422 Validation Failed" in issues.notes[0]


# --- the nightly run


def test_the_status_block_is_replaced_in_place(hub: GitHubStandIn) -> None:
    number = tracker(hub).open_or_comment(ID, context())
    before = hub.issues[number].body
    nightly = tracker(hub)
    nightly.update_status(ID, number, context(streak=1), night("stable", 1))
    nightly.update_status(ID, number, context(streak=2), night("stable", 2))
    after = hub.issues[number].body

    assert after.count("<!-- firewall:status -->") == 1
    assert "Stable nightly probes toward release: 2 of 3" in after
    assert "Last event: `stable 2/3`" in after
    head = before.split("<!-- firewall:status -->")[0]
    assert after.startswith(head), "the body outside the block is left as it was"


def test_a_status_block_removed_by_hand_comes_back(hub: GitHubStandIn) -> None:
    number = hub.add_issue("by hand", f"<!-- firewall:eval={ID} -->\nnotes", ["flaky-eval"])
    tracker(hub).update_status(ID, number, context(streak=1), night("stable", 1))

    body = hub.issues[number].body
    assert body.startswith(f"<!-- firewall:eval={ID} -->\nnotes\n\n<!-- firewall:status -->")


def test_the_nightly_run_comments_only_when_the_state_changes(hub: GitHubStandIn) -> None:
    number = tracker(hub).open_or_comment(ID, context())
    nights = [
        night("stable", 1),
        night("stable", 2),
        night("unstable", 0),
        night("unstable", 0),
        night("errored", 0),
        night("errored", 0),
        night("stable", 1),
    ]
    for event in nights:
        tracker(hub).update_status(ID, number, context(streak=event.streak), event)

    comments = hub.issues[number].comments
    assert [c.split("\n")[0] for c in comments] == [
        "**Stable** on the nightly probe: 1 of 3 toward release.",
        "**Unstable again**: the stable streak is reset to 0 of 3.",
        "**The nightly probe errored**; the stable streak stays at 0 of 3.",
        "**Stable** on the nightly probe: 1 of 3 toward release.",
    ]
    assert len(hub.calls("PATCH")) == 5, "a night that repeats the last one edits nothing"


def test_release_comments_and_closes_as_completed(hub: GitHubStandIn) -> None:
    number = tracker(hub).open_or_comment(ID, context())
    released = night("released", 3, "released after 3 stable nightly probes; it passes the gate")
    tracker(hub).update_status(ID, number, context(streak=3), released)

    issue = hub.issues[number]
    assert issue.state == "closed" and issue.state_reason == "completed"
    assert issue.comments[-1].startswith("**Released** after 3 stable nightly probes")
    assert "<!-- firewall:state=released -->" in issue.body
    assert tracker(hub).open_issues() == {}


def test_close_by_hand_finds_the_open_issue_by_its_marker(hub: GitHubStandIn) -> None:
    number = tracker(hub).open_or_comment(ID, context())
    tracker(hub).close(ID, None, "released by hand with `firewall quarantine release`")

    issue = hub.issues[number]
    assert issue.state == "closed" and issue.state_reason == "completed"
    assert "released by hand" in issue.comments[-1]
    tracker(hub).close(ID, None, "again")  # nothing open: nothing to do
    assert len(issue.comments) == 1


def test_an_issue_without_the_eval_marker_is_left_alone(hub: GitHubStandIn) -> None:
    number = hub.add_issue("someone else's", "<!-- firewall:eval=other -->", ["flaky-eval"])
    with pytest.raises(IssueError, match=r"issue #1 is not the firewall's issue for triage-tone"):
        tracker(hub).close(ID, number, "released")
    with pytest.raises(IssueError, match="not the firewall's issue"):
        tracker(hub).update_status(ID, number, context(), night("stable", 1))
    assert hub.issues[number].state == "open" and hub.calls("PATCH") == []


# --- catching up with the registry


def test_catch_up_adopts_opens_and_closes_strays(hub: GitHubStandIn) -> None:
    adopted = hub.add_issue("existing", "<!-- firewall:eval=adopted -->", ["flaky-eval"])
    stray = hub.add_issue("stray", "<!-- firewall:eval=gone -->", ["flaky-eval"])
    entries = {name: context(probe(name)).entry for name in ("adopted", "fresh")}
    sync = Sync()

    catch_up(tracker(hub), entries, lambda name, _: context(probe(name)), sync, close_strays=True)
    recorded = sync.numbers

    assert recorded["adopted"] == adopted and hub.issues[adopted].comments == []
    assert hub.issues[recorded["fresh"]].title.endswith("fresh")
    assert hub.issues[stray].state == "closed"


def test_catch_up_leaves_strays_open_unless_asked(hub: GitHubStandIn) -> None:
    stray = hub.add_issue("stray", "<!-- firewall:eval=gone -->", ["flaky-eval"])
    catch_up(tracker(hub), {}, lambda name, _: context(), Sync(), close_strays=False)
    assert hub.issues[stray].state == "open"


# --- GitHub failing


ERRORS = {
    "500": r"GitHub refused to open an issue for triage-tone: 500 Server Error \(GitHub is having",
    "502": "GitHub refused to open an issue for triage-tone: 502 Bad Gateway",
    "503": "GitHub refused to open an issue for triage-tone: 503 Server Error",
    "rate-limit": r"403 API rate limit exceeded for installation ID 4242. \(it resets at "
    r"\d\d:\d\d UTC, in [23] h \d+ min; not waiting: the next run tries again\)",
    "secondary-rate-limit": r"403 You have exceeded a secondary rate limit.* \(GitHub asks to "
    r"wait 3600 s; not waiting",
}


@pytest.mark.parametrize("mode", sorted(ERRORS))
def test_a_failing_github_is_one_issue_error_line(hub: GitHubStandIn, mode: str) -> None:
    hub.fail(mode)
    with pytest.raises(IssueError, match=ERRORS[mode]) as raised:
        tracker(hub).open_or_comment(ID, context())
    assert "\n" not in str(raised.value) and hub.token not in str(raised.value)
    assert hub.issues == {}


def test_reads_are_retried_a_few_times_and_no_more(hub: GitHubStandIn) -> None:
    hub.fail("503", method="GET")
    with pytest.raises(IssueError, match="503"):
        tracker(hub, transport=dataclasses.replace(FAST, retries=2)).open_issues()
    assert len(hub.calls("GET")) == 3


def test_a_passing_5xx_on_a_read_is_retried_away(hub: GitHubStandIn) -> None:
    hub.fail("502", method="GET", times=1)
    assert tracker(hub).open_or_comment(ID, context()) == 1


def test_a_create_is_not_retried_so_it_cannot_duplicate(hub: GitHubStandIn) -> None:
    hub.fail("503", method="POST", path=r"/issues$")
    with pytest.raises(IssueError, match="503"):
        tracker(hub).open_or_comment(ID, context())
    assert len(hub.calls("POST", r"/issues$")) == 1


def test_a_bad_token_says_so_and_is_not_printed(hub: GitHubStandIn) -> None:
    wrong = "ghp_wrong_token_abcdef0123456789"
    with pytest.raises(IssueError, match=r"401 Bad credentials \(is GITHUB_TOKEN valid") as raised:
        tracker(hub, token=wrong).open_or_comment(ID, context())
    assert wrong not in str(raised.value) and hub.token not in str(raised.value)


def test_a_read_only_token_on_a_fork_says_what_to_do(hub: GitHubStandIn) -> None:
    hub.fail("read-only", method="POST")
    with pytest.raises(IssueError) as raised:
        tracker(hub).open_or_comment(ID, context())
    assert str(raised.value) == (
        "GitHub refused to open an issue for triage-tone: 403 Resource not accessible by "
        "integration (a read-only token on a fork PR? the workflow needs `permissions: issues: "
        "write`)"
    )


def test_a_slow_github_times_out_and_the_next_run_finds_what_it_did(hub: GitHubStandIn) -> None:
    hub.fail("slow", method="POST", path=r"/issues$", times=1, delay=3.0)
    with pytest.raises(
        IssueError,
        match=r"could not reach GitHub at http://127\.0\.0\.1:\d+/api"
        r"/v3 to open an issue for triage-tone: no answer "
        r"within 1 s",
    ) as raised:
        tracker(hub, transport=dataclasses.replace(FAST, timeout=1)).open_or_comment(ID, context())
    assert hub.token not in str(raised.value)

    assert tracker(hub).open_or_comment(ID, context()) == 1, "found by its marker, not duplicated"
    assert len(hub.issues) == 1 and hub.issues[1].comments == [], "its state has not changed"


def test_an_unreachable_github_is_an_issue_error() -> None:
    with socket.socket() as probe_socket:  # a port that was free a moment ago: nobody listens
        probe_socket.bind(("127.0.0.1", 0))
        port = probe_socket.getsockname()[1]
    issues = GitHubIssues(
        "acme/widgets",
        "secret",
        base_url=f"http://127.0.0.1:{port}/api/v3",
        transport=dataclasses.replace(FAST, retries=0),
    )
    with pytest.raises(IssueError, match=rf"could not reach GitHub at http://127\.0\.0\.1:{port}/"):
        issues.open_issues()


def test_a_wrong_repository_points_at_github_repository(hub: GitHubStandIn) -> None:
    issues = GitHubIssues("acme/nope", hub.token, base_url=hub.url, transport=FAST)
    with pytest.raises(IssueError, match=r"404 Not Found \(does GITHUB_REPOSITORY name"):
        issues.open_issues()


# --- eval text cannot ping, break the Markdown or forge a marker


def test_eval_output_cannot_ping_break_markdown_or_forge_markers(hub: GitHubStandIn) -> None:
    evil = (
        "@octocat see ```` and <!-- firewall:eval=other --> <!-- /firewall:status -->\n"
        "<!-- firewall:state=released -->\n```\n# @acme/everyone"
    )
    records = [t.model_copy(update={"seed": 4100 + t.index}) for t in trials(SCORES[:6])]
    records.append(TrialRecord(index=6, seed=4106, error=evil))
    report = probe(records=records).model_copy(update={"reason": evil.replace("\n", " ")})
    number = tracker(hub).open_or_comment(ID, context(report))
    tracker(hub).update_status(
        ID, number, context(report), night("unstable", 0, f"still unstable: {evil}")
    )
    body = hub.issues[number].body
    texts = [body, *hub.issues[number].comments]

    for text in texts:
        assert not re.search(r"@[A-Za-z0-9]", text), "no mention survives"
        ours = len(re.findall(r"^<!-- /?firewall:[a-z]+(=[a-z-]+)? -->$", text, re.MULTILINE))
        assert text.count("<!--") == ours, "eval text opens no HTML comment"
    assert re.findall(r"<!-- firewall:eval=([^ ]+) -->", body) == [ID]
    assert body.count("<!-- /firewall:status -->") == 1
    assert "<!-- firewall:state=unstable -->" in body
    assert "\n`````\n" in body, "the error is fenced with more backticks than it holds"
    assert tracker(hub).open_issues() == {ID: number}


def test_quoting_helpers_outrun_any_backtick_run() -> None:
    assert inline_code("plain") == "`plain`"
    assert inline_code("a `b` c") == "``a `b` c``"
    assert inline_code("`start") == "`` `start ``"
    assert inline_code("two\nlines") == "`two lines`"
    assert fenced("x ```` y") == "`````\nx ```` y\n`````"
    assert fenced("@dev") == "```\n@\u200ddev\n```"


# --- where requests go, what is printed


def test_the_enterprise_api_url_is_honoured() -> None:
    with GitHubStandIn(prefix="/ghe/api/v3", assignable={"alice"}) as hub:
        env = {
            "GITHUB_TOKEN": hub.token,
            "GITHUB_REPOSITORY": hub.repository,
            "GITHUB_API_URL": hub.url,
        }
        issues = from_environment(["flaky-eval"], env, transport=FAST)
        assert issues is not None
        issues.open_or_comment(ID, context())

        assert len(hub.requests) >= 5
        assert all(r.path.startswith("/ghe/api/v3/repos/acme/widgets") for r in hub.requests)
        assert all("Authorization" not in r.headers for r in hub.requests)


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"GITHUB_TOKEN": "t"},
        {"GITHUB_REPOSITORY": "acme/widgets"},
        {"GITHUB_TOKEN": "", "GITHUB_REPOSITORY": "acme/widgets"},
    ],
)
def test_from_environment_needs_a_token_and_a_repository(env: dict[str, str]) -> None:
    assert from_environment(["flaky-eval"], env) is None


def test_from_environment_defaults_to_github_com_and_checks_the_repository() -> None:
    issues = from_environment(["flaky-eval"], {"GITHUB_TOKEN": "t", "GITHUB_REPOSITORY": "a/b"})
    assert issues is not None and issues.base_url == "https://api.github.com"
    with pytest.raises(IssueError, match="GITHUB_REPOSITORY must be OWNER/NAME, got 'oops'"):
        from_environment([], {"GITHUB_TOKEN": "t", "GITHUB_REPOSITORY": "oops"})


def test_the_token_is_in_no_message_and_no_repr(hub: GitHubStandIn) -> None:
    issues = tracker(hub)
    assert hub.token not in repr(issues) and hub.token not in str(vars(issues).get("notes"))
    issues.open_or_comment(ID, context(owner="ghost"))
    assert all(hub.token not in note for note in issues.notes)
    assert all(hub.token not in comment for comment in hub.issues[1].comments)


def test_recording_issues_says_what_it_would_do_and_changes_nothing() -> None:
    lines: list[str] = []
    recording = RecordingIssues(["flaky-eval", "ci"], echo=lines.append)
    ctx = context()
    assert recording.open_or_comment(ID, ctx) is None
    known = dataclasses.replace(ctx, entry=ctx.entry.model_copy(update={"issue": 42}))
    assert recording.open_or_comment(ID, known) == 42
    recording.update_status(ID, 42, known, night("released", 3, "released\n::error::forged"))
    recording.close(ID, None, "released by hand")

    assert (
        recording.actions
        == lines
        == [
            "would open issue for triage-tone (labels flaky-eval, ci, assignee alice), or comment "
            "on its open one",
            "would comment on issue #42 for triage-tone (quarantined again)",
            "would update issue #42 for triage-tone and close it (completed): released "
            "::error::forged",
            "would close the open issue for triage-tone (completed): released by hand",
        ]
    )
    assert recording.open_issues() == {}
