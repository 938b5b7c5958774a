"""What the run line says beyond the counts: a partial gate, and what adaptive K did."""

from __future__ import annotations

from pathlib import Path

from builders import make_artefact, make_report

from firewall.adaptive import Stop
from firewall.policy import Status
from firewall.report.markdown import render_summary
from firewall.report.terminal import adaptivity, closing_lines


def test_a_partial_gate_says_what_its_parts_lacked_in_the_summary_and_the_terminal() -> None:
    artefact = make_artefact(
        make_report("a", Status.PASS), mode="gate", partial=["shard 2/2 is missing"]
    )
    assert "**partial** (shard 2/2 is missing)" in render_summary(artefact)
    lines = closing_lines(
        artefact, added=[], registry="q.json", report_path=Path("r.json"), dry_run=False
    )
    assert "partial gate (--allow-partial): shard 2/2 is missing" in lines


def test_the_run_line_counts_what_adaptive_k_saved_and_added() -> None:
    artefact = make_artefact(
        make_report("settled", Status.QUARANTINE, stop=Stop(trials=4, planned=7, why="settled")),
        make_report("near", Status.PASS, stop=Stop(trials=10, planned=7, why="extended")),
        make_report("plain", Status.PASS, stop=Stop(trials=7, planned=7, why="planned")),
    )
    assert adaptivity(artefact) == (
        "adaptive K: 3 trials saved (1 eval settled early), 3 trials added (1 eval near a line)"
    )
    assert "adaptive K: 3 trials saved" in render_summary(artefact)


def test_a_run_adaptive_k_left_alone_says_nothing_of_it() -> None:
    artefact = make_artefact(
        make_report("plain", Status.PASS, stop=Stop(trials=7, planned=7, why="fixed"))
    )
    assert adaptivity(artefact) == ""
