"""One annotation budget per step: the evals' warnings and the firewall's own share it.

GitHub shows 10 annotations of each kind per step and drops the rest without
a word; the firewall's own warnings come first and are never cut, and the
notice of what was left out is never itself dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import make_artefact, make_report
from click.testing import CliRunner
from github_standin import GitHubStandIn

from firewall.artefact import EvalReport
from firewall.cli import main
from firewall.github.actions.annotations import annotations_for, problem_annotations
from firewall.policy import Status

UNSTABLE = (
    "import sys\ntrial = int(sys.argv[1])\nprint('{\"score\": %s}' % (0.1 if trial % 2 else 0.9))\n"
)


def kinds(lines: list[str]) -> list[str]:
    found = [re.match(r"^::(\w+)", line) for line in lines]
    assert all(found), lines
    return [match.group(1) for match in found if match is not None]


def quarantines(n: int) -> list[EvalReport]:
    return [make_report(f"q-{i:02}", Status.QUARANTINE) for i in range(n)]


def test_the_firewall_warnings_come_first_and_push_out_eval_warnings() -> None:
    lines = annotations_for(
        make_artefact(*quarantines(12)),
        problems=["GitHub refused to open an issue: 503", "could not write the step outputs"],
    )

    assert kinds(lines) == ["warning"] * 10 + ["notice"]
    assert "title=Flakiness Firewall::GitHub refused to open an issue: 503" in lines[0]
    assert "title=Flakiness Firewall::could not write the step outputs" in lines[1]
    assert all("title=QUARANTINE q-" in line for line in lines[2:10])
    assert "::4 more warnings not annotated (GitHub shows 10 of each kind per step)" in lines[10]


def test_more_firewall_warnings_than_the_budget_share_its_last_line() -> None:
    problems = [f"problem {i}" for i in range(12)]

    lines = problem_annotations(problems)

    assert len(lines) == 10 and all(
        line.startswith("::warning title=Flakiness Firewall::") for line in lines
    )
    assert lines[8].endswith("::problem 8")
    assert lines[9].endswith("::3 problems: problem 9 | problem 10 | problem 11")


def test_the_notice_points_to_the_report_when_there_is_no_summary() -> None:
    lines = annotations_for(
        make_artefact(*quarantines(11)),
        more_in="the JSON report",
    )
    assert lines[-1] == (
        "::notice title=More results::1 more warning not annotated (GitHub shows 10 of each "
        "kind per step); every eval is in the JSON report"
    )


@pytest.fixture
def ten_unstable(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubStandIn]:
    (project / "unstable.py").write_text(UNSTABLE)
    evals = "".join(
        f'[[evals]]\nid = "wobbly-{i:02}"\ncommand = "python3 unstable.py {{trial}}"\n'
        for i in range(10)
    )
    (project / "firewall.toml").write_text(f"k = 3\n{evals}")
    with GitHubStandIn() as hub:
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
        yield hub


def test_ten_new_quarantines_and_github_down_make_ten_warnings_and_a_notice(
    project: Path, ten_unstable: GitHubStandIn
) -> None:
    ten_unstable.fail("503")

    result = CliRunner().invoke(main, ["run"], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    commands = [line for line in result.output.splitlines() if line.startswith("::")]
    warnings = [line for line in commands if line.startswith("::warning")]
    assert len(warnings) == 10
    # The firewall's own: this project has no git remote to keep its candidates on (said as
    # it happened), and GitHub down; both in the step's one budget, neither cut.
    kept, github = [line for line in warnings if "title=Flakiness Firewall" in line]
    assert "cannot keep its candidates" in kept
    assert "503 Server Error" in github and ten_unstable.token not in result.output
    assert len([line for line in warnings if "title=QUARANTINE wobbly-" in line]) == 8
    [notice] = [line for line in commands if line.startswith("::notice")]
    assert notice == (
        "::notice title=More results in the job summary::2 more warnings not annotated (GitHub "
        "shows 10 of each kind per step); every eval is in the job summary and the JSON report"
    )
    assert all(f"wobbly-{i:02}" in (project / "summary.md").read_text() for i in range(10))
