"""No body over GitHub's 65,536 characters is ever sent: it is cut, and says so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from github import Auth, Github, GithubException
from github_standin import GitHubStandIn
from issue_builders import ID, marker, tracker

from firewall.github.markers import MAX_BODY, fit, recorded_state

STATUS = (
    "<!-- firewall:status -->\n### Status\n<!-- firewall:state=stable -->\n"
    "<!-- /firewall:status -->\n"
)


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn() as standin:
        yield standin


def huge_body() -> str:
    lines = "\n".join(f"| {i} | {'x' * 60} |" for i in range(2000))
    return f"{marker()}\nintro\n\n```\n{lines}\n```\n\n{STATUS}"


def test_a_long_body_is_cut_at_a_line_keeping_its_head_and_its_status_block() -> None:
    body = huge_body()
    assert len(body) > MAX_BODY

    cut = fit(body)

    assert len(cut) <= MAX_BODY
    assert cut.startswith(f"{marker()}\nintro\n") and cut.endswith(STATUS)
    assert recorded_state(cut) == "stable"
    head = cut.split("\n\n_… ")[0]
    assert head.endswith(" |\n```\n"), "the code fence the cut left open is closed"
    assert "characters cut here: GitHub keeps at most 65,536 in an issue or a comment" in cut


def test_the_cut_says_how_many_characters_were_left_out() -> None:
    body = "a\n" * 40_000  # 80,000 characters, no markers
    cut = fit(body)
    kept = cut.split("\n\n_… ")[0]
    assert len(cut) <= MAX_BODY and kept == "a\n" * (len(kept) // 2)
    assert f"\n\n_… {len(body) - len(kept)} characters cut here" in cut


def test_a_body_within_the_limit_is_left_as_it_is() -> None:
    body = "x" * MAX_BODY
    assert fit(body) is body


def test_the_standin_refuses_a_body_over_the_limit_as_github_does(hub: GitHubStandIn) -> None:
    repo = Github(auth=Auth.Token(hub.token), base_url=hub.url).get_repo(hub.repository)
    with pytest.raises(GithubException) as raised:
        repo.create_issue(title="t", body="x" * (MAX_BODY + 1))
    assert raised.value.status == 422
    assert raised.value.data["errors"][0]["message"] == (
        "body is too long (maximum is 65536 characters)"
    )


def test_the_tracker_opens_and_comments_with_bodies_cut_to_fit(hub: GitHubStandIn) -> None:
    rest = tracker(hub).rest
    created = rest.create_issue(f"Flaky eval quarantined: {ID}", huge_body(), ["flaky-eval"])
    rest.comment(created.number, "y" * 100_000)

    issue = hub.issues[created.number]
    assert len(issue.body) <= MAX_BODY and issue.body.endswith(STATUS)
    assert len(issue.comments[0]) <= MAX_BODY and "characters cut here" in issue.comments[0]
    assert tracker(hub).open_issues() == {ID: created.number}, "still found by its marker"
