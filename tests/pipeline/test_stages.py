"""The stages alone: the plan's seeds and k; the verdict's statuses and the exit code the
summary makes."""

from __future__ import annotations

import datetime as dt
import gc
from collections.abc import Sequence

import pytest
from builders import make_report, make_spec

from firewall.artefact import Artefact, EvalReport, RunInfo
from firewall.diagnostics import diagnose
from firewall.errors import ExitCode
from firewall.lifecycle import Entry
from firewall.pipeline.stages import diagnostics, judge, outliving, plan
from firewall.pipeline.verdict import in_quarantine, summarise
from firewall.policy import Status
from firewall.runner import Schedule, Task
from firewall.runner.seeds import trial_seed
from firewall.runner.trial import TrialRecord, record_from_payload
from firewall.spec import EvalSpec


@pytest.mark.parametrize(
    ("statuses", "complete", "expected"),
    [
        ([Status.PASS, Status.QUARANTINE, Status.QUARANTINED], True, ExitCode.OK),
        ([Status.PASS, Status.FAIL, Status.ERROR], True, ExitCode.FAIL),
        ([Status.PASS, Status.ERROR], True, ExitCode.ERROR),
        ([Status.FAIL], False, ExitCode.INTERRUPTED),
        ([], True, ExitCode.OK),
    ],
)
def test_the_exit_code_follows_the_worst_blocking_status(
    statuses: list[Status], complete: bool, expected: ExitCode
) -> None:
    reports = [make_report(f"e{i}", status) for i, status in enumerate(statuses)]
    assert summarise(reports, complete).exit_code is expected


def test_non_blocking_failures_and_errors_do_not_set_the_exit_code() -> None:
    reports = [
        make_report("advisory", Status.FAIL, blocking=False),
        make_report("judge", Status.ERROR, blocking=False),
    ]
    summary = summarise(reports, True)
    assert summary.exit_code is ExitCode.OK
    assert (summary.pass_, summary.fail, summary.error) == (0, 1, 1)


@pytest.mark.parametrize(("complete", "expected"), [(True, ExitCode.OK), (False, 130)])
def test_a_nightly_exits_0_whatever_it_found_and_130_when_interrupted(
    complete: bool, expected: int
) -> None:
    reports = [make_report("broken", Status.FAIL), make_report("down", Status.ERROR)]
    assert summarise(reports, complete, blocks=False).exit_code == expected


def test_an_eval_in_quarantine_probed_anyway_never_blocks() -> None:
    entry = Entry(
        since=dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc), source="manual", reason="r"
    )
    report = in_quarantine(make_report("tone", Status.FAIL, reason="median 0.5 < 0.8"), entry)
    assert (report.status, report.blocking) == (Status.QUARANTINED, False)
    assert report.reason == "in quarantine, probed FAIL: median 0.5 < 0.8"
    assert summarise([report], True).exit_code is ExitCode.OK


def drain(schedule: Schedule) -> list[Task]:
    """Every task a schedule hands out before any result is in."""
    return list(iter(schedule.next_task, None))


def test_the_plan_interleaves_the_evals_derives_every_seed_and_applies_a_k_override() -> None:
    specs = [make_spec(id="a", k=3), make_spec(id="b", k=5)]
    # Trial i of every eval before trial i + 1 of any: the first results settle early.
    assert [(t.spec.id, t.index) for t in drain(plan(specs, 7, None))] == [
        ("a", 0),
        ("b", 0),
        ("a", 1),
        ("b", 1),
        ("a", 2),
        ("b", 2),
        ("b", 3),
        ("b", 4),
    ]
    overridden = drain(plan(specs, 7, 4))
    assert len(overridden) == 8 and {t.k for t in overridden} == {4}
    assert {t.spec.k for t in overridden} == {4}
    assert overridden[3].seed == trial_seed(7, "b", 1)


def test_a_k_override_above_max_k_raises_max_k_with_it() -> None:
    (spec,) = plan([make_spec(id="a", k=3, max_k=5)], 7, 30).specs
    assert (spec.k, spec.max_k) == (30, 30)
    (spec,) = plan([make_spec(id="a", k=3, max_k=15)], 7, 4).specs
    assert (spec.k, spec.max_k) == (4, 15)


def test_a_run_keeps_what_existed_before_it_frozen_and_leaves_the_collector_as_it_was() -> None:
    frozen: list[int] = []

    @outliving()
    def run() -> None:
        frozen.append(gc.get_freeze_count())
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run()
    assert frozen[0] > 0, "the objects of the process, frozen while it runs"
    assert gc.get_freeze_count() == 0, "and unfrozen after, also when it was interrupted"
    gc.freeze()  # the firewall command froze its imports, or a host its own objects
    try:
        before = gc.get_freeze_count()
        made_since = [[index] for index in range(1000)]  # the configuration, the specs
        with outliving(), outliving():
            assert gc.get_freeze_count() >= before + len(made_since), "frozen too"
        assert gc.get_freeze_count() >= before, "and what was frozen before stays frozen"
    finally:
        gc.unfreeze()


def _probed(spec: EvalSpec, payloads: Sequence[object]) -> list[TrialRecord]:
    """The records the runner makes of these payloads (a bare score takes the fast path)."""
    return [
        record_from_payload(
            payload,
            index=i,
            seed=100 + i,
            pass_score=spec.pass_score,
            duration_s=0.25,
            in_flight=2,
        )
        for i, payload in enumerate(payloads)
    ]


def test_the_artefact_written_from_the_fast_built_models_is_the_validated_ones_byte_for_byte() -> (
    None
):
    """Records of bare scores and decisions' statistics are built without validation (a
    run makes them by the thousand): written, the artefact reads back into validated
    models that write it again byte for byte, for every kind of probe."""
    bare = [{"score": s} for s in (0.9, 0.91, 0.88, 0.9, 0.2, 0.93, 1)]
    rich = [
        {
            "score": 0.5,
            "items": {"q1": 1.0, "q2": 0.0},
            "fields": {"label": "a"},
            "metrics": {"latency_ms": 120.0, "tokens": 30},
            "model_id": "m1",
        },
        {
            "score": 1.0,
            "items": {"q1": 1.0, "q2": 1.0},
            "fields": {"label": "b"},
            "metrics": {"latency_ms": 80.0, "tokens": 20},
            "prompt_version": "v2",
        },
        {"error": "rate limited"},
        {"score": 0.5, "items": {"q1": 0.0, "q2": 1.0}, "violations": ["pii"]},
    ]
    cases: list[tuple[EvalSpec, Sequence[object]]] = [
        (make_spec(id="bare"), bare),
        (make_spec(id="constant", k=3), [{"score": 1.0}] * 3),
        (make_spec(id="rich", k=4, max_errors=1), rich),
        (make_spec(id="gated", k=5, min_pass_rate=0.6), [{"passed": True}] * 4 + [{"score": 0}]),
        (make_spec(id="errored", k=3), [{"error": "boom"}, "not an object", {"score": 2}]),
    ]
    started = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.timezone.utc)

    def written() -> tuple[list[EvalReport], str]:
        reports = [judge(spec, _probed(spec, payloads)) for spec, payloads in cases]
        return reports, Artefact(
            run=RunInfo(mode="run", base_seed=7, started_at=started, finished_at=started),
            summary=summarise(reports, True),
            evals=reports,
        ).to_json()

    reports, text = written()
    assert Artefact.model_validate_json(text).to_json() == text
    assert written()[1] == text, "the same inputs, the same bytes"
    assert {report.status for report in reports} >= {Status.PASS, Status.QUARANTINE}


@pytest.mark.parametrize("status", [Status.PASS, Status.QUARANTINE])
def test_a_reports_diagnostics_are_what_diagnose_finds(status: Status) -> None:
    spec = make_spec(k=4, threshold=0.5)
    trials = _probed(
        spec,
        [
            {
                "score": 0.5,
                "items": {"q1": 1.0, "q2": 0.0},
                "fields": {"label": "a"},
                "model_id": "m1",
            },
            {
                "score": 1.0,
                "items": {"q1": 1.0, "q2": 1.0},
                "fields": {"label": "b"},
                "model_id": "m2",
            },
            {"score": 0.0, "items": {"q1": 0.0, "q2": 0.0}, "fields": {"tone": "dry"}},
            {"error": "rate limited"},
        ],
    )
    found = diagnose(trials, pass_score=spec.pass_score, with_hints=status is Status.QUARANTINE)
    assert diagnostics(trials, status, spec) == {
        "drift": found.drift_rates(),
        "distributions": {entry.name: entry.distribution for entry in found.drift},
        "flips": found.flips,
        "hints": found.hints,
    }
    assert found.flips and found.drift and (found.hints or status is Status.PASS)
