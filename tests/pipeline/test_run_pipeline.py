"""`firewall.pipeline.run` on a context built by `context.load`: what the probe stage tells
its progress, and what a sharded run probes and records.

(Named test_run_pipeline.py, not test_run.py: the test directories are not packages, so
two test modules may not share a basename with tests/cli/test_run.py.)
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pytest

from firewall.discovery import Shard
from firewall.lifecycle import Entry
from firewall.pipeline import context
from firewall.pipeline.run import RunOptions, collect, probe_to, run

AT = dt.datetime(2026, 11, 29, 21, 0, tzinfo=dt.timezone.utc)
STEADY = "echo '{\"score\": 0.9}'"
KS = {"a": 3, "b": 4, "c": 5, "d": 6}  # Shard 1/2 deals a and c, 2/2 deals b and d.


class Recorder:
    """A progress that keeps every call it gets."""

    def __init__(self) -> None:
        self.calls: list[str] = []  # "start", "step", "finish", in order
        self.totals: list[int] = []
        self.steps: list[tuple[str, bool]] = []

    def start(self, total: int) -> None:
        self.calls.append("start")
        self.totals.append(total)

    def replan(self, total: int) -> None:
        self.calls.append("replan")
        self.totals.append(total)

    def step(self, eval_id: str, errored: bool) -> None:
        self.calls.append("step")
        self.steps.append((eval_id, errored))

    def finish(self) -> None:
        self.calls.append("finish")

    def per_eval(self) -> dict[str, int]:
        return dict(Counter(eval_id for eval_id, _ in self.steps))


@pytest.fixture
def ctx(project: Path) -> context.Context:
    body = "".join(
        f'[[evals]]\nid = "{eval_id}"\ncommand = {json.dumps(STEADY)}\nk = {k}\n'
        for eval_id, k in KS.items()
    )
    (project / "firewall.toml").write_text("seed = 7\n" + body, encoding="utf-8")
    return context.load(cwd=project, env={}, clock=lambda: AT)


@pytest.mark.parametrize(("shard", "ids"), [("1/2", ["a", "c"]), ("2/2", ["b", "d"])])
def test_progress_total_counts_only_the_shards_trials(
    ctx: context.Context, shard: str, ids: list[str]
) -> None:
    progress = Recorder()
    result = run(ctx, RunOptions(shard=Shard.parse(shard)), progress=progress)
    total = sum(KS[eval_id] for eval_id in ids)
    assert progress.totals == [total]
    assert progress.calls == ["start"] + ["step"] * total + ["finish"]
    assert progress.per_eval() == {eval_id: KS[eval_id] for eval_id in ids}
    assert not any(errored for _, errored in progress.steps)
    assert [e.id for e in result.artefact.evals] == ids
    assert result.artefact.run.shard == shard


def test_progress_total_without_a_shard_is_every_trial(ctx: context.Context) -> None:
    progress = Recorder()
    collect(ctx, RunOptions(), progress=progress)
    assert progress.totals == [sum(KS.values())]
    assert progress.per_eval() == KS


def test_k_override_sets_the_progress_total(ctx: context.Context) -> None:
    progress = Recorder()
    part = collect(ctx, RunOptions(k=3, shard=Shard.parse("2/2")), progress=progress)
    assert progress.totals == [6] and progress.per_eval() == {"b": 3, "d": 3}
    assert {eval_id: len(t) for eval_id, t in part.trials.items()} == {"b": 3, "d": 3}


def test_quarantined_evals_of_the_shard_are_not_counted(ctx: context.Context) -> None:
    with ctx.edit_registry() as entries:
        entries["c"] = Entry(since=AT, source="manual", reason="vendor outage")
    progress = Recorder()
    result = run(ctx, RunOptions(shard=Shard.parse("1/2")), progress=progress)
    assert progress.totals == [KS["a"]] and progress.per_eval() == {"a": KS["a"]}
    assert {e.id: e.status.value for e in result.artefact.evals} == {
        "a": "pass",
        "c": "quarantined",
    }


def test_sharded_run_records_only_its_evals_at_the_clocks_time(
    ctx: context.Context, project: Path
) -> None:
    result = run(ctx, RunOptions(shard=Shard.parse("1/2")))
    assert result.exit_code == 0 and result.report_path == project / "firewall-report.json"
    assert result.artefact.run.started_at == AT == result.artefact.run.finished_at
    assert [row.eval_id for row in ctx.history.scan()] == ["a", "c"]
    assert {row.build_ts for row in ctx.history.scan()} == {"2026-11-29T21:00:00Z"}


def test_probe_to_writes_the_part_and_nothing_else(ctx: context.Context, project: Path) -> None:
    progress = Recorder()
    part = probe_to(
        ctx, RunOptions(shard=Shard.parse("2/2")), project / "p.json", progress=progress
    )
    assert progress.totals == [KS["b"] + KS["d"]]
    assert sorted(p.name for p in project.iterdir()) == ["firewall.toml", "p.json"]
    written = json.loads((project / "p.json").read_text())
    assert written["shard"] == "2/2" and sorted(written["trials"]) == ["b", "d"]
    assert written["base_seed"] == part.base_seed == 7
