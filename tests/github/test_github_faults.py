"""GitHub on a bad day cannot hang a run or crash it: answers that are not GitHub's JSON,
a server that trickles, stalls or never answers.

Real PyGithub against the stand-in: through the sync functions the pipeline calls, then
through the command line, where the decision, the exit code, the table, the annotations,
the summary and the outputs must all come out as if GitHub had not been there.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from click.testing import CliRunner
from github_standin import GitHubStandIn
from issue_builders import FAST, entry, probe

from firewall.cli import main
from firewall.config import Settings
from firewall.github import sync
from firewall.github.budget import Budget
from firewall.github.client import GitHubIssues, Transport
from firewall.lifecycle import Entry
from firewall.store.registry import Registry

T = TypeVar("T")
EVALS = ("a-first", "b-middle", "c-last")
FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
UNSTABLE = "import sys\nprint(0.1 if int(sys.argv[1]) % 2 else 0.9)\n"


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn() as standin:
        standin.labels["flaky-eval"] = {"color": "d93f0b", "description": None}
        yield standin


def tracker(
    hub: GitHubStandIn, budget: Budget | None = None, transport: Transport = FAST
) -> GitHubIssues:
    return GitHubIssues(
        hub.repository, hub.token, base_url=hub.url, transport=transport, budget=budget
    )


def three_new(issues: GitHubIssues) -> sync.Sync:
    entries = {eval_id: entry(eval_id) for eval_id in EVALS}
    return sync.after_gate(
        issues,
        reports=[probe(eval_id) for eval_id in entries],
        new=list(entries),
        entries=entries,
        settings=Settings(),
        trends={},
    )


def returns(call: Callable[[], T], *, within: float = 60) -> T:
    """``call()``, which must return at all: a hang fails the test instead of stalling it."""
    result: list[T] = []
    worker = threading.Thread(target=lambda: result.append(call()), daemon=True)
    worker.start()
    worker.join(within)
    assert result, f"still running after {within} s"
    return result[0]


def abandoned_calls_finish() -> None:
    for thread in threading.enumerate():
        if thread.name == "firewall-github-call":
            thread.join(30)


# --- answers PyGithub cannot read


UNREADABLE = {
    "not-json": "(not JSON: Expecting property name enclosed in double quotes at character 1)",
    "html": "(not the JSON it expected: ",
    "wrong-shape": "(not the JSON it expected: ",
}
WHERE = {
    "the repository": ("GET", r"/widgets$"),
    "the listing": ("GET", r"/issues$"),
    "the labels": ("GET", r"/labels$"),
    "the new issue": ("POST", r"/issues$"),
}


@pytest.mark.parametrize("where", sorted(WHERE))
@pytest.mark.parametrize("mode", sorted(UNREADABLE))
def test_an_answer_that_is_not_githubs_json_ends_the_sync_with_one_warning(
    hub: GitHubStandIn, mode: str, where: str
) -> None:
    method, path = WHERE[where]
    hub.fail(mode, method=method, path=path)

    result = three_new(tracker(hub))

    [warning] = result.warnings
    assert warning.startswith("GitHub's answer to the request to open an issue for a-first was ")
    assert "not what its REST API sends " in warning
    assert UNREADABLE[mode] in warning or (
        where == "the repository" and "(no `has_issues` in the answer for acme/widgets)" in warning
    ), warning
    assert f"check that GITHUB_API_URL ({hub.url}) is the API" in warning
    assert warning.endswith("the next run or nightly catches up on the issues")
    assert "\n" not in warning and hub.token not in warning
    assert result.stopped and result.numbers == {} and hub.issues == {}
    assert not hub.calls("POST", r"/issues$")[1:], "nothing was tried after it"


def test_an_answer_cut_short_says_so(hub: GitHubStandIn) -> None:
    hub.fail("truncated", method="GET", path=r"/issues$")

    [warning] = three_new(tracker(hub)).warnings

    assert warning.startswith(
        f"could not reach GitHub at {hub.url} to open an issue for a-first: the answer was "
        "cut off before its end (the connection closed early); the decision and exit code stand"
    )


# --- a GitHub that takes its time


def test_a_trickling_github_is_cut_off_when_the_budget_runs_out(hub: GitHubStandIn) -> None:
    hub.fail("trickle", delay=1.0)  # the headers, then a byte a second: for ever, in effect
    budget = Budget(2)

    result = returns(lambda: three_new(tracker(hub, budget)))

    [warning] = result.warnings
    assert warning == (
        "GitHub had not finished when this run's 2 s for GitHub (`[github] budget`) ran out, "
        "while the firewall tried to open an issue for a-first; skipped the rest of this "
        "run's GitHub work (the issues of a-first, b-middle, c-last); the decision and exit "
        "code stand, and the next run catches up; if GitHub is only slow, raise "
        "`[github] budget`"
    )
    assert result.stopped and result.skipped == list(EVALS) and budget.spent
    assert len(hub.requests) == 1, "the one request under way when the time ran out"


def test_the_budget_spans_every_call_and_names_only_what_was_left(hub: GitHubStandIn) -> None:
    hub.fail("slow", delay=0.4)  # each answer comes, late
    budget = Budget(3)

    result = returns(lambda: three_new(tracker(hub, budget)))

    [warning] = [w for w in result.warnings if "skipped the rest" in w]
    assert warning.startswith("GitHub had not finished when this run's 3 s") or warning.startswith(
        "this run's 3 s for GitHub (`[github] budget`) had run out before"
    )
    assert result.skipped and result.skipped == [e for e in EVALS if e in result.skipped]
    assert set(result.skipped) | set(result.numbers) == set(EVALS), "each eval done or named"
    assert f"(the issues of {', '.join(result.skipped)})" in warning
    assert 2 <= len(hub.requests) <= 3 / 0.4 + 1, "as many as fit in the budget, no more"


def test_a_call_given_up_on_sends_nothing_more(hub: GitHubStandIn) -> None:
    hub.fail("slow", method="GET", path=r"/widgets$", times=1, delay=2.0)

    [warning] = returns(lambda: three_new(tracker(hub, Budget(0.5)))).warnings
    abandoned_calls_finish()  # the late answer came, and the abandoned call went on from it

    assert "this run's 0.5 s for GitHub (`[github] budget`) ran out" in warning
    assert [(r.method, r.path) for r in hub.requests] == [("GET", "/api/v3/repos/acme/widgets")]
    assert hub.issues == {}


def test_a_spent_budget_asks_github_nothing_more_this_run(hub: GitHubStandIn) -> None:
    budget = Budget(1)
    hub.fail("no-answer", times=1)
    returns(lambda: three_new(tracker(hub, budget)))
    hub.heal()
    asked = len(hub.requests)

    [warning] = three_new(tracker(hub, budget)).warnings  # another tracker, the same run

    assert warning.startswith(
        "this run's 1 s for GitHub (`[github] budget`) had run out before the firewall could "
        "open an issue for a-first; skipped the rest of this run's GitHub work (the issues of "
        "a-first, b-middle, c-last)"
    )
    assert len(hub.requests) == asked and hub.issues == {}


def test_a_server_that_never_answers_costs_one_timeout_and_says_which(
    hub: GitHubStandIn,
) -> None:
    hub.fail("no-answer")
    patient = dataclasses.replace(FAST, timeout=1, retries=2)

    [warning] = returns(lambda: three_new(tracker(hub, Budget(30), patient))).warnings

    assert warning.startswith(
        f"could not reach GitHub at {hub.url} to open an issue for a-first: no answer within 1 s;"
    )
    assert len(hub.requests) == 1, "a timeout is not tried again: it would cost as much again"


def test_a_5xx_is_still_tried_again(hub: GitHubStandIn) -> None:
    hub.fail("503", method="GET", path=r"/widgets$", times=1)

    result = three_new(tracker(hub))

    assert result.warnings == [] and len(hub.open_issues()) == 3
    assert len(hub.calls("GET", r"/widgets$")) == 2


# --- the command line: the run's own results come out whatever GitHub did


@pytest.fixture
def job(project: Path, hub: GitHubStandIn, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GitHub Actions job of a project with an unstable eval and a failing one."""
    (project / "unstable.py").write_text(UNSTABLE)
    (project / "firewall.toml").write_text(
        "k = 4\nadaptive = false\n"
        '[[evals]]\nid = "wobbly"\ncommand = "python3 unstable.py {trial}"\n'
        '[[evals]]\nid = "low"\ncommand = "echo 0.2"\n'
    )
    for name, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(project),
        "GITHUB_STEP_SUMMARY": str(project / "summary.md"),
        "GITHUB_OUTPUT": str(project / "output.txt"),
        "GITHUB_TOKEN": hub.token,
        "GITHUB_REPOSITORY": hub.repository,
        "GITHUB_API_URL": hub.url,
    }.items():
        monkeypatch.setenv(name, value)
    return project


def outputs(project: Path) -> dict[str, str]:
    found = re.findall(r"^([\w-]+)<<(\S+)\n(.*?)\n\2$", (project / "output.txt").read_text(), re.M)
    return {name: value for name, _delimiter, value in found}


def firewall_warnings(stdout: str) -> list[str]:
    """The firewall's own warnings about GitHub. The job has no git remote, so its
    candidate is kept nowhere, which is said too, as it happens; not GitHub's doing."""
    return [
        line
        for line in stdout.splitlines()
        if "::warning title=Flakiness Firewall::" in line and "cannot keep its" not in line
    ]


@pytest.mark.parametrize("mode", ["not-json", "html", "wrong-shape", "truncated"])
def test_run_keeps_its_decision_table_and_files_when_github_answers_garbage(
    job: Path, hub: GitHubStandIn, mode: str
) -> None:
    hub.fail(mode)

    result = CliRunner().invoke(main, ["run"], catch_exceptions=False)

    assert result.exit_code == 1, result.output  # `low` fails; the quarantine blocks nothing
    assert re.search(r"^QUARANTINE\s+wobbly", result.output, re.M)
    assert re.search(r"^FAIL\s+low", result.output, re.M)
    [warning] = firewall_warnings(result.output)
    assert "not what its REST API sends" in warning or "cut off before its end" in warning
    assert "::error title=FAIL low" in result.output
    assert "wobbly" in (job / "summary.md").read_text()
    assert outputs(job)["exit-code"] == "1" and outputs(job)["quarantine"] == "1"


def test_nightly_exits_zero_when_github_answers_garbage(job: Path, hub: GitHubStandIn) -> None:
    since = entry("wobbly").since
    with Registry(job / "quarantine.json").edit() as entries:
        entries["wobbly"] = Entry(since=since, source="auto", reason="iqr 0.8", issue=1)
    hub.fail("not-json")

    result = CliRunner().invoke(main, ["nightly"], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    assert firewall_warnings(result.output), "GitHub's failure is said"
    assert "wobbly" in (job / "summary.md").read_text() and outputs(job)["exit-code"] == "0"


@pytest.mark.e2e
def test_a_trickling_github_cannot_hold_the_installed_command_past_its_budget(
    job: Path, hub: GitHubStandIn
) -> None:
    with (job / "firewall.toml").open("a") as config:
        config.write("[github]\nbudget = 2\n")
    hub.fail("trickle", delay=2.0)

    proc = subprocess.run(
        [FIREWALL, "run"],
        cwd=job,
        env={k: v for k, v in os.environ.items() if k != "CI"},
        capture_output=True,
        text=True,
        timeout=60,  # the process ends though a call it gave up on still reads a socket
        check=False,
    )

    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"^QUARANTINE\s+wobbly", proc.stdout, re.M)
    [warning] = firewall_warnings(proc.stdout + proc.stderr)
    assert "this run's 2 s for GitHub (`[github] budget`) ran out" in warning
    assert "skipped the rest of this run's GitHub work (the issues of wobbly)" in warning
    assert outputs(job)["status"] == "fail" and (job / "summary.md").exists()
