"""`firewall run` and friends through click's CliRunner, on small real projects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from firewall.cli import main
from firewall.constants import MAX_K, MIN_K
from firewall.runner.seeds import trial_seed

CONSTANT = "echo '{{\"score\": {score}}}'"
# Scores drawn from the seed: wide scatter, so the eval is unstable.
SCATTER = 'echo "{\\"score\\": 0.$(( {seed} % 90 + 10 ))}"'


def write_config(root: Path, body: str, *, header: str = "k = 5\nseed = 7\n") -> None:
    (root / "firewall.toml").write_text(header + body, encoding="utf-8")


def command_eval(eval_id: str, command: str, extra: str = "") -> str:
    return f"[[evals]]\nid = {json.dumps(eval_id)}\ncommand = {json.dumps(command)}\n{extra}\n"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def report(root: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((root / "firewall-report.json").read_text())
    return document


def test_stable_passing_eval_exits_zero(project: Path) -> None:
    write_config(project, command_eval("good", CONSTANT.format(score=0.9)))
    result = invoke("run")
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "good" in result.output
    artefact = report(project)
    assert artefact["summary"] == {
        "pass": 1,
        "fail": 0,
        "quarantine": 0,
        "quarantined": 0,
        "error": 0,
        "exit_code": 0,
        "trials": 5,
        "planned": 5,
    }
    assert artefact["run"]["complete"] is True


def test_blocking_regression_exits_one_and_non_blocking_does_not(project: Path) -> None:
    write_config(project, command_eval("low", CONSTANT.format(score=0.5)))
    assert invoke("run").exit_code == 1
    write_config(project, command_eval("low", CONSTANT.format(score=0.5), "blocking = false"))
    result = invoke("run")
    assert result.exit_code == 0
    assert "FAIL*" in result.output


def test_blocking_error_exits_three(project: Path) -> None:
    write_config(project, command_eval("outage", 'echo \'{"error": "judge returned 503"}\''))
    result = invoke("run")
    assert result.exit_code == 3
    evaluation = report(project)["evals"][0]
    assert evaluation["status"] == "error"
    assert "judge returned 503" in evaluation["reason"]


def test_fail_wins_over_error_for_the_exit_code(project: Path) -> None:
    write_config(
        project, command_eval("low", CONSTANT.format(score=0.5)) + command_eval("outage", "exit 9")
    )
    assert invoke("run").exit_code == 1


def test_unstable_eval_is_quarantined_then_skipped(project: Path) -> None:
    write_config(project, command_eval("wobbly", SCATTER))
    first = invoke("run")
    assert first.exit_code == 0, first.output
    assert "QUARANTINE" in first.output
    registry = json.loads((project / "quarantine.json").read_text())
    entry = registry["evals"]["wobbly"]
    assert registry["schema_version"] == 1
    assert entry["source"] == "auto" and entry["k"] == 5 and entry["stable_streak"] == 0
    assert entry["iqr"] > 0.03 and entry["reason"].startswith("spread beyond flakiness 0.03")
    text = (project / "quarantine.json").read_text()
    assert text.endswith("}\n") and text == json.dumps(registry, indent=2, sort_keys=True) + "\n"

    second = invoke("run")
    assert second.exit_code == 0
    evaluation = report(project)["evals"][0]
    assert evaluation["status"] == "quarantined" and evaluation["trials"] == []
    assert report(project)["summary"]["quarantined"] == 1

    third = invoke("run", "--include-quarantined")
    assert report(project)["evals"][0]["trials"], third.output
    assert report(project)["evals"][0]["blocking"] is False


def test_artefact_has_the_contract_shape(project: Path) -> None:
    write_config(project, command_eval("good", CONSTANT.format(score=0.9), 'tags = ["smoke"]'))
    invoke("run")
    artefact = report(project)
    assert set(artefact) == {"schema_version", "tool", "run", "summary", "evals"}
    assert artefact["tool"]["name"] == "flakiness-firewall"
    assert set(artefact["run"]) == {
        "mode",
        "base_seed",
        "started_at",
        "finished_at",
        "git_sha",
        "git_ref",
        "complete",
        "shard",
        "partial",
        "stale",
        "saved",  # an affected-only run's: what carrying evals saved (None here)
    }
    assert artefact["run"]["started_at"].endswith("Z") and artefact["run"]["base_seed"] == 7
    evaluation = artefact["evals"][0]
    assert {
        "id",
        "status",
        "blocking",
        "reason",
        "source",
        "k",
        "threshold",
        "flakiness",
        "stats",
        "trials",
    } <= set(evaluation)
    assert evaluation["source"] == {"file": "firewall.toml", "line": 4}
    assert {
        "median",
        "q1",
        "q3",
        "iqr",
        "mean",
        "min",
        "max",
        "pass_rate",
        "wilson_low",
        "wilson_high",
        "errors",
    } <= set(evaluation["stats"])
    trial = evaluation["trials"][0]
    assert set(trial) == {
        "index",
        "seed",
        "score",
        "passed",
        "duration_s",
        "in_flight",
        "error",
        "violations",
        "metrics",
        "fields",
        "items",
        "model_id",
        "prompt_version",
    }
    assert [t["seed"] for t in evaluation["trials"]] == [trial_seed(7, "good", i) for i in range(5)]


def test_config_error_exits_two_before_any_eval_runs(project: Path) -> None:
    write_config(
        project,
        command_eval("touch", "touch ran.txt; echo '{\"score\": 1}'") + "threshhold = 0.9\n",
    )
    result = invoke("run")
    assert result.exit_code == 2
    assert "firewall.toml" in result.output and "threshhold" in result.output
    assert "unknown key" in result.output and "Traceback" not in result.output
    assert not (project / "ran.txt").exists()


def test_no_config_is_a_usage_error(project: Path) -> None:
    result = invoke("run")
    assert result.exit_code == 2
    assert "firewall init" in result.output


def test_json_format_prints_the_artefact(project: Path) -> None:
    write_config(project, command_eval("good", CONSTANT.format(score=0.9)))
    result = invoke("run", "--format", "json")
    assert json.loads(result.output)["evals"][0]["id"] == "good"


def test_dry_run_changes_no_file(project: Path) -> None:
    write_config(project, command_eval("wobbly", SCATTER))
    result = invoke("run", "--dry-run")
    assert "QUARANTINE" in result.output
    assert sorted(p.name for p in project.iterdir()) == ["firewall.toml"]


def test_k_seed_report_overrides(project: Path) -> None:
    write_config(project, command_eval("good", CONSTANT.format(score=0.9)))
    invoke("run", "--k", "3", "--seed", "99", "--report", "out/r.json")
    artefact = json.loads((project / "out" / "r.json").read_text())
    assert artefact["run"]["base_seed"] == 99
    assert len(artefact["evals"][0]["trials"]) == 3
    assert [t["seed"] for t in artefact["evals"][0]["trials"]] == [
        trial_seed(99, "good", i) for i in range(3)
    ]


@pytest.mark.parametrize("k", [MIN_K - 1, MAX_K + 1])
def test_k_outside_the_bounds_the_config_keeps_is_refused(project: Path, k: int) -> None:
    """`--k` is held to the bounds of the configuration's `k`, both ends (constants.py)."""
    write_config(project, command_eval("good", CONSTANT.format(score=0.9)))
    result = CliRunner().invoke(main, ["run", "--k", str(k)])
    assert result.exit_code == 2
    assert f"{MIN_K}<=x<={MAX_K}" in result.output
    assert not (project / "firewall-report.json").exists()


def test_random_seed_is_drawn_and_recorded(project: Path) -> None:
    write_config(
        project, command_eval("good", CONSTANT.format(score=0.9)), header='k = 3\nseed = "random"\n'
    )
    seeds = set()
    for _ in range(2):
        invoke("run")
        artefact = report(project)
        base = artefact["run"]["base_seed"]
        seeds.add(base)
        assert artefact["evals"][0]["trials"][0]["seed"] == trial_seed(base, "good", 0)
    assert len(seeds) == 2


def test_selection_by_id_and_tag(project: Path) -> None:
    write_config(
        project,
        command_eval("a", CONSTANT.format(score=0.9), 'tags = ["fast"]')
        + command_eval("b", CONSTANT.format(score=0.9)),
    )
    invoke("run", "b")
    assert [e["id"] for e in report(project)["evals"]] == ["b"]
    invoke("run", "--tag", "fast")
    assert [e["id"] for e in report(project)["evals"]] == ["a"]


def test_unknown_id_suggests_the_closest(project: Path) -> None:
    write_config(project, command_eval("triage-accuracy", CONSTANT.format(score=0.9)))
    result = invoke("run", "triage-acuracy")
    assert result.exit_code == 2
    assert "did you mean 'triage-accuracy'" in result.output


def test_corrupt_registry_is_reported_and_left_untouched(project: Path) -> None:
    write_config(project, command_eval("wobbly", SCATTER))
    (project / "quarantine.json").write_text("{not json")
    result = invoke("run")
    assert result.exit_code == 2
    assert "quarantine.json" in result.output and "not valid JSON" in result.output
    assert (project / "quarantine.json").read_text() == "{not json"


def test_unknown_registry_version_is_refused(project: Path) -> None:
    write_config(project, command_eval("wobbly", SCATTER))
    (project / "quarantine.json").write_text('{"schema_version": 9, "evals": {}}\n')
    result = invoke("run")
    assert result.exit_code == 2 and "schema_version 9" in result.output
    assert (project / "quarantine.json").read_text() == '{"schema_version": 9, "evals": {}}\n'


def test_history_gets_one_row_per_eval_per_run(project: Path) -> None:
    write_config(
        project,
        command_eval("a", CONSTANT.format(score=0.9))
        + command_eval("b", CONSTANT.format(score=0.4), "blocking = false"),
    )
    invoke("run")
    invoke("run")
    rows = [
        json.loads(line) for line in (project / ".firewall/history.jsonl").read_text().splitlines()
    ]
    assert [(r["eval_id"], r["status"]) for r in rows] == [("a", "pass"), ("b", "fail")] * 2
    assert rows[0]["run_id"] == rows[1]["run_id"] != rows[2]["run_id"]


def test_decorated_evals_are_discovered_with_their_source(project: Path) -> None:
    (project / "evals").mkdir()
    (project / "evals" / "suite.py").write_text(
        "import firewall\n\n\n"
        "@firewall.eval(threshold=0.5, tags=['smoke'])\n"
        "def retrieval_recall(seed: int) -> float:\n"
        "    return 0.75\n"
    )
    write_config(project, 'paths = ["evals"]\n')
    listed = invoke("list")
    assert "retrieval-recall" in listed.output and "evals/suite.py:4" in listed.output
    result = invoke("run")
    assert result.exit_code == 0, result.output
    evaluation = report(project)["evals"][0]
    assert evaluation["id"] == "retrieval-recall" and evaluation["threshold"] == 0.5
    assert evaluation["stats"]["median"] == 0.75


def test_decorator_options_are_validated_with_their_location(project: Path) -> None:
    (project / "evals").mkdir()
    (project / "evals" / "suite.py").write_text(
        "import firewall\n\n@firewall.eval(k=2)\ndef tiny(seed):\n    return 1.0\n"
    )
    write_config(project, 'paths = ["evals"]\n')
    result = invoke("run")
    assert result.exit_code == 2
    assert "evals/suite.py:3" in result.output and "k" in result.output


def test_eval_module_that_fails_to_import_is_named(project: Path) -> None:
    (project / "evals").mkdir()
    (project / "evals" / "broken.py").write_text("import not_a_module_anywhere\n")
    write_config(project, 'paths = ["evals"]\n')
    result = invoke("run")
    assert result.exit_code == 2
    assert "evals/broken.py" in result.output and "not_a_module_anywhere" in result.output


def test_list_warns_about_an_unreachable_pass_rate_gate(project: Path) -> None:
    write_config(
        project,
        command_eval("refusals", CONSTANT.format(score=1), "min_pass_rate = 0.9"),
        header="k = 7\n",
    )
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 0
    assert "min_pass_rate 0.9 cannot be met with k=7" in result.output
    assert "0.646" in result.output


def test_replay_prints_the_raw_result_of_one_seed(project: Path) -> None:
    write_config(
        project, command_eval("echo-seed", 'echo \'{"score": 1, "fields": {"seed": \'{seed}\'}}\'')
    )
    result = invoke("replay", "echo-seed", "--seed", "1234")
    assert result.exit_code == 0
    assert json.loads(result.output.split("\n#")[0]) == {"score": 1, "fields": {"seed": 1234}}


def test_replay_of_an_erroring_trial_exits_three(project: Path) -> None:
    write_config(project, command_eval("broken", "echo nope >&2; exit 4"))
    result = invoke("replay", "broken", "--seed", "1")
    assert result.exit_code == 3
    assert "exit status 4" in result.output and "nope" in result.output


def test_schema_prints_all_three(project: Path) -> None:
    schemas = json.loads(invoke("schema").output)
    assert set(schemas) == {"artefact", "registry", "trial-result"}
    assert "score" in schemas["trial-result"]["properties"]
    assert "pass" in json.dumps(schemas["artefact"])


def test_probe_shards_then_gate_merges(project: Path) -> None:
    write_config(
        project, "".join(command_eval(name, CONSTANT.format(score=0.9)) for name in ("a", "b", "c"))
    )
    assert invoke("probe", "--shard", "1/2", "--out", "p1.json").exit_code == 0
    assert invoke("probe", "--shard", "2/2", "--out", "p2.json").exit_code == 0
    assert not (project / "firewall-report.json").exists()
    result = invoke("gate", "p1.json", "p2.json")
    assert result.exit_code == 0, result.output
    artefact = report(project)
    assert artefact["run"]["mode"] == "gate"
    assert sorted(e["id"] for e in artefact["evals"]) == ["a", "b", "c"]


def three_evals_in_two_shards(project: Path, *, seeds: tuple[str, str] = ("7", "7")) -> None:
    write_config(
        project, "".join(command_eval(name, CONSTANT.format(score=0.9)) for name in ("a", "b", "c"))
    )
    for index, seed in enumerate(seeds, start=1):
        args = ("probe", "--shard", f"{index}/2", "--seed", seed, "--out", f"p{index}.json")
        assert invoke(*args).exit_code == 0


def test_a_gate_with_a_shard_missing_refuses_to_go_green(project: Path) -> None:
    three_evals_in_two_shards(project)
    result = CliRunner().invoke(main, ["gate", "p1.json"])
    assert result.exit_code == 2
    assert "shard 2/2 is missing: these parts are not one whole probe" in result.output
    assert "--allow-partial" in result.output
    assert not (project / "firewall-report.json").exists()


def test_a_gate_of_parts_with_different_base_seeds_is_refused(project: Path) -> None:
    three_evals_in_two_shards(project, seeds=("7", "8"))
    result = CliRunner().invoke(main, ["gate", "p1.json", "p2.json"])
    assert result.exit_code == 2
    assert "the parts ran with different base seeds (7 in p1.json, 8 in p2.json)" in result.output


def test_allow_partial_decides_what_it_has_and_says_what_was_missing(project: Path) -> None:
    three_evals_in_two_shards(project)
    result = invoke("gate", "p1.json", "--allow-partial")
    assert result.exit_code == 0, result.output
    assert "partial gate (--allow-partial): shard 2/2 is missing" in result.output
    artefact = report(project)
    assert artefact["run"]["partial"] == ["shard 2/2 is missing"]
    assert sorted(e["id"] for e in artefact["evals"]) == ["a", "c"]


@pytest.mark.parametrize(
    "content, message",
    [
        ("{}", "not a probe part"),
        ("nope", "invalid JSON"),
        ('{"kind": "firewall-probe-part", "schema_version": 2}', "schema_version 2"),
    ],
)
def test_gate_refuses_what_is_not_a_probe_part(project: Path, content: str, message: str) -> None:
    write_config(project, command_eval("a", CONSTANT.format(score=0.9)))
    (project / "part.json").write_text(content)
    result = invoke("gate", "part.json")
    assert result.exit_code == 2 and message in result.output


def test_shard_syntax_is_checked(project: Path) -> None:
    write_config(project, command_eval("a", CONSTANT.format(score=0.9)))
    result = invoke("run", "--shard", "3/2")
    assert result.exit_code == 2 and "--shard" in result.output


def test_history_rows_carry_drift_and_attribution(project: Path) -> None:
    (project / "attributed.py").write_text(
        "def trial(seed, trial):\n"
        "    return {'score': 0.9, 'fields': {'category': 'billing' if trial % 2 else 'refund'},\n"
        "            'model_id': 'gpt-x' if trial < 3 else 'gpt-y', 'prompt_version': 'v2'}\n"
    )
    write_config(
        project, '[[evals]]\nid = "attr"\npython = "attributed:trial"\n', header="k = 5\nseed = 7\n"
    )
    assert invoke("run").exit_code == 0
    (row,) = [
        json.loads(line) for line in (project / ".firewall/history.jsonl").read_text().splitlines()
    ]
    assert row["drift"] == {"category": 0.4}  # refund, billing, refund, billing, refund
    assert row["model_ids"] == ["gpt-x", "gpt-y"] and row["prompt_versions"] == ["v2"]
    assert row["mode"] == "run" and row["k"] == 5 and row["build_ts"].endswith("Z")
    artefact = report(project)["evals"][0]
    assert artefact["drift"] == {"category": 0.4}
    assert {v["display"]: v["count"] for v in artefact["distributions"]["category"]} == {
        '"refund"': 3,
        '"billing"': 2,
    }
