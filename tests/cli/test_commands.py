"""The deciding and bookkeeping commands against the per-command context: nightly's seed,
gate of an incomplete part, probe's lack of side effects, one JSON document per --format
json, sharded runs and the registry commands."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from builders import invoke_split, make_spec, seeded, trials

from firewall.runner.seeds import trial_seed
from firewall.store.parts import Probed
from firewall.timeutil import now

STEADY = "echo '{\"score\": 0.9}'"
# Alternates 0.9 / 0.1 by trial index: IQR 0.8 whatever the base seed, so always unstable.
ALTERNATING = (
    f"{shlex.quote(sys.executable)} -c "
    + shlex.quote("import sys; print('{\"score\": %s}' % (0.1 if int(sys.argv[1]) % 2 else 0.9))")
    + " {trial}"
)


invoke = invoke_split


def write_config(root: Path, evals: dict[str, str], header: str = "k = 4\nseed = 7\n") -> None:
    body = "".join(
        f"[[evals]]\nid = {json.dumps(eval_id)}\ncommand = {json.dumps(command)}\n"
        for eval_id, command in evals.items()
    )
    (root / "firewall.toml").write_text(header + body, encoding="utf-8")


def artefact(root: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((root / "firewall-report.json").read_text())
    return document


def snapshot(root: Path) -> dict[str, bytes | None]:
    """The registry and the history as bytes (None when absent)."""
    paths = {"registry": root / "quarantine.json", "history": root / ".firewall/history.jsonl"}
    return {name: path.read_bytes() if path.exists() else None for name, path in paths.items()}


# --- nightly --seed ----------------------------------------------------------------------


def test_nightly_seed_random_is_accepted_and_draws_a_recorded_int(project: Path) -> None:
    write_config(project, {"steady": STEADY})
    result = invoke("nightly", "--all", "--seed", "random")
    assert result.exit_code == 0, result.output
    run = artefact(project)["run"]
    base = run["base_seed"]
    assert run["mode"] == "nightly" and isinstance(base, int) and not isinstance(base, bool)
    seeds = [t["seed"] for t in artefact(project)["evals"][0]["trials"]]
    assert seeds == [trial_seed(base, "steady", i) for i in range(len(seeds))] and seeds


def test_nightly_seed_number_is_the_recorded_base_seed(project: Path) -> None:
    write_config(project, {"steady": STEADY})
    assert invoke("nightly", "--all", "--seed", "123").exit_code == 0
    report = artefact(project)
    assert report["run"]["base_seed"] == 123
    assert report["evals"][0]["trials"][0]["seed"] == trial_seed(123, "steady", 0)


def test_nightly_seed_that_is_neither_is_a_usage_error_naming_random(project: Path) -> None:
    write_config(project, {"steady": STEADY})
    result = invoke("nightly", "--seed", "banana")
    assert result.exit_code == 2
    assert "--seed" in result.stderr and '"random"' in result.stderr
    assert "banana" in result.stderr
    assert not (project / "firewall-report.json").exists()


# --- gate of an incomplete part ----------------------------------------------------------


def test_gate_of_an_incomplete_part_exits_130_and_changes_only_the_artefact(
    project: Path,
) -> None:
    write_config(project, {"wobbly": "true", "cut": "true"}, header="")
    # A complete probe of "wobbly" would quarantine it; the part as a whole was cut short.
    part = Probed(
        base_seed=7,
        started_at=now(),
        finished_at=now(),
        complete=False,
        specs=[make_spec(id="wobbly", k=4), make_spec(id="cut", k=5)],
        trials={
            "wobbly": seeded(trials([0.9, 0.1, 0.9, 0.1]), "wobbly", 7),
            "cut": seeded(trials([0.9, 0.9]), "cut", 7),
        },
    )
    part.write(project / "part.json")
    history = project / ".firewall" / "history.jsonl"
    history.parent.mkdir()
    history.write_text('{"eval_id": "old", "run_id": "r0", "status": "pass"}\n')
    before = snapshot(project)

    result = invoke("gate", "part.json")
    assert result.exit_code == 130, result.output
    report = artefact(project)
    assert report["run"]["complete"] is False and report["summary"]["exit_code"] == 130
    cut = next(e for e in report["evals"] if e["id"] == "cut")
    assert cut["status"] == "error" and "interrupted after 2 of 5 trials" in cut["reason"]
    assert snapshot(project) == before
    assert before["registry"] is None


def test_gate_of_a_real_part_marked_incomplete_exits_130(project: Path) -> None:
    write_config(project, {"wobbly": ALTERNATING})
    assert invoke("probe", "--out", "part.json").exit_code == 0
    document = json.loads((project / "part.json").read_text())
    document["complete"] = False
    (project / "part.json").write_text(json.dumps(document))

    result = invoke("gate", "part.json")
    assert result.exit_code == 130
    assert artefact(project)["run"]["complete"] is False
    assert snapshot(project) == {"registry": None, "history": None}


# --- probe has no side effects -----------------------------------------------------------


def test_probe_of_an_unstable_eval_touches_neither_registry_nor_history(project: Path) -> None:
    write_config(project, {"wobbly": ALTERNATING, "steady": STEADY})
    assert invoke("quarantine", "add", "steady", "--reason", "vendor outage").exit_code == 0
    history = project / ".firewall" / "history.jsonl"
    history.parent.mkdir()
    history.write_text('{"eval_id": "old", "run_id": "r0", "status": "pass"}\n')
    before = snapshot(project)

    result = invoke("probe", "--out", "part.json")
    assert result.exit_code == 0, result.output
    assert snapshot(project) == before
    assert not (project / "firewall-report.json").exists()
    part = json.loads((project / "part.json").read_text())
    assert part["complete"] is True
    assert [t["score"] for t in part["trials"]["wobbly"]] == [0.9, 0.1, 0.9, 0.1]
    assert "steady" not in part["trials"]  # quarantined: skipped

    # The same trials, gated, do quarantine it: the probe left that to the gate.
    assert invoke("gate", "part.json").exit_code == 0
    registry = json.loads((project / "quarantine.json").read_text())["evals"]
    assert set(registry) == {"steady", "wobbly"}


# --- --format json -----------------------------------------------------------------------


def test_list_format_json_is_one_document_of_evals_with_warnings(project: Path) -> None:
    write_config(project, {"refusals": STEADY, "steady": STEADY}, header="k = 7\n")
    with (project / "firewall.toml").open("a") as handle:
        handle.write("min_pass_rate = 0.9\n")  # on the last eval, "steady"
    result = invoke("list", "--format", "json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert isinstance(document, list)
    assert [e["id"] for e in document] == ["refusals", "steady"]
    assert document[0]["warnings"] == []
    (warning,) = document[1]["warnings"]
    assert "min_pass_rate 0.9 cannot be met with k=7" in warning


def test_gate_format_json_is_one_artefact_document(project: Path) -> None:
    write_config(project, {"steady": STEADY})
    assert invoke("probe", "--out", "part.json").exit_code == 0
    result = invoke("gate", "part.json", "--format", "json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert {"schema_version", "run", "summary", "evals"} <= set(document)
    assert document["schema_version"] == 1 and document["run"]["mode"] == "gate"
    assert [e["id"] for e in document["evals"]] == ["steady"]
    assert document == artefact(project)


def test_nightly_format_json_is_one_artefact_document(project: Path) -> None:
    write_config(project, {"steady": STEADY})
    result = invoke("nightly", "--all", "--format", "json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert {"schema_version", "run", "summary", "evals"} <= set(document)
    assert document["run"]["mode"] == "nightly" and document["summary"]["exit_code"] == 0
    assert [e["id"] for e in document["evals"]] == ["steady"]


# --- sharding ----------------------------------------------------------------------------


def test_run_shard_decides_only_that_shards_evals(project: Path) -> None:
    ids = ["a", "b", "c", "d", "e"]
    write_config(project, dict.fromkeys(ids, STEADY))
    result = invoke("run", "--shard", "1/2")
    assert result.exit_code == 0, result.output
    report = artefact(project)
    assert [e["id"] for e in report["evals"]] == ["a", "c", "e"]
    assert report["run"]["shard"] == "1/2"
    assert sum(len(e["trials"]) for e in report["evals"]) == 3 * 4
    rows = (project / ".firewall/history.jsonl").read_text().splitlines()
    assert [json.loads(line)["eval_id"] for line in rows] == ["a", "c", "e"]


# --- the registry commands ---------------------------------------------------------------


def test_quarantine_add_takes_a_suites_case_and_refuses_what_is_nothing(project: Path) -> None:
    (project / "firewall.toml").write_text(
        '[[evals]]\nid = "ui"\ncommand = "true"\nresult = "junit"\n'
        '[[evals]]\nid = "steady"\ncommand = "echo 0.9"\n'
    )

    case = invoke("quarantine", "add", "ui/test_login", "--reason", "x", "--no-issues")
    nothing = invoke("quarantine", "add", "stedy", "--reason", "x", "--no-issues")

    assert case.exit_code == 0, case.output
    assert "ui/test_login" in json.loads((project / "quarantine.json").read_text())["evals"]
    assert nothing.exit_code == 2
    assert "no eval with id 'stedy'; did you mean 'steady'?" in nothing.output
    assert "a pytest test is named by its node id" in nothing.output


def test_quarantine_add_then_list_status_and_run_see_the_entry(project: Path) -> None:
    write_config(project, {"steady": STEADY, "other": STEADY})
    added = invoke("quarantine", "add", "steady", "--reason", "vendor outage", "--owner", "@bob")
    assert added.exit_code == 0 and "quarantined steady in quarantine.json" in added.stdout
    entry = json.loads((project / "quarantine.json").read_text())["evals"]["steady"]
    assert entry["source"] == "manual" and entry["owner"] == "bob"

    listed = invoke("quarantine", "list")
    assert listed.exit_code == 0
    assert "steady  manual" in listed.stdout and "vendor outage" in listed.stdout
    assert "@bob" in listed.stdout and "other" not in listed.stdout

    status = invoke("status", "--json")
    assert status.exit_code == 0
    assert [e["id"] for e in json.loads(status.stdout)["quarantined"]] == ["steady"]

    assert invoke("run").exit_code == 0
    statuses = {e["id"]: e["status"] for e in artefact(project)["evals"]}
    assert statuses == {"steady": "quarantined", "other": "pass"}


def test_quarantine_list_of_an_empty_registry_says_so(project: Path) -> None:
    write_config(project, {"steady": STEADY})
    result = invoke("quarantine", "list")
    assert result.exit_code == 0
    assert result.stdout == "no eval is quarantined (quarantine.json)\n"
