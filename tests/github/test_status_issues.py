"""`firewall status` says when a person closed a quarantine's issue as not planned."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from github_standin import GitHubStandIn

from firewall.cli import main
from firewall.lifecycle import Entry
from firewall.store.registry import Registry


def test_status_names_the_issue_a_person_closed_as_not_planned(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "firewall.toml").write_text('[[evals]]\nid = "tone"\ncommand = "true"\n')
    with GitHubStandIn() as hub:
        number = hub.add_issue("Flaky eval: tone", "<!-- firewall:eval=tone -->\n", ["flaky-eval"])
        hub.close_by_hand(number, "not_planned")
        since = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
        with Registry(project / "quarantine.json").edit() as entries:
            entries["tone"] = Entry(since=since, source="auto", reason="iqr 0.2", issue=number)
        for name, value in {
            "GITHUB_TOKEN": hub.token,
            "GITHUB_REPOSITORY": hub.repository,
            "GITHUB_API_URL": hub.url,
        }.items():
            monkeypatch.setenv(name, value)
        text = CliRunner().invoke(main, ["status"], catch_exceptions=False).output
        data = json.loads(CliRunner().invoke(main, ["status", "--json"]).output)
    assert f"issue #{number} was closed as not planned: the quarantine stays" in text
    assert data["quarantined"][0]["not_planned"] == number


def test_status_without_a_token_asks_github_nothing(project: Path) -> None:
    (project / "firewall.toml").write_text('[[evals]]\nid = "tone"\ncommand = "true"\n')
    since = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    with Registry(project / "quarantine.json").edit() as entries:
        entries["tone"] = Entry(since=since, source="auto", reason="iqr 0.2", issue=3)
    data = json.loads(CliRunner().invoke(main, ["status", "--json"]).output)
    assert data["quarantined"][0]["not_planned"] is None
