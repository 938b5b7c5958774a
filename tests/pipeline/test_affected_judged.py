"""An eval with a judge: the judge's module and what it opens (a rubric) count for the
eval's fingerprint, as its own module does; without a note of them it has none."""

from __future__ import annotations

from pathlib import Path

from builders import make_report
from test_affected import spec

from firewall.artefact import EvalReport
from firewall.pipeline.affected import stamp
from firewall.policy import Status
from firewall.runner.trial import TrialRecord

JUDGE = "evals.grading:grade"


def probed(eval_id: str) -> EvalReport:
    trial = TrialRecord(index=0, seed=1, score=0.9, passed=True, duration_s=0.1, in_flight=1)
    return make_report(eval_id, Status.PASS, trials=[trial])


def test_the_judges_reads_are_part_of_the_fingerprint(tmp_path: Path) -> None:
    for name, text in {"evals/triage.py": "x", "evals/grading.py": "y", "rubric.md": "1-5"}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    judged = spec(judge=JUDGE)
    reads = {judged.target: {"evals/triage.py"}, JUDGE: {"evals/grading.py", "rubric.md"}}
    (report,) = stamp([probed("triage")], [judged], reads, tmp_path, {})
    assert report.fingerprint is not None
    assert {"file:evals/triage.py", "file:evals/grading.py", "file:rubric.md"} <= set(report.inputs)


def test_without_a_note_of_the_judges_reads_there_is_no_fingerprint(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "triage.py").write_text("x")
    judged = spec(judge=JUDGE)
    (report,) = stamp(
        [probed("triage")], [judged], {judged.target: {"evals/triage.py"}}, tmp_path, {}
    )
    assert report.fingerprint is None, "a judge whose reads are unknown could change unseen"
