"""The terminal rendering of a decided run: a table that reads in a CI log."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from builders import make_artefact, make_check, make_report

from firewall.artefact import Artefact, EvalReport
from firewall.policy import Status
from firewall.report import terminal
from firewall.report.selection import SCREENFUL
from firewall.report.terminal import REASON_LINES, closing_lines, table
from firewall.runner.trial import TrialRecord


def test_table_marks_non_blocking_failures_and_hides_numbers_of_errors() -> None:
    text = table(
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


def test_table_columns_line_up_and_the_reason_is_not_padded() -> None:
    lines = table(
        [make_report("a", Status.PASS), make_report("a-much-longer-id", Status.PASS)],
        colour=False,
    ).splitlines()
    assert lines[0].index("MEDIAN") == lines[1].index("0.9") == lines[2].index("0.9")
    assert not any(line.endswith(" ") for line in lines)


def artefact_with(*statuses: Status) -> Artefact:
    return make_artefact(*(make_report(f"e{i}", status) for i, status in enumerate(statuses)))


def test_a_dry_run_says_what_it_would_add_and_that_no_file_changed() -> None:
    lines = closing_lines(
        artefact_with(Status.QUARANTINE),
        added=["e0"],
        registry="quarantine.json",
        report_path=Path("firewall-report.json"),
        dry_run=True,
    )
    assert lines[1:] == [
        "quarantine e0: would be added to quarantine.json",
        "dry run: no file was changed",
    ]


def test_a_real_run_names_what_it_added_and_the_report() -> None:
    lines = closing_lines(
        artefact_with(Status.QUARANTINE, Status.FAIL),
        added=["e0"],
        registry="quarantine.json",
        report_path=Path("out.json"),
        dry_run=False,
    )
    assert lines[0].startswith("0 passed, 1 failed, 1 newly quarantined") and "exit 1" in lines[0]
    assert lines[1:] == ["quarantined e0: added to quarantine.json", "report: out.json"]


def test_verbose_names_the_trial_that_held_its_event_loop_longest() -> None:
    trials = [
        TrialRecord(index=0, seed=1, score=1.0, passed=True),
        TrialRecord(index=1, seed=2, score=1.0, passed=True, blocked_s=0.4),
        TrialRecord(index=2, seed=3, score=1.0, passed=True, blocked_s=2.5),
    ]
    report = make_report("triage-async", Status.PASS, trials=trials)

    quiet = table([report])
    verbose = " ".join(table([report], verbose=True).split())

    assert "event loop" not in quiet
    assert (
        "2 of 3 trials held their worker's event loop without awaiting, trial 2 for 2.5 s "
        "(blocking code in an async def); the trials beside them were paused"
    ) in verbose


# --- a suite beyond a screenful, a terminal narrower than the ids ----------------------

LONG = "tests/integration/payments/providers/test_stripe_checkout_flow.py/TestCheckout/test_refund"


def suite(size: int, *looks: EvalReport) -> list[EvalReport]:
    """``size`` evals: ``looks`` spread among PASSes with ids as long as a pytest suite's."""
    reports = [make_report(f"{LONG}_{i:04}.param-{i}", Status.PASS) for i in range(size)]
    for index, report in enumerate(looks):
        reports[index * 7 + 3] = report
    return reports


def failing(eval_id: str, status: Status = Status.FAIL, reason: str | None = None) -> EvalReport:
    return make_report(
        eval_id,
        status,
        reason=reason or "median 0.61 < threshold 0.85 (iqr 0.01, k=7)",
        checks=[make_check("median", "0.61", ">= 0.85", ok=False)],
    )


def test_beyond_a_screenful_the_table_leads_with_what_needs_a_look_and_counts_the_rest() -> None:
    looks = [
        failing("fails"),
        failing("scatters", Status.QUARANTINE, reason="iqr 0.21 > 0.03 " * 20),
        make_report("held", Status.QUARANTINED),
        make_report("crashes", Status.ERROR),
    ]
    lines = table(suite(500, *looks), colour=False, columns=120).splitlines()

    assert len(lines) <= 1 + 4 * (1 + REASON_LINES + 2) + 1  # 519 PASS rows once
    rows = [line.split()[:2] for line in lines[1:-1] if not line.startswith(" ")]
    assert rows == [
        ["FAIL", "fails"],
        ["ERROR", "crashes"],
        ["QUARANTINE", "scatters"],
        ["QUARANTINED", "held"],
    ]  # worst first
    assert lines[-1] == "and 496 more PASS, not shown: -v or --format json shows every eval"
    assert not any(line.startswith("PASS") for line in lines)


def test_however_many_need_a_look_a_screenful_of_them_is_shown() -> None:
    reports = suite(500, *(failing(f"fails-{i:03}") for i in range(60)))
    lines = table(reports, colour=False, columns=120).splitlines()
    assert sum(line.startswith("FAIL") for line in lines) == SCREENFUL
    assert lines[-1].startswith("and 20 more FAIL, 440 more PASS, not shown")


def test_verbose_shows_every_eval_and_a_screenful_shows_them_in_the_runs_order() -> None:
    lines = table(suite(500), colour=False, verbose=True).splitlines()
    assert sum(line.startswith("PASS") for line in lines) == 500
    small = [make_report(f"e{i:02}", Status.PASS) for i in range(SCREENFUL)]
    small[20] = failing("e20")
    rows = [line.split()[1] for line in table(small, colour=False).splitlines()[1:]]
    assert [row for row in rows if row.startswith("e")] == [r.id for r in small]


def test_a_suite_that_all_passes_is_one_line() -> None:
    assert table(suite(519), colour=False, columns=120) == (
        "all 519 evals PASS: -v or --format json shows every one"
    )


@pytest.mark.parametrize("columns", [80, 100, 120, 160])
def test_every_line_fits_the_width_and_ids_stay_apart(columns: int) -> None:
    twins = [failing(f"{LONG}.case-{n}") for n in (1, 2)]  # differ in their last character
    middle = [failing(f"{LONG[:30]}{n}{LONG[30:]}.x") for n in (1, 2)]  # differ in the middle
    reason = "error in call: AssertionError: " + "the refund did not arrive " * 10
    lines = table(
        suite(500, *twins, *middle, failing("crashes", Status.ERROR, reason=reason)),
        colour=False,
        columns=columns,
    ).splitlines()
    assert max(len(line) for line in lines) <= columns
    shown = [line.split()[1] for line in lines[1:] if line.startswith("FAIL ")]
    assert len(shown) == len(set(shown)) == 4
    assert any("…" in eval_id for eval_id in shown)


def test_the_id_column_is_no_wider_than_the_longest_id_shown() -> None:
    reports = suite(500, failing("short-id"), failing("a-bit-longer-id"))  # long ids all PASS
    header = table(reports, colour=False, columns=200).splitlines()[0]
    assert header.index("MEDIAN") == len("STATUS  ") + len("a-bit-longer-id") + 2


def test_a_table_in_a_log_is_120_columns_and_a_terminal_its_own_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    assert terminal.width() == terminal.LOG_WIDTH == 120
    monkeypatch.setenv("COLUMNS", "77")
    assert terminal.width() == 77
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback: os.terminal_size((64, 20)))
    assert terminal.width() == 64
    assert max(map(len, table(suite(500, failing(LONG)), colour=False).splitlines())) <= 64
