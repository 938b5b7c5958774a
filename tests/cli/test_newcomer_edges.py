"""The rough edges a newcomer meets first: each message says what to do next."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from builders import make_artefact, make_report
from click.testing import CliRunner, Result

from firewall.cli import main
from firewall.policy import Status
from firewall.report.terminal import summary_line, table

ONE = 'k = 3\n[[evals]]\nid = "steady"\ncommand = "echo \'{\\"score\\": 0.9}\'"\n'


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_releasing_an_eval_that_is_not_quarantined_points_to_the_quarantine_list(
    project: Path,
) -> None:
    (project / "firewall.toml").write_text(ONE)
    assert invoke("quarantine", "add", "steady", "--reason", "r", "--no-issues").exit_code == 0
    result = invoke("quarantine", "release", "nosuch", "--no-issues")
    assert result.exit_code == 2
    assert "no quarantined eval with id 'nosuch'; `firewall quarantine list` shows them" in (
        result.output
    )
    near = invoke("quarantine", "release", "stady", "--no-issues")
    assert "did you mean 'steady'?" in near.output


def test_the_quarantine_list_is_a_table_with_aligned_columns(project: Path) -> None:
    (project / "firewall.toml").write_text(ONE + ONE.split("\n", 1)[1].replace("steady", "st"))
    invoke("quarantine", "add", "steady", "--reason", "flaky judge", "--no-issues")
    invoke("quarantine", "add", "st", "--reason", "outage", "--owner", "alice", "--no-issues")
    header, *rows = invoke("quarantine", "list").output.splitlines()
    assert header.split() == ["EVAL", "SOURCE", "SINCE", "STREAK", "OWNER", "REVIEW", "REASON"]
    starts = {line.index(word) for line, word in zip(rows, ("manual", "manual"), strict=True)}
    assert len(starts) == 1 and header.index("SOURCE") in starts
    assert "@alice" in rows[0] and rows[0].endswith("outage")


def test_a_probe_part_given_to_report_says_to_use_gate(project: Path) -> None:
    (project / "firewall.toml").write_text(ONE)
    assert invoke("probe", "--out", "part-1.json").exit_code == 0
    result = invoke("report", "part-1.json")
    assert result.exit_code == 2
    assert "part-1.json: this is a probe part (from `firewall probe --out`), not a report" in (
        result.output
    )
    assert "`firewall gate part-1.json`" in result.output


def test_run_repeats_the_warning_of_a_gate_that_cannot_be_met(project: Path) -> None:
    (project / "firewall.toml").write_text(ONE + "min_pass_rate = 0.9\n")
    result = CliRunner().invoke(main, ["run"])
    assert "steady: min_pass_rate 0.9 cannot be met with k=3" in result.output
    assert result.output.count("cannot be met") == 1


def test_no_color_turns_the_table_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    reports = [make_report("a", Status.FAIL)]
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "\x1b[" in table(reports)
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in table(reports)


def test_a_non_blocking_error_is_marked_and_counted_like_a_non_blocking_fail() -> None:
    error = make_report("judge", Status.ERROR, blocking=False)
    fail = make_report("tone", Status.FAIL, blocking=False)
    rows = table([error, fail], colour=False).splitlines()
    assert rows[1].startswith("ERROR*") and rows[2].startswith("FAIL*")
    assert "(* 2 non-blocking)" in summary_line(make_artefact(error, fail))
