"""The rolling proposal: one pull request from one branch, opened once and updated in place."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from github import Auth, Github
from github_standin import GitHubStandIn
from issue_builders import FAST

from firewall.errors import IssueError, PullRequestNotPermitted
from firewall.github.client import GitHubPullRequests, pull_requests_from_environment
from firewall.github.proposals import Proposal, RecordingPullRequests

HEAD, BASE = "firewall/proposal", "main"


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn() as standin:
        yield standin


def pulls(hub: GitHubStandIn) -> GitHubPullRequests:
    return GitHubPullRequests(hub.repository, hub.token, base_url=hub.url, transport=FAST)


def propose(hub: GitHubStandIn, title: str = "Firewall: release 1", body: str = "b1") -> Proposal:
    return pulls(hub).propose(head=HEAD, base=BASE, title=title, body=body)


def test_the_first_proposal_opens_the_pull_request(hub: GitHubStandIn) -> None:
    proposal = propose(hub)

    [pull] = hub.pulls()
    assert proposal == Proposal(
        number=pull.number,
        url=f"http://127.0.0.1:{hub.port}/acme/widgets/pull/{pull.number}",
        created=True,
    )
    assert (pull.head, pull.base, pull.title, pull.body) == (
        HEAD,
        BASE,
        "Firewall: release 1",
        "b1",
    )
    [lookup] = hub.calls("GET", r"/pulls$")
    assert lookup.query["head"] == ["acme:firewall/proposal"] and lookup.query["state"] == ["open"]


def test_a_later_proposal_updates_the_open_one_in_place(hub: GitHubStandIn) -> None:
    first = propose(hub)
    second = propose(hub, title="Firewall: release 2", body="b2")

    assert second == first.model_copy(update={"created": False})
    [pull] = hub.pulls()
    assert (pull.title, pull.body) == ("Firewall: release 2", "b2")
    assert len(hub.calls("POST", r"/pulls$")) == 1 and len(hub.calls("PATCH", r"/pulls/\d+$")) == 1


def test_only_the_open_pull_request_of_that_branch_and_base_is_updated(hub: GitHubStandIn) -> None:
    other = pulls(hub).propose(head="someone/else", base=BASE, title="theirs", body="x")
    closed = propose(hub)
    hub.issues[closed.number].state = "closed"
    elsewhere = pulls(hub).propose(head=HEAD, base="release", title="into release", body="y")

    fresh = propose(hub, title="Firewall: release 3")

    assert fresh.created and fresh.number not in (other.number, closed.number, elsewhere.number)
    assert hub.issues[other.number].title == "theirs"
    assert hub.issues[elsewhere.number].title == "into release"


def test_a_pull_request_another_run_just_opened_is_updated_not_duplicated(
    hub: GitHubStandIn,
) -> None:
    first = propose(hub)
    hub.fail("stale", method="GET", path=r"/pulls$", times=1)  # the lookup misses it

    second = propose(hub, title="Firewall: release 2")

    assert second.number == first.number and not second.created
    assert len(hub.pulls()) == 1 and hub.pulls()[0].title == "Firewall: release 2"
    refused = [c for c in hub.calls("POST", r"/pulls$")][1:]
    assert len(refused) == 1, "GitHub said 422 already exists, and the open one was found"


def test_actions_not_permitted_to_open_pull_requests_names_the_setting_and_the_token(
    hub: GitHubStandIn,
) -> None:
    hub.fail("actions-may-not-create-pulls", method="POST", path=r"/pulls$")

    with pytest.raises(PullRequestNotPermitted) as raised:
        propose(hub)

    line = str(raised.value)
    assert "\n" not in line and hub.token not in line
    assert line.startswith("GitHub Actions may not open pull requests in acme/widgets: allow it")
    assert (
        'Settings -> Actions -> General -> Workflow permissions -> "Allow GitHub Actions to '
        'create and approve pull requests"' in line
    )
    assert "a GitHub App token or a fine-grained personal access token" in line
    assert "`github-token` input" in line and "starts no workflow runs" in line
    assert isinstance(raised.value, IssueError) and hub.pulls() == []


def test_any_other_refusal_is_an_issue_error_and_the_create_is_not_retried(
    hub: GitHubStandIn,
) -> None:
    hub.fail("503", method="POST", path=r"/pulls$")

    with pytest.raises(
        IssueError, match="open a pull request from firewall/proposal into main: 503"
    ) as raised:
        propose(hub)

    assert not isinstance(raised.value, PullRequestNotPermitted)
    assert len(hub.calls("POST", r"/pulls$")) == 1


def test_a_pull_request_takes_issue_comments_on_its_number(hub: GitHubStandIn) -> None:
    number = propose(hub).number
    client = Github(auth=Auth.Token(hub.token), base_url=hub.url)

    client.get_repo(hub.repository).get_issue(number).create_comment("proposal updated")

    assert hub.issues[number].comments == ["proposal updated"]


def test_pull_requests_come_from_the_environment_or_not_at_all(hub: GitHubStandIn) -> None:
    env = {
        "GITHUB_TOKEN": hub.token,
        "GITHUB_REPOSITORY": hub.repository,
        "GITHUB_API_URL": hub.url,
    }
    found = pull_requests_from_environment(env, transport=FAST)
    assert found is not None and found.propose(head=HEAD, base=BASE, title="t", body="b").created
    assert pull_requests_from_environment({"GITHUB_REPOSITORY": hub.repository}) is None


def test_recording_pull_requests_say_what_they_would_do() -> None:
    lines: list[str] = []
    recording = RecordingPullRequests(echo=lines.append)

    recording.propose(head=HEAD, base=BASE, title="Firewall:\nrelease 1", body="b")

    assert lines == [
        "would open a pull request from firewall/proposal into main (Firewall: release 1), or "
        "update the open one"
    ]
