"""`firewall gate` decides as `run` would: on the configuration, not on what a part says.

Each test probes a real project, tampers with the part as a job (or a person) that
wrote it could, and gates it through the command line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import invoke_split, seeded, trials
from gitrepos import git

from firewall.config import Settings
from firewall.runner.seeds import trial_seed
from firewall.spec import Source
from firewall.store.parts import Probed, plugin_spec
from firewall.timeutil import now

HALF = "echo '{\"score\": 0.5}'"  # stable, and below the default threshold of 0.8
GOOD = "echo '{\"score\": 0.9}'"


def write_config(root: Path, evals: dict[str, str]) -> None:
    body = "".join(
        f"[[evals]]\nid = {json.dumps(eval_id)}\ncommand = {json.dumps(command)}\n"
        for eval_id, command in evals.items()
    )
    (root / "firewall.toml").write_text("k = 5\nseed = 7\n" + body, encoding="utf-8")


def probed(root: Path, *args: str) -> dict[str, Any]:
    result = invoke_split("probe", "--out", "part.json", *args)
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads((root / "part.json").read_text())
    return document


def rewrite(root: Path, document: dict[str, Any]) -> None:
    (root / "part.json").write_text(json.dumps(document), encoding="utf-8")


def report(root: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((root / "firewall-report.json").read_text())
    return document


def test_a_threshold_lowered_in_the_part_is_decided_on_the_configurations(project: Path) -> None:
    write_config(project, {"half": HALF})
    part = probed(project)
    part["specs"][0]["threshold"] = part["specs"][0]["pass_score"] = 0.1
    rewrite(project, part)

    result = invoke_split("gate", "part.json")

    assert result.exit_code == 1, result.output  # as `run` decides it
    assert report(project)["evals"][0]["status"] == "fail"
    assert "eval 'half': threshold 0.1 in the part, 0.8 in the configuration" in result.stderr


def test_a_non_blocking_claim_in_the_part_is_not_the_configurations(project: Path) -> None:
    write_config(project, {"half": HALF})
    part = probed(project)
    part["specs"][0]["blocking"] = False
    rewrite(project, part)
    assert invoke_split("gate", "part.json").exit_code == 1


def test_a_trial_whose_seed_the_base_seed_does_not_give_is_refused(project: Path) -> None:
    write_config(project, {"good": GOOD})
    part = probed(project)
    part["trials"]["good"][2]["seed"] = 12345
    rewrite(project, part)

    result = invoke_split("gate", "part.json")

    assert result.exit_code == 2
    expected = trial_seed(7, "good", 2)
    assert (
        f"part.json: eval 'good': trial 2 has the seed 12345, not the {expected} that the "
        "base seed 7 gives it" in result.stderr
    )
    assert not (project / "firewall-report.json").exists()


def test_a_trial_given_twice_is_refused(project: Path) -> None:
    write_config(project, {"good": GOOD})
    part = probed(project)
    part["trials"]["good"].append(part["trials"]["good"][0])
    rewrite(project, part)

    result = invoke_split("gate", "part.json")
    assert result.exit_code == 2
    assert "eval 'good': trial 0 is there twice" in result.stderr


def evil_part(project: Path) -> None:
    write_config(project, {"good": GOOD})
    part = probed(project)
    evil = {**part["specs"][0], "id": "evil", "target": "rm -rf /"}
    part["specs"].append(evil)
    part["trials"]["evil"] = [
        {**record, "seed": trial_seed(7, "evil", record["index"])}
        for record in part["trials"]["good"]
    ]
    rewrite(project, part)


def test_an_eval_the_configuration_does_not_know_is_refused(project: Path) -> None:
    evil_part(project)

    result = invoke_split("gate", "part.json")

    assert result.exit_code == 2
    assert "part.json: eval 'evil' is not in the configuration" in result.stderr
    assert "--allow-partial" in result.stderr
    assert not (project / "firewall-report.json").exists()


def test_allow_partial_leaves_an_unknown_eval_undecided_and_says_so(project: Path) -> None:
    evil_part(project)

    result = invoke_split("gate", "part.json", "--allow-partial")

    assert result.exit_code == 0, result.output
    artefact = report(project)
    assert [e["id"] for e in artefact["evals"]] == ["good"]  # never a PASS
    assert artefact["summary"]["pass"] == 1
    said = "part.json: eval 'evil' is not in the configuration: not decided"
    assert artefact["run"]["partial"] == [said]
    assert said in result.stdout


def commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD").strip()


@pytest.fixture
def repository(project: Path) -> Path:
    git(project, "init", "-q")
    git(project, "config", "user.email", "t@example.com")
    git(project, "config", "user.name", "t")
    return project


def test_a_part_of_another_commit_is_refused_unless_allowed(repository: Path) -> None:
    write_config(repository, {"good": GOOD})
    probed_at = commit(repository, "probed")
    probed(repository)
    head = commit(repository, "a later commit")

    refused = invoke_split("gate", "part.json")

    assert refused.exit_code == 2
    assert (
        f"part.json was probed at {probed_at[:12]}, not at the checkout's {head[:12]}"
        in refused.stderr
    )
    assert "--allow-stale" in refused.stderr
    assert not (repository / "firewall-report.json").exists()

    allowed = invoke_split("gate", "part.json", "--allow-stale")

    assert allowed.exit_code == 0, allowed.output
    stale = report(repository)["run"]["stale"]
    assert stale == [f"part.json was probed at {probed_at[:12]}, not at the checkout's {head[:12]}"]
    assert "another commit's parts (--allow-stale)" in allowed.stdout


def test_the_ci_commit_is_the_checkouts_word_in_actions(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(project, {"good": GOOD})
    monkeypatch.setenv("GITHUB_SHA", "a" * 40)
    probed(project)
    assert invoke_split("gate", "part.json", "--no-issues").exit_code == 0
    monkeypatch.setenv("GITHUB_SHA", "b" * 40)
    result = invoke_split("gate", "part.json", "--no-issues")
    assert result.exit_code == 2
    assert f"probed at {'a' * 12}, not at the checkout's {'b' * 12}" in result.stderr


# --- a pytest test's part: no entry in the configuration -----------------------------------


def plugin_part(project: Path, *, scores: list[float], **tampered: Any) -> None:
    """A part as `pytest --firewall-k 5` writes it, with ``tampered`` fields in its spec."""
    spec = plugin_spec(
        "test_x.py/test_a",
        "test_x.py::test_a",
        k=5,
        settings=Settings(),
        source=Source(file="test_x.py", line=1),
    )
    eval_id = spec.id
    Probed(
        base_seed=7,
        started_at=now(),
        finished_at=now(),
        complete=True,
        specs=[spec.model_copy(update=tampered)],
        trials={eval_id: seeded(trials(scores), eval_id, 7)},
    ).write(project / "part.json")


def test_a_pytest_test_is_held_to_the_configurations_settings(project: Path) -> None:
    (project / "firewall.toml").write_text("threshold = 0.9\n", encoding="utf-8")
    plugin_part(project, scores=[1.0] * 5)
    assert invoke_split("gate", "part.json").exit_code == 0

    plugin_part(project, scores=[0.0] * 5, threshold=0.0, pass_score=0.0)
    result = invoke_split("gate", "part.json")

    assert result.exit_code == 1, result.output
    assert "threshold 0.0 in the part, 0.9 in the configuration" in result.stderr


def test_a_pytest_test_without_a_configuration_is_held_to_the_defaults(project: Path) -> None:
    plugin_part(project, scores=[0.0] * 5, threshold=0.0, pass_score=0.0)
    assert invoke_split("gate", "part.json").exit_code == 1


def test_a_test_whose_command_is_not_the_plugins_is_not_a_pytest_test(project: Path) -> None:
    plugin_part(project, scores=[1.0] * 5, target="rm -rf /")
    result = invoke_split("gate", "part.json")
    assert result.exit_code == 2
    assert "eval 'test_x.py/test_a' is not in the configuration" in result.stderr
