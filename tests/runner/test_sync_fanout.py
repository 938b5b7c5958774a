"""A sync eval at a concurrency far above the CPUs is told what it costs, in list and run."""

from __future__ import annotations

from pathlib import Path

from builders import python_spec
from click.testing import CliRunner

from firewall.cli import main
from firewall.runner.python import WORKER_MB, cpus, sync_fanout


def test_sync_evals_above_twice_the_cpus_are_told_the_memory_and_the_async_way() -> None:
    sync, pooled = python_spec("m:f"), python_spec("m:g", asynchronous=True)
    many = 2 * cpus() + 1
    said = sync_fanout([sync, pooled], many)
    assert said is not None
    assert f"{many * WORKER_MB:,} MB" in said and "async def" in said and sync.id in said
    assert sync_fanout([sync], 2 * cpus()) is None  # at twice the CPUs: nothing to say
    assert sync_fanout([pooled], 64) is None  # async trials share a worker per CPU


def test_list_and_run_say_it(project: Path) -> None:
    (project / "ev.py").write_text("def fn(seed):\n    return 1.0\n")
    (project / "firewall.toml").write_text(
        'k = 3\nconcurrency = 64\n[[evals]]\nid = "e"\npython = "ev:fn"\n'
    )
    for command in (["list"], ["run"]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 0, result.output
        assert "concurrency 64 with synchronous Python evals (e)" in result.output
