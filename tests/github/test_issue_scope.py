"""Two configurations in one repository keep their own issues, under one label (issue 21).

Each configuration's issues carry its scope in their marker
(``<!-- firewall:eval=ID config=SCOPE -->``); the repository root's carry none,
as every issue did before scopes, so a single configuration sees no change.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from github_standin import GitHubStandIn
from issue_builders import FAST, entry, marker

from firewall.config import Settings
from firewall.github import sync
from firewall.github.client import GitHubIssues
from firewall.github.markers import config_scope, eval_marker, marked_eval
from firewall.lifecycle import Entry

SETTINGS = Settings()
GPU = "evals/gpu/firewall.toml"


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn(assignable={"alice", "bob"}) as standin:
        yield standin


def tracker(hub: GitHubStandIn, scope: str | None) -> GitHubIssues:
    return GitHubIssues(hub.repository, hub.token, base_url=hub.url, transport=FAST, scope=scope)


def nightly(hub: GitHubStandIn, scope: str | None, registry: dict[str, Entry]) -> sync.Sync:
    """One configuration's nightly; its registry learns the numbers, as the pipeline's does."""
    result = sync.after_nightly(
        tracker(hub, scope),
        reports=[],
        events=[],
        before=registry,
        after=registry,
        settings=SETTINGS,
        trends={},
    )
    for eval_id, number in result.numbers.items():
        registry[eval_id] = registry[eval_id].model_copy(update={"issue": number})
    return result


def test_two_configurations_never_close_or_reassign_each_others_issues(
    hub: GitHubStandIn,
) -> None:
    legacy = hub.add_issue("Flaky eval: a-only", marker("a-only"), ["flaky-eval"])
    hub.issues[legacy].assignees = ["alice"]
    root = {
        "a-only": entry("a-only", owner="alice", issue=legacy),
        "shared": entry("shared", owner="alice"),
    }
    gpu = {"b-only": entry("b-only", owner="bob"), "shared": entry("shared", owner="bob")}

    for _ in range(4):
        assert nightly(hub, None, root).warnings == []
        assert nightly(hub, GPU, gpu).warnings == []

    assert all(issue.state == "open" for issue in hub.issues.values())
    owners = {
        (marked_eval(i.body), marked_eval(i.body, GPU)): i.assignees for i in hub.issues.values()
    }
    assert owners == {
        ("a-only", None): ["alice"],
        ("shared", None): ["alice"],
        (None, "b-only"): ["bob"],
        (None, "shared"): ["bob"],
    }
    assert root["a-only"].issue == legacy, "an issue of before scopes stays the root's"
    assert None is not root["shared"].issue != gpu["shared"].issue is not None
    assert len(hub.issues) == 4 and len(hub.calls("POST", r"/assignees$")) == 3


def test_a_scoped_configuration_leaves_a_stray_of_the_root_open(hub: GitHubStandIn) -> None:
    stray = hub.add_issue("Flaky eval: gone", marker("gone"), ["flaky-eval"])

    nightly(hub, GPU, {})
    assert hub.issues[stray].state == "open"
    nightly(hub, None, {})
    assert hub.issues[stray].state == "closed", "the root's own stray is still closed"


def test_the_marker_names_the_scope_and_the_root_keeps_the_old_one(tmp_path: Path) -> None:
    (tmp_path / "evals" / "gpu").mkdir(parents=True)
    assert config_scope(tmp_path / "pyproject.toml", tmp_path) is None
    assert config_scope(tmp_path / "firewall.toml", tmp_path) is None
    assert config_scope(tmp_path / "evals/gpu/firewall.toml", tmp_path) == GPU
    assert config_scope(tmp_path / "my evals.toml", tmp_path) == "my-evals.toml"
    assert config_scope(None, tmp_path) is None and config_scope(tmp_path / "x.toml", None) is None

    assert eval_marker("e") == "<!-- firewall:eval=e -->"
    scoped = eval_marker("e", GPU)
    assert scoped == f"<!-- firewall:eval=e config={GPU} -->"
    assert marked_eval(scoped, GPU) == "e" and marked_eval(scoped) is None
    assert marked_eval(eval_marker("e")) == "e" and marked_eval(eval_marker("e"), GPU) is None


def test_two_configurations_of_one_repository_keep_their_issues_through_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The root's configuration and `inspect/firewall.toml` beside it, as the README's two
    jobs: each `quarantine add` opens its own issue, and a nightly of one closes none of
    the other's."""
    from click.testing import CliRunner

    from firewall.cli import main

    (tmp_path / ".git").mkdir()  # the repository's root, for the scope
    (tmp_path / "inspect").mkdir()
    for where, eval_id in ((tmp_path, "triage"), (tmp_path / "inspect", "tasks")):
        (where / "firewall.toml").write_text(
            f'k = 3\n[[evals]]\nid = "{eval_id}"\ncommand = "echo 0.9"\n'
        )
    with GitHubStandIn() as standin:
        for name, value in {
            "GITHUB_TOKEN": standin.token,
            "GITHUB_REPOSITORY": standin.repository,
            "GITHUB_API_URL": standin.url,
        }.items():
            monkeypatch.setenv(name, value)
        for where, eval_id in ((tmp_path, "triage"), (tmp_path / "inspect", "tasks")):
            monkeypatch.chdir(where)
            added = CliRunner().invoke(main, ["quarantine", "add", eval_id, "--reason", "flaky"])
            assert added.exit_code == 0, added.output
        bodies = {issue.number: issue.body for issue in standin.open_issues()}
        assert len(bodies) == 2
        assert any("config=inspect/firewall.toml" in body for body in bodies.values())
        for where in (tmp_path, tmp_path / "inspect"):
            monkeypatch.chdir(where)
            night = CliRunner().invoke(main, ["nightly"])
            assert night.exit_code == 0, night.output
        assert {issue.number for issue in standin.open_issues()} == set(bodies)
