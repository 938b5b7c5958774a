"""The context is built once per command: one history scan, one registry snapshot."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Collection, Iterator
from pathlib import Path

import actions_parser
import pytest

from firewall.errors import ConfigError
from firewall.pipeline import context
from firewall.pipeline.run import RunOptions, run
from firewall.store.history import HistoryRow, LocalHistory

CONFIG = """
k = 4
seed = 7
[[evals]]
id = "steady"
command = "python score.py 0.9 0.9"
[[evals]]
id = "wobbly"
command = "python score.py 0.1 0.9 {trial}"
"""
# Alternates between its two scores by trial index; with one score it is steady.
SCORE = """import sys
low, high, *trial = sys.argv[1:]
print('{"score": %s}' % (low if trial and int(trial[0]) % 2 else high))
"""


def write_project(root: Path, config: str = CONFIG) -> None:
    (root / "firewall.toml").write_text(config)
    (root / "score.py").write_text(SCORE)


class CountingHistory(LocalHistory):
    """The real file store, counting how often the run reads it, whole or a window of it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.scans = self.windows = 0

    def scan(self, eval_ids: Collection[str] | None = None) -> Iterator[HistoryRow]:
        self.scans += 1
        return super().scan(eval_ids)

    def recent(
        self,
        eval_ids: Collection[str] | None = None,
        *,
        since: dt.datetime,
        last: int | None = None,
        ref: str | None = None,
        weeks: bool = False,
        chunk: int = 1 << 18,
    ) -> list[HistoryRow]:
        self.windows += 1
        return super().recent(eval_ids, since=since, last=last, ref=ref, weeks=weeks, chunk=chunk)


def test_an_actions_run_reads_the_trend_window_once_for_issues_and_summary(
    project: Path,
) -> None:
    write_project(project)
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(project / "summary.md"),
        "GITHUB_OUTPUT": str(project / "outputs.txt"),
    }
    ctx = context.load(cwd=project, env=env)
    history = CountingHistory(project / ".firewall" / "history.jsonl")
    ctx = dataclasses.replace(ctx, history=history)
    # --no-issues: the recording tracker still renders every issue, trends included.
    result = run(ctx, RunOptions(issues=False))
    assert [r.status.value for r in result.artefact.evals] == ["pass", "quarantine"]
    assert (history.scans, history.windows) == (0, 1)
    assert "wobbly" in (project / "summary.md").read_text()


def test_the_snapshot_follows_what_the_run_wrote(project: Path) -> None:
    write_project(project)
    ctx = context.load(cwd=project, env={})
    assert ctx.entries() == {}
    result = run(ctx, RunOptions())
    assert result.added == ["wobbly"]
    on_disk = json.loads((project / "quarantine.json").read_text())["evals"]
    assert set(ctx.entries()) == set(on_disk) == {"wobbly"}


@pytest.mark.parametrize("key", ["registry", "history", "report"])
def test_a_file_setting_that_names_a_directory_is_a_config_error(project: Path, key: str) -> None:
    (project / "somedir").mkdir()
    write_project(project, f'{key} = "somedir"\n' + CONFIG)
    with pytest.raises(ConfigError) as caught:
        context.load(cwd=project, env={})
    assert str(caught.value).startswith(f"firewall.toml: {key} = 'somedir' is a directory")
    assert caught.value.exit_code == 2


def test_a_file_setting_under_a_regular_file_is_a_config_error(project: Path) -> None:
    (project / "sub").write_text("not a directory\n")
    write_project(project, 'report = "sub/firewall-report.json"\n' + CONFIG)
    with pytest.raises(ConfigError) as caught:
        context.load(cwd=project, env={})
    assert str(caught.value).startswith(
        "firewall.toml: report = 'sub/firewall-report.json' is inside 'sub', which is a file"
    )


def test_a_notice_in_a_github_job_cannot_be_read_as_a_workflow_command(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_project(project)
    ctx = context.load(cwd=project, env={"GITHUB_ACTIONS": "true"})
    ctx.notice("git push failed: remote: ##[error]forged\n::error::also forged")
    ctx.notice("git push failed: remote: ##[error]forged\n::error::also forged")  # said once
    err = capsys.readouterr().err
    # One warning annotation, where a job's page shows it; nothing in it acts as a command.
    (said,) = actions_parser.commands(err)
    assert said.name == "warning" and "git push failed" in said.data
    assert "##[error]forged" in said.data and "::error::also forged" in said.data
