"""The rolling proposal: one branch, one commit on the default branch, updated only on change."""

from __future__ import annotations

import base64
import datetime as dt
import http.server
import json
import threading
from pathlib import Path

import pytest
from actions import checkout, tip
from click.testing import CliRunner
from github_standin import GitHubStandIn
from gitrepos import GIT_ENV, branch_files, fresh_clone, git, make_origin

from firewall.cli import main
from firewall.errors import ExitCode, ProposalRefused, PullRequestNotPermitted
from firewall.github.client import GitHubPullRequests, Transport
from firewall.github.proposals import Closed, Proposal, RecordingPullRequests
from firewall.lifecycle import Entry
from firewall.pipeline import context
from firewall.pipeline.propose import (
    PROPOSAL_BRANCH,
    ProposalResult,
    propose,
)
from firewall.store.git import Git, git_config, push_auth
from firewall.store.registry import Registry, render

FAST = Transport(timeout=2, retries=1, backoff=0.01, request_gap=0, write_gap=0)
AT = dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc)
CI = {"CI": "true"}


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)


def entry(reason: str, streak: int = 0) -> Entry:
    return Entry(since=AT, source="auto", reason=reason, stable_streak=streak, median=0.7, k=7)


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    registry = render({"held": entry("iqr 0.2 > 0.03")})
    return make_origin(tmp_path, {"firewall.toml": "", "quarantine.json": registry})


def nightly_job(origin: Path, where: Path, entries: dict[str, Entry]) -> Path:
    """A nightly's clone whose quarantine.json holds what the nightly decided."""
    clone = fresh_clone(origin, where)
    (clone / "quarantine.json").write_text(render(entries))
    return clone


def proposed_registry(origin: Path) -> dict[str, object]:
    text = git(origin, "show", f"{PROPOSAL_BRANCH}:quarantine.json")
    evals: dict[str, object] = json.loads(text)["evals"]
    return evals


def test_adoptions_and_releases_go_to_one_branch_on_top_of_main(
    origin: Path, tmp_path: Path
) -> None:
    clone = nightly_job(origin, tmp_path / "night-1", {"new": entry("confirmed on main")})
    pulls = RecordingPullRequests()
    result = propose(context.load(cwd=clone, env=CI), pulls=pulls)
    assert [(c.kind, c.eval_id) for c in result.changes] == [("release", "held"), ("adopt", "new")]
    assert result.pushed and set(proposed_registry(origin)) == {"new"}
    assert git(origin, "rev-parse", f"{PROPOSAL_BRANCH}^") == git(origin, "rev-parse", "main")
    assert branch_files(origin, PROPOSAL_BRANCH) == ["firewall.toml", "quarantine.json"]
    assert len(pulls.actions) == 1 and "into main" in pulls.actions[0]
    assert git(clone, "status", "--porcelain") == "M quarantine.json", "no commit in the work tree"


def test_the_same_proposal_the_next_night_pushes_nothing(origin: Path, tmp_path: Path) -> None:
    decided = {"new": entry("confirmed on main")}
    propose(context.load(cwd=nightly_job(origin, tmp_path / "n1", decided), env=CI), pulls=None)
    tip = git(origin, "rev-parse", PROPOSAL_BRANCH)
    pulls = RecordingPullRequests()
    again = propose(
        context.load(cwd=nightly_job(origin, tmp_path / "n2", decided), env=CI), pulls=pulls
    )
    assert again.changes and not again.pushed and pulls.actions == []
    assert git(origin, "rev-parse", PROPOSAL_BRANCH) == tip


def test_streaks_alone_are_nothing_to_propose(origin: Path, tmp_path: Path) -> None:
    clone = nightly_job(origin, tmp_path / "night", {"held": entry("iqr 0.2 > 0.03", streak=2)})
    result = propose(context.load(cwd=clone, env=CI), pulls=RecordingPullRequests())
    assert result.changes == [] and not result.pushed
    assert PROPOSAL_BRANCH not in git(origin, "branch", "--list")


def test_nothing_left_to_propose_deletes_the_branch(origin: Path, tmp_path: Path) -> None:
    propose(context.load(cwd=nightly_job(origin, tmp_path / "n1", {}), env=CI), pulls=None)
    assert PROPOSAL_BRANCH in git(origin, "branch", "--list")
    unchanged = nightly_job(origin, tmp_path / "n2", {"held": entry("iqr 0.2 > 0.03")})
    result = propose(context.load(cwd=unchanged, env=CI), pulls=None)
    assert result.deleted and PROPOSAL_BRANCH not in git(origin, "branch", "--list")


def test_a_moved_default_branch_gets_the_proposal_rebased(origin: Path, tmp_path: Path) -> None:
    decided = {"new": entry("confirmed on main")}
    propose(context.load(cwd=nightly_job(origin, tmp_path / "n1", decided), env=CI), pulls=None)
    dev = fresh_clone(origin, tmp_path / "dev")
    (dev / "README.md").write_text("more\n")
    git(dev, "add", "README.md")
    git(dev, "commit", "--quiet", "-m", "work goes on")
    git(dev, "push", "--quiet", "origin", "HEAD:main")
    result = propose(
        context.load(cwd=nightly_job(origin, tmp_path / "n2", decided), env=CI), pulls=None
    )
    assert result.pushed
    assert git(origin, "rev-parse", f"{PROPOSAL_BRANCH}^") == git(origin, "rev-parse", "main")


class Refusing:
    def last_closed(self, *, head: str, base: str) -> Closed | None:
        return None

    def propose(self, *, head: str, base: str, title: str, body: str) -> Proposal:
        raise PullRequestNotPermitted(
            "GitHub Actions may not open pull requests here: turn on Settings > Actions > "
            "General > Allow GitHub Actions to create and approve pull requests"
        )


def test_a_refused_pull_request_fails_and_leaves_no_orphan_branch(
    origin: Path, tmp_path: Path
) -> None:
    clone = nightly_job(origin, tmp_path / "night", {"new": entry("confirmed on main")})
    with pytest.raises(ProposalRefused) as refused:
        propose(context.load(cwd=clone, env=CI), pulls=Refusing())
    # A setting to change, not a failing eval: exit 2, never the 1 of a blocking failure.
    assert refused.value.exit_code == ExitCode.USAGE
    assert "Allow GitHub Actions" in str(refused.value)
    assert PROPOSAL_BRANCH not in git(origin, "branch", "--list")
    assert Registry(clone / "quarantine.json").read().keys() == {"new"}, "the decision stays"


# --- the push: with the token that opens the pull request, written nowhere

TOKEN = "ghp_proposal_secret_token_0123456789"


def test_an_https_remote_on_github_gets_the_token_as_checkout_sends_it(tmp_path: Path) -> None:
    repo = fresh_clone(make_origin(tmp_path, {"a": "1"}), tmp_path / "job")
    url = "https://github.com/acme/widgets"
    git(repo, "remote", "set-url", "origin", url)

    auth = push_auth(Git(repo), "origin", {"GITHUB_TOKEN": TOKEN})

    key = f"http.{url}.extraheader"
    assert auth == {
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": key,
        "GIT_CONFIG_VALUE_0": "",  # drops the header actions/checkout persisted
        "GIT_CONFIG_KEY_1": key,
        "GIT_CONFIG_VALUE_1": auth["GIT_CONFIG_VALUE_1"],
    }
    scheme, encoded = auth["GIT_CONFIG_VALUE_1"].split(": ", 1)[1].split(" ")
    assert scheme == "basic" and base64.b64decode(encoded).decode() == f"x-access-token:{TOKEN}"
    assert TOKEN not in git(repo, "config", "--list", "--show-origin")


@pytest.mark.parametrize(
    ("url", "env"),
    [
        ("git@github.com:acme/widgets.git", {}),  # ssh: its key, as git would
        ("http://github.com/acme/widgets", {}),  # never a token in clear
        ("https://gitlab.example.com/acme/widgets", {}),  # a mirror elsewhere never sees it
        ("https://github.com/acme/widgets", {"GITHUB_SERVER_URL": "https://ghe.example.com"}),
    ],
)
def test_other_remotes_push_as_git_would(tmp_path: Path, url: str, env: dict[str, str]) -> None:
    repo = fresh_clone(make_origin(tmp_path, {"a": "1"}), tmp_path / "job")
    git(repo, "remote", "set-url", "origin", url)

    assert push_auth(Git(repo), "origin", {"GITHUB_TOKEN": TOKEN, **env}) == {}
    assert push_auth(Git(repo), str(tmp_path / "origin.git"), {"GITHUB_TOKEN": TOKEN}) == {}


def test_the_configuration_goes_after_any_the_job_already_sets() -> None:
    config = git_config({"GIT_CONFIG_COUNT": "1"}, [("a.b", "c")])
    assert config == {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_1": "a.b", "GIT_CONFIG_VALUE_1": "c"}


def test_the_header_replaces_the_one_checkout_persisted(tmp_path: Path) -> None:
    """Git itself, against a loopback server that records what it is sent: the proposal's
    token goes, and the job's token persisted in .git/config does not go with it."""
    seen: list[list[str]] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get_all("Authorization") or [])
            self.send_response(403)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        repo = fresh_clone(make_origin(tmp_path, {"a": "1"}), tmp_path / "job")
        git(repo, "config", "--local", f"http.{base}/.extraheader", "AUTHORIZATION: basic JOB")
        git(repo, "remote", "set-url", "origin", "https://github.com/acme/widgets")
        auth = push_auth(Git(repo), "origin", {"GITHUB_TOKEN": TOKEN})
        # The same configuration for the loopback server, which speaks http.
        local = {k: v.replace("https://github.com", base) for k, v in auth.items()}
        Git(repo).run("ls-remote", f"{base}/acme/widgets", extra_env=local)
    finally:
        server.shutdown()
        server.server_close()
    assert seen and seen[0] == [auth["GIT_CONFIG_VALUE_1"].split(": ", 1)[1]]


def test_a_job_checked_out_without_persisted_credentials_pushes_and_keeps_no_token(
    origin: Path, tmp_path: Path
) -> None:
    """actions/checkout with `persist-credentials: false`: no credential in .git/config."""
    job = checkout(origin, tmp_path / "job", ref="refs/heads/main", sha=tip(origin, "main"))
    (job / "quarantine.json").write_text(render({"new": entry("confirmed on main")}))
    env = {**CI, "GITHUB_ACTIONS": "true", "GITHUB_TOKEN": TOKEN}

    result = propose(context.load(cwd=job, env=env), pulls=RecordingPullRequests())

    assert result.pushed and set(proposed_registry(origin)) == {"new"}
    for path in (job / ".git").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


# --- a proposal the maintainers closed without merging


def night(origin: Path, where: Path, hub: GitHubStandIn, decided: dict[str, Entry]) -> object:
    pulls = GitHubPullRequests(hub.repository, hub.token, base_url=hub.url, transport=FAST)
    return propose(context.load(cwd=nightly_job(origin, where, decided), env=CI), pulls=pulls)


def test_a_proposal_closed_unmerged_is_not_proposed_again_until_it_differs(
    origin: Path, tmp_path: Path
) -> None:
    decided = {"new": entry("confirmed on main")}
    with GitHubStandIn() as hub:
        first = night(origin, tmp_path / "n1", hub, decided)
        [pull] = hub.pulls()
        hub.close_pull(pull.number)  # the maintainer's answer
        tip = git(origin, "rev-parse", PROPOSAL_BRANCH)
        dev = fresh_clone(origin, tmp_path / "dev")  # main moves on: a rebase would push
        (dev / "README.md").write_text("more\n")
        git(dev, "add", "README.md")
        git(dev, "commit", "--quiet", "-m", "work goes on")
        git(dev, "push", "--quiet", "origin", "HEAD:main")

        again = night(origin, tmp_path / "n2", hub, {"new": entry("confirmed, other numbers")})

        assert isinstance(first, ProposalResult) and isinstance(again, ProposalResult)
        assert again.declined is not None and again.declined.number == pull.number
        assert not again.pushed and git(origin, "rev-parse", PROPOSAL_BRANCH) == tip
        assert len(hub.pulls()) == 1 and hub.calls("POST", r"/pulls$")[1:] == []

        other = night(origin, tmp_path / "n3", hub, {**decided, "held": entry("iqr 0.2 > 0.03")})

        assert isinstance(other, ProposalResult) and other.declined is None and other.pushed
        assert [(c.kind, c.eval_id) for c in other.changes] == [("adopt", "new")]
        assert other.number is not None and other.number != pull.number
        assert len(hub.pulls()) == 2 and hub.pulls()[-1].state == "open"


def test_a_merged_or_reopened_proposal_is_no_answer(origin: Path, tmp_path: Path) -> None:
    with GitHubStandIn() as hub:
        night(origin, tmp_path / "n1", hub, {"new": entry("confirmed on main")})
        [pull] = hub.pulls()
        pulls = GitHubPullRequests(hub.repository, hub.token, base_url=hub.url, transport=FAST)
        assert pulls.last_closed(head=PROPOSAL_BRANCH, base="main") is None  # open

        hub.close_pull(pull.number, merged=True)
        assert pulls.last_closed(head=PROPOSAL_BRANCH, base="main") is None

        hub.issues[pull.number].merged_at = None  # closed unmerged, then
        closed = pulls.last_closed(head=PROPOSAL_BRANCH, base="main")
        assert closed is not None and closed.number == pull.number and closed.closed_at
        assert pulls.last_closed(head=PROPOSAL_BRANCH, base="release") is None


def test_the_command_says_in_one_line_why_nothing_was_proposed(
    origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decided = {"new": entry("confirmed on main")}
    with GitHubStandIn() as hub:
        night(origin, tmp_path / "n1", hub, decided)
        [pull] = hub.pulls()
        hub.close_pull(pull.number)
        job = nightly_job(origin, tmp_path / "n2", decided)
        monkeypatch.chdir(job)
        for name, value in {
            **CI,
            "GITHUB_TOKEN": hub.token,
            "GITHUB_REPOSITORY": hub.repository,
            "GITHUB_API_URL": hub.url,
        }.items():
            monkeypatch.setenv(name, value)

        result = CliRunner().invoke(main, ["propose"], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    closed = hub.issues[pull.number].closed_at
    assert closed is not None
    assert (
        f"the proposal #{pull.number} was closed unmerged on {closed[:10]}; not proposed again "
        "until the registry change differs; reopen it to take it up again, or make the change "
        "you want in quarantine.json on main by hand: "
    ) in result.output
    assert len(hub.pulls()) == 1
