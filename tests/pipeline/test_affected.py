"""Which evals an affected-only run carries, decided on a history and a checkout in plain
calls: a stale, errored or fingerprintless default-branch probe, a new firewall version,
a changed variable, and a command eval without `inputs` all mean a probe."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

from firewall.fingerprint import combine
from firewall.pipeline.affected import FileDigests, choose, hashed, latest_probes
from firewall.spec import EvalSpec, Source
from firewall.store.history import HistoryRow, LocalHistory

NOW = dt.datetime(2026, 12, 1, 12, tzinfo=dt.timezone.utc)


def spec(eval_id: str = "triage", **changes: object) -> EvalSpec:
    fields: dict[str, object] = {
        "id": eval_id,
        "kind": "python",
        "target": "evals.triage:accuracy",
        "k": 5,
        "threshold": 0.8,
        "flakiness": 0.03,
        "outlier_fence": 3.0,
        "timeout": 60,
        "max_errors": 0,
        "pass_score": 0.8,
        "source": Source(file="firewall.toml"),
    }
    return EvalSpec(**{**fields, **changes})  # type: ignore[arg-type]


def row(
    project: Path, eval_spec: EvalSpec, *, age_days: float = 1, **changes: object
) -> HistoryRow:
    parts = hashed(eval_spec, ["prompts/triage.txt"], project, {"MODEL": "small"})
    when = (NOW - dt.timedelta(days=age_days)).strftime("%Y-%m-%dT%H:%M:%SZ")
    made = HistoryRow(
        eval_id=eval_spec.id,
        run_id="r1",
        mode="run",
        status="pass",
        k=5,
        build_ts=when,
        median=0.9,
        n=5,
        trials=5,
        git_sha="a" * 40,
        git_ref="refs/heads/main",
        fingerprint=combine(parts),
        inputs=parts,
    )
    return dataclasses.replace(made, **changes)  # type: ignore[arg-type]


def project(tmp_path: Path) -> Path:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "triage.txt").write_text("Sort the ticket.\n")
    return tmp_path


def decide(root: Path, eval_spec: EvalSpec, found: HistoryRow | None, **env: str) -> str | None:
    latest = {eval_spec.id: found} if found is not None else {}
    choice = choose(
        [eval_spec],
        latest,
        branch="main",
        max_age_days=7,
        root=root,
        env={"MODEL": "small", **env},
    )
    return choice.why.get(eval_spec.id)


def test_an_unchanged_eval_is_carried(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert decide(root, spec(), row(root, spec())) is None


def test_an_errored_or_quarantined_default_branch_probe_means_a_probe(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert decide(root, spec(), row(root, spec(), status="error")) == (
        "its last probe on main was ERROR"
    )
    assert "QUARANTINE" in str(decide(root, spec(), row(root, spec(), status="quarantine")))


def test_a_probe_without_a_fingerprint_or_with_a_forged_one_means_a_probe(tmp_path: Path) -> None:
    root = project(tmp_path)
    none = row(root, spec(), fingerprint=None)
    forged = row(root, spec(), fingerprint="0" * 32)
    for found in (none, forged):
        assert decide(root, spec(), found) == "its last probe on main recorded no fingerprint"


def test_a_new_firewall_version_and_a_changed_variable_mean_a_probe(tmp_path: Path) -> None:
    root = project(tmp_path)
    older = row(root, spec())
    parts = {**older.inputs, "firewall": "0.0.1"}
    old_version = dataclasses.replace(older, inputs=parts, fingerprint=combine(parts))
    assert str(decide(root, spec(), old_version)).startswith("firewall 0.0.1 -> ")
    with_env = spec(env=("MODEL",))
    assert decide(root, with_env, row(root, with_env)) is None
    assert decide(root, with_env, row(root, with_env), MODEL="large") == "$MODEL changed"


def test_a_deleted_or_new_input_means_a_probe(tmp_path: Path) -> None:
    root = project(tmp_path)
    found = row(root, spec())
    (root / "prompts" / "triage.txt").unlink()
    assert decide(root, spec(), found) == "prompts/triage.txt is gone"
    (root / "prompts" / "triage.txt").write_text("Sort the ticket.\n")
    declared = spec(inputs=("prompts/**",))
    (root / "prompts" / "extra.txt").write_text("more\n")
    assert decide(root, declared, row(root, declared)) == "prompts/extra.txt is new"


def test_a_command_eval_without_inputs_is_always_probed(tmp_path: Path) -> None:
    root = project(tmp_path)
    command = spec(kind="command", target="python check.py")
    assert "without `inputs`" in str(decide(root, command, row(root, command)))


def test_only_a_recent_default_branch_run_is_the_latest_probe(tmp_path: Path) -> None:
    root = project(tmp_path)
    history = LocalHistory(tmp_path / "history.jsonl")
    stale = row(root, spec(), age_days=8, run_id="stale")
    other_branch = row(root, spec(), git_ref="refs/heads/feature", run_id="feature")
    nightly = row(root, spec(), mode="nightly", run_id="night")
    history.append([stale, other_branch, nightly])
    since = NOW - dt.timedelta(days=7)
    assert latest_probes(history, ["triage"], branch="main", since=since) == {}
    fresh = row(root, spec(), age_days=2, run_id="fresh")
    history.append([fresh])
    assert latest_probes(history, ["triage"], branch="main", since=since) == {"triage": fresh}


def test_a_stamp_hashes_each_file_once_with_the_parts_each_eval_would_get_alone(
    tmp_path: Path,
) -> None:
    """Two evals of one module share its digest (read once per stamp), and each gets the
    parts ``hashed`` gives it alone, a missing file included."""
    root = project(tmp_path)
    (root / "evals").mkdir()
    (root / "evals" / "triage.py").write_text("def accuracy(seed): ...\n")
    files = ["evals/triage.py", "prompts/triage.txt", "gone.txt"]
    specs = [spec("a"), spec("b", k=7, env=["MODEL"])]
    env = {"MODEL": "small"}
    alone = [hashed(s, files, root, env) for s in specs]
    digests = FileDigests(root)
    assert [hashed(s, files, root, env, digests=digests) for s in specs] == alone
    assert alone[0]["file:gone.txt"] == "absent"
    (root / "evals" / "triage.py").write_text("changed after it was read\n")
    assert hashed(specs[0], files, root, env, digests=digests) == alone[0], "read once"
    assert hashed(specs[0], files, root, env) != alone[0]
