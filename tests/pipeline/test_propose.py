"""The rolling proposal: one branch, one commit on the default branch, updated only on change."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from gitrepos import GIT_ENV, branch_files, fresh_clone, git, make_origin

from firewall.errors import PullRequestNotPermitted
from firewall.github.proposals import Proposal, RecordingPullRequests
from firewall.lifecycle import Entry
from firewall.pipeline import context
from firewall.pipeline.propose import PROPOSAL_BRANCH, ProposalRefused, propose
from firewall.store.registry import Registry, render

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
    return json.loads(text)["evals"]  # type: ignore[no-any-return]


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
    assert refused.value.exit_code == 1 and "Allow GitHub Actions" in str(refused.value)
    assert PROPOSAL_BRANCH not in git(origin, "branch", "--list")
    assert Registry(clone / "quarantine.json").read().keys() == {"new"}, "the decision stays"
