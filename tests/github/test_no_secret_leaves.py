"""No secret leaves through what the firewall posts or writes (contract §7).

An eval that quotes its API key in its error, as an SDK's error does, runs in a real
Actions-like job against the GitHub stand-in (real PyGithub over loopback): the key is
in no request sent to GitHub (issues, comments, edits), nor in the job summary, the
step outputs or the annotations, and `***` stands where it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import make_artefact, make_report
from click.testing import CliRunner, Result
from github_standin import GitHubStandIn
from issue_builders import FAST

from firewall.cli import main
from firewall.github.client import from_environment, pull_requests_from_environment
from firewall.github.comment import publish_comment
from firewall.github.issues import RecordingIssues, ScrubbedIssues
from firewall.policy import Status
from firewall.secrets import Secrets
from firewall.store.reports import load_report, write_report

KEY = "sk-proj-Leaked0123456789abcdef"
# Unstable (0.1 and 0.9 by trial), and its first trial errors quoting the key, as an SDK's
# error does; a second eval errors on every trial, its reason the key.
WOBBLY = """
import json, os, sys
trial = int(sys.argv[1])
if trial == 0:
    key = os.environ["OPENAI_API_KEY"]
    print(json.dumps({"error": "401 Unauthorized: invalid api_key " + key}))
else:
    print(json.dumps({"score": 0.1 if trial % 2 else 0.9}))
"""
CONFIG = (
    "k = 6\nadaptive = false\n"
    '[[evals]]\nid = "wobbly"\ncommand = "python3 wobbly.py {trial}"\nmax_errors = 1\n'
    '[[evals]]\nid = "leaky"\ncommand = "echo \\"{\\\\\\"error\\\\\\": '
    '\\\\\\"bad key $OPENAI_API_KEY\\\\\\"}\\""\n'
)


@pytest.fixture
def hub(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubStandIn]:
    (project / "wobbly.py").write_text(WOBBLY)
    (project / "firewall.toml").write_text(CONFIG)
    with GitHubStandIn() as standin:
        for name, value in {
            "OPENAI_API_KEY": KEY,
            "GITHUB_TOKEN": standin.token,
            "GITHUB_REPOSITORY": standin.repository,
            "GITHUB_API_URL": standin.url,
        }.items():
            monkeypatch.setenv(name, value)
        yield standin


def pull_request_job(project: Path, hub: GitHubStandIn, monkeypatch: pytest.MonkeyPatch) -> int:
    """A pull-request job on Actions: its summary and outputs files; the pull request."""
    number = hub.add_issue("Add the refund flow", "", pull=True)
    event = project / "event.json"
    event.write_text(
        json.dumps({"pull_request": {"number": number}, "repository": {"default_branch": "main"}})
    )
    for name, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(project),
        "GITHUB_STEP_SUMMARY": str(project / "summary.md"),
        "GITHUB_OUTPUT": str(project / "output.txt"),
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REF": f"refs/pull/{number}/merge",
    }.items():
        monkeypatch.setenv(name, value)
    return number


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["run", *args], catch_exceptions=False)


def sent(hub: GitHubStandIn) -> str:
    """Every request body the firewall sent GitHub, as JSON."""
    return "\n".join(json.dumps(call.body) for call in hub.requests if call.body is not None)


def test_a_quarantine_issue_carries_no_key(project: Path, hub: GitHubStandIn) -> None:
    run()

    [issue] = hub.open_issues()
    assert "invalid api_key ***" in issue.body, issue.body
    assert KEY not in sent(hub) and KEY not in issue.body


def test_the_pull_request_comment_candidate_issue_summary_and_outputs_carry_no_key(
    project: Path, hub: GitHubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    number = pull_request_job(project, hub, monkeypatch)

    first = run()
    run()  # the second run edits the comment and comments on the issue

    [comment] = hub.comments_on(number)
    assert "bad key ***" in comment
    posted = [issue.body for issue in hub.issues.values()] + [
        body for issue in hub.issues.values() for body in issue.comments
    ]
    assert len(posted) > 2, "the candidate's issue, its comment and the pull request's"
    summary = (project / "summary.md").read_text()
    assert "bad key \\*\\*\\*" in summary, "scrubbed before the cell escaped it"
    for text in (sent(hub), *posted, summary, (project / "output.txt").read_text()):
        assert KEY not in text
    annotations = [line for line in first.output.splitlines() if line.startswith("::")]
    assert annotations and not any(KEY in line for line in annotations)


def test_the_artefact_carries_no_key(project: Path, hub: GitHubStandIn) -> None:
    run()

    assert KEY not in (project / "firewall-report.json").read_text()


def test_write_report_scrubs_the_artefact_it_writes(tmp_path: Path) -> None:
    run_ = make_artefact(make_report("leaky", Status.ERROR, reason=f"bad key {KEY}"))
    path = tmp_path / "firewall-report.json"

    write_report(path, run_, secrets=Secrets.from_env({"OPENAI_API_KEY": KEY}))

    assert KEY not in path.read_text()
    assert load_report(path).evals[0].reason == "bad key ***"
    write_report(path, run_)  # without secrets: as it is
    assert load_report(path) == run_


def test_every_text_a_session_sends_is_scrubbed(hub: GitHubStandIn) -> None:
    env = {
        "GITHUB_TOKEN": hub.token,
        "GITHUB_REPOSITORY": hub.repository,
        "GITHUB_API_URL": hub.url,
        "OPENAI_API_KEY": KEY,
    }
    issues = from_environment(["flaky-eval"], env, transport=FAST)
    assert issues is not None
    view = issues.rest.create_issue(f"title {KEY}", f"body {KEY}", ["flaky-eval"])
    issues.rest.edit_issue(view.number, title=f"new {KEY}", body=f"edited {KEY}")
    issues.rest.comment(view.number, f"comment {KEY}")
    hub.add_issue("Refunds", "", pull=True)
    assert not publish_comment(
        make_artefact(make_report("leaky", Status.ERROR, reason=f"bad key {KEY}")),
        pull=2,
        before={},
        default_branch="main",
        env=env,
        dry_run=False,
        echo=print,
        transport=FAST,
    )

    pulls = pull_requests_from_environment(env, transport=FAST)
    assert pulls is not None
    pulls.propose(head="firewall/nightly", base="main", title=f"t {KEY}", body=f"b {KEY}")
    pulls.propose(head="firewall/nightly", base="main", title=f"u {KEY}", body=f"c {KEY}")

    assert KEY not in sent(hub)
    assert hub.issues[view.number].title == "new ***"
    assert hub.comments_on(view.number) == ["comment ***"]
    [pull] = [p for p in hub.pulls() if p.head == "firewall/nightly"]
    assert (pull.title, pull.body) == ("u ***", "c ***")


def test_the_recording_tracker_echoes_no_key() -> None:
    lines: list[str] = []
    tracker = ScrubbedIssues(
        RecordingIssues(echo=lines.append), Secrets.from_env({"OPENAI_API_KEY": KEY})
    )

    tracker.close("leaky", 3, f"bad key {KEY}")

    assert lines == ["would close issue #3 for leaky (completed): bad key ***"]
