"""The terminal rendering of a decided run: a table that reads in a CI log."""

from __future__ import annotations

from pathlib import Path

from builders import make_artefact, make_report

from firewall.artefact import Artefact
from firewall.policy import Status
from firewall.report.terminal import closing_lines, table
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
