"""The one output module: progress only on a terminal, tables that read in a CI log."""

from __future__ import annotations

import pytest
from fakes import make_report

from firewall import output
from firewall.policy import Status


def test_progress_writes_to_stderr_only_when_enabled(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = output.Progress(2, enabled=False)
    quiet.step("a", errored=False)
    assert capsys.readouterr() == ("", "")

    shown = output.Progress(2, enabled=True)
    shown.step("a", errored=False)
    shown.step("b", errored=True)
    shown.close()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "[2/2] 1 errored" in captured.err and "last: b" in captured.err


def test_progress_is_off_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert output.Progress(3).enabled is False  # pytest's captured stderr is no terminal


def test_table_marks_non_blocking_failures_and_hides_numbers_of_errors() -> None:
    text = output.table(
        [
            make_report("capability", Status.FAIL, blocking=False),
            make_report("outage", Status.ERROR),
            make_report("good", Status.PASS),
        ],
        colour=False,
    )
    rows = {line.split()[1]: line.split() for line in text.splitlines()[1:] if line[0] != " "}
    assert rows["capability"][0] == "FAIL*"
    assert rows["outage"][2:4] == ["-", "-"]
    assert rows["good"][:3] == ["PASS", "good", "0.9"]
