"""The issue of an eval whose judge scatters says what to pin, and names the judge, as
GitHub receives it (the stand-in, through the real PyGithub client); an eval whose model
scatters is told about its sampling instead."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from builders import make_spec
from github_standin import GitHubStandIn
from issue_builders import entry, tracker

from firewall.artefact import EvalReport
from firewall.github.issues import IssueContext
from firewall.pipeline.stages import judge as decide
from firewall.policy import Status
from firewall.runner import judged
from firewall.runner.judgement import Judged, Judgement
from firewall.runner.trial import TrialRecord

JUDGE = "evals.grading:grade_reply"


def judged_trials(model_sd: float, judge_sd: float, *, seed: int) -> list[TrialRecord]:
    """Seven outputs, each judged three times: the model's and the judge's noise given."""
    rng = random.Random(seed)
    records = []
    for index in range(7):
        mean = 0.8 + rng.gauss(0, model_sd)
        made = [
            Judgement(seed=j, score=min(1.0, max(0.0, mean + rng.gauss(0, judge_sd))))
            for j in range(3)
        ]
        kept = Judged(judge=JUDGE, output=f"reply {index}", judgements=made)
        payload, error = judged.combined({}, kept)
        assert error is None and payload is not None
        records.append(
            TrialRecord(
                index=index,
                seed=4100 + index,
                score=payload["score"],
                passed=payload["score"] >= 0.6,
                judged=kept,
            )
        )
    return records


def report_of(model_sd: float, judge_sd: float, *, seed: int) -> EvalReport:
    spec = make_spec(
        id="reply-quality", judge=JUDGE, judge_repeats_max=3, threshold=0.6, pass_score=0.6
    )
    return decide(spec, judged_trials(model_sd, judge_sd, seed=seed))


def body_on_github(hub: GitHubStandIn, report: EvalReport) -> str:
    context = IssueContext(
        report=report,
        entry=entry(report.id),
        replay=f"firewall replay {report.id} --seed 4105",
        release_after=3,
    )
    number = tracker(hub).open_or_comment(report.id, context)
    return hub.issues[number].body


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn() as standin:
        yield standin


def test_a_judge_that_scatters_alone_is_told_what_to_pin(hub: GitHubStandIn) -> None:
    report = report_of(0.0, 0.08, seed=1)
    assert report.status is Status.QUARANTINE
    assert report.reason.startswith("the judge scatters alone")
    body = body_on_github(hub, report)
    pin = body.split("### Pin the judge", 1)[1].split("###", 1)[0]
    assert f"This eval's judge `{JUDGE}` scatters on its own" in pin
    assert "**Temperature 0** in the judge's own call" in pin
    assert "**An anchored rubric**" in pin
    assert "**The judge's model by its dated snapshot**" in pin
    assert "`judge: 9" in pin, "the split's numbers, the judge first"
    assert body.index("### Pin the judge") < body.index("### Likely causes")


def test_a_model_that_scatters_is_not_told_to_pin_its_judge(hub: GitHubStandIn) -> None:
    report = report_of(0.12, 0.005, seed=2)
    assert report.status is Status.QUARANTINE
    body = body_on_github(hub, report)
    assert "### Pin the judge" not in body
    assert "sampling randomness: the outputs themselves differ" in body
