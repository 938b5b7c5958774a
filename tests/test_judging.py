"""An eval with a judge: the split of its scatter, the judge rule, re-judging, the trial.

The split is checked against statsmodels (a REML fit of the one-way random-effects
model, which on balanced data with a positive between component is the ANOVA
estimate exactly); the rest in plain calls on built trials, and once end to end
through the example project `firewall run` tells apart.
"""

from __future__ import annotations

import json
import random
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from builders import make_artefact, make_spec, write_module
from click.testing import CliRunner
from statsmodels.tools.sm_exceptions import ConvergenceWarning

from firewall import judging
from firewall.cli import main as cli
from firewall.config import EvalEntry
from firewall.pipeline import rejudge
from firewall.pipeline.stages import judge as decide_report
from firewall.policy import Status, decide
from firewall.report.html import render_html
from firewall.runner import Runner, Task, judged
from firewall.runner.judgement import OUTPUT_KEPT_CHARS, Judged, Judgement
from firewall.runner.seeds import judge_seed
from firewall.runner.trial import TrialRecord

REPO = Path(__file__).resolve().parents[1]


def judged_trials(
    matrix: Sequence[Sequence[float]], *, items: Sequence[Sequence[dict[str, float]]] = ()
) -> list[TrialRecord]:
    """Trial i: output ``out-i`` judged ``matrix[i]``, its score their mean."""
    records = []
    for index, scores in enumerate(matrix):
        made = [
            Judgement(seed=j, score=s, passed=s >= 0.8, items=items[index][j] if items else {})
            for j, s in enumerate(scores)
        ]
        payload, error = judged.combined(
            {}, Judged(judge="j:j", output=f"out-{index}", judgements=made)
        )
        assert error is None and payload is not None
        records.append(
            TrialRecord(
                index=index,
                seed=100 + index,
                score=payload["score"],
                passed=payload.get("passed", payload["score"] >= 0.8),
                items=payload.get("items", {}),
                judged=Judged(judge="j:j", output=f"out-{index}", judgements=made),
            )
        )
    return records


def draw(k: int, j: int, model_sd: float, judge_sd: float, seed: int) -> list[list[float]]:
    rng = random.Random(seed)
    means = [0.8 + rng.gauss(0, model_sd) for _ in range(k)]
    return [[m + rng.gauss(0, judge_sd) for _ in range(j)] for m in means]


# --- the split --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_the_split_is_statsmodels_one_way_random_effects_fit(seed: int) -> None:
    matrix = draw(8, 3, 0.08, 0.05, seed)
    found = judging.one_way(matrix)
    assert found is not None
    # In tenths: statsmodels warns of a boundary below a variance of 0.01, ours are smaller.
    frame = pd.DataFrame(
        [(f"o{i}", 10 * x) for i, row in enumerate(matrix) for x in row], columns=["output", "y"]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # at the boundary: checked below
        fit = smf.mixedlm("y ~ 1", frame, groups=frame["output"]).fit(reml=True)
    between, within = float(fit.cov_re.iloc[0, 0]) / 100, float(fit.scale) / 100
    if between <= 1e-9:  # REML at its boundary: the moment estimate is floored there too
        assert found[0] == 0.0
        return
    assert found[0] == pytest.approx(between, rel=1e-4)
    assert found[1] == pytest.approx(within, rel=1e-4)


def test_unbalanced_groups_use_the_moment_estimator_with_n0() -> None:
    groups = [[0.1, 0.2, 0.3], [0.5, 0.6], [0.9]]
    between, within = judging.one_way(groups) or (None, None)
    values = np.concatenate(groups)
    n = np.array([len(g) for g in groups])
    means = np.array([np.mean(g) for g in groups])
    msb = float(np.sum(n * (means - values.mean()) ** 2) / 2)
    msw = float(sum(np.sum((np.array(g) - np.mean(g)) ** 2) for g in groups) / (6 - 3))
    n0 = (6 - np.sum(n**2) / 6) / 2
    assert within == pytest.approx(msw)
    assert between == pytest.approx((msb - msw) / n0)


def test_no_split_without_a_second_judgement_of_any_output() -> None:
    assert judging.split(judged_trials([[0.8], [0.6], [0.9]])) is None
    assert judging.split(judged_trials([[0.8, 0.7]])) is None


def test_binary_items_are_split_per_item_on_the_scale_of_the_score() -> None:
    rng = random.Random(3)
    marks = [
        [{f"q{m}": float(rng.random() < 0.7) for m in range(10)} for _ in range(3)]
        for _ in range(7)
    ]
    matrix = [[sum(d.values()) / 10 for d in row] for row in marks]
    found = judging.split(judged_trials(matrix, items=marks))
    assert found is not None and found.per_item
    per_item = [
        judging.one_way([[row[j][f"q{m}"] for j in range(3)] for row in marks]) for m in range(10)
    ]
    assert found.judge == pytest.approx(sum(c[1] for c in per_item if c) / 100)
    assert "per item" in found.text()


def test_the_text_names_the_larger_source_first_with_its_numbers() -> None:
    judge_heavy = judging.split(
        judged_trials([[0.55, 0.9, 0.7], [0.8, 0.6, 0.75], [0.7, 0.85, 0.6]])
    )
    assert judge_heavy is not None and judge_heavy.dominant == "judge"
    assert judge_heavy.text().startswith("judge: ")
    assert "the same output scored 0.55-0.9 across 3 judgements); model: " in judge_heavy.text()
    model_heavy = judging.split(
        judged_trials([[0.5, 0.51, 0.5], [0.9, 0.9, 0.91], [0.7, 0.7, 0.71]])
    )
    assert model_heavy is not None and model_heavy.dominant == "model"
    assert model_heavy.text().startswith("model: ")


# --- the decision ----------------------------------------------------------------------


def test_a_steady_model_with_a_noisy_judge_is_quarantined_naming_the_judge() -> None:
    spec = make_spec(judge="j:j", judge_repeats_max=3, threshold=0.6, pass_score=0.6)
    decision = decide(spec, judged_trials(draw(7, 3, 0.0, 0.08, 1)))
    assert decision.status is Status.QUARANTINE
    assert decision.reason.startswith("the judge scatters alone")
    assert re.search(r"\(k=7\); judge: 9\d% of the variance", decision.reason)


def test_a_noisy_model_with_a_steady_judge_is_quarantined_naming_the_model() -> None:
    spec = make_spec(judge="j:j", threshold=0.6, pass_score=0.6)
    decision = decide(spec, judged_trials(draw(7, 3, 0.12, 0.005, 2)))
    assert decision.status is Status.QUARANTINE
    assert decision.reason.startswith("spread beyond flakiness ")
    assert re.search(r"; model: (9\d|100)% of the variance .*; judge: \d%$", decision.reason)


def test_a_stable_eval_with_a_judge_is_judged_once_and_decided_as_before() -> None:
    spec = make_spec(judge="j:j", threshold=0.6, pass_score=0.6)
    stable = judged_trials(draw(7, 1, 0.002, 0.002, 3))
    assert not rejudge.unclear(spec, stable)
    assert rejudge.wanted([spec], {spec.id: stable}) == []
    plain = make_spec(threshold=0.6, pass_score=0.6)
    assert decide(spec, stable).reason == decide(plain, stable).reason


def test_an_unclear_probe_asks_for_judgements_up_to_the_most() -> None:
    spec = make_spec(judge="j:j", judge_repeats_max=4, threshold=0.6, pass_score=0.6)
    unstable = judged_trials(draw(7, 1, 0.0, 0.1, 4))
    assert rejudge.unclear(spec, unstable)
    asked = rejudge.wanted([spec], {spec.id: unstable})
    assert [(trial.index, more) for _, trial, more in asked] == [(i, 3) for i in range(7)]
    stable = judged_trials(draw(7, 1, 0.002, 0.002, 3))
    assert len(rejudge.wanted([spec], {spec.id: stable}, always={spec.id})) == 7


def test_the_hint_names_the_judge_and_what_to_pin() -> None:
    spec = make_spec(judge="j:j", threshold=0.6, pass_score=0.6)
    report = decide_report(spec, judged_trials(draw(7, 3, 0.0, 0.08, 1)))
    assert report.hints[0].kind.value == "judge"
    assert "temperature 0" in report.hints[0].cause and "snapshot" in report.hints[0].cause


# --- combining judgements -------------------------------------------------------------


def test_a_judge_that_cannot_answer_makes_the_trial_an_error() -> None:
    made = [Judgement(seed=1, score=0.9), Judgement(seed=2, error="judge reported: 503")]
    payload, error = judged.combined({}, Judged(judge="m:j", output="x", judgements=made))
    assert payload is None
    assert error == "judge m:j, judgement 1 (seed 2): judge reported: 503"


def test_judgements_combine_into_the_mean_and_the_majority() -> None:
    made = [Judgement(seed=s, score=v, passed=v >= 0.5) for s, v in enumerate((0.4, 0.6, 0.8))]
    payload, _ = judged.combined(
        {"metrics": {"tokens": 3.0}}, Judged(judge="m:j", output="x", judgements=made)
    )
    assert payload == {"metrics": {"tokens": 3.0}, "score": pytest.approx(0.6), "passed": True}


def test_a_long_output_is_kept_cut_and_judged_whole() -> None:
    kept = Judged.of("m:j", "x" * (OUTPUT_KEPT_CHARS + 10))
    assert kept.output_chars == OUTPUT_KEPT_CHARS + 10
    assert isinstance(kept.output, str) and len(kept.output) == OUTPUT_KEPT_CHARS + 1
    assert kept.whole == "x" * (OUTPUT_KEPT_CHARS + 10)


def test_judge_seeds_are_derived_from_the_trial_seed() -> None:
    assert judge_seed(5, 0) != judge_seed(5, 1) != judge_seed(6, 1)
    assert 0 <= judge_seed(5, 0) < 2**31


# --- the config ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"judge_repeats": 2}, "apply to evals with a `judge`"),
        ({"judge": "m:j", "judge_repeats": 4, "judge_repeats_max": 3}, "must be at least"),
        (
            {"judge": "m:j", "command": "x", "python": None, "result": "exit-code"},
            "yields an output",
        ),
        ({"judge": "not a target"}, "judge"),
    ],
)
def test_judge_keys_are_checked(entry: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EvalEntry.model_validate({"id": "e", "python": "m:f", **entry})


# --- end to end ----------------------------------------------------------------------------

PROJECT = """
import json, random

def gen(seed):
    return "reply-%d" % random.Random(seed).randint(0, 1)

def gen_scored(seed):
    return {"output": "x", "score": 0.9}

def judge(output, seed, trial):
    return {"score": 0.5 + 0.4 * int(output[-1]), "fields": {"trial": trial}}

def broken_judge(output, seed):
    raise RuntimeError("judge API: 503")
"""


def _run(tmp_path: Path, spec_target: str, judge: str, command: bool = False) -> list[TrialRecord]:
    write_module(tmp_path, "project", PROJECT)
    kind = (
        {"kind": "command", "target": spec_target}
        if command
        else {"kind": "python", "target": spec_target}
    )
    spec = make_spec(**kind, judge=judge, judge_repeats=2, judge_repeats_max=3)
    return Runner(concurrency=2, cwd=tmp_path).run([Task(spec, i, 10 + i, 3) for i in range(3)])


def test_a_python_eval_yields_an_output_its_judge_scores(tmp_path: Path) -> None:
    records = _run(tmp_path, "project:gen", "project:judge")
    for record in records:
        assert record.error is None and record.judged is not None
        assert len(record.judged.judgements) == 2
        assert [j.seed for j in record.judged.judgements] == [
            judge_seed(record.seed, n) for n in (0, 1)
        ]
        assert record.score == pytest.approx(0.5 + 0.4 * int(str(record.judged.output)[-1]))
    data = json.loads(records[0].model_dump_json())
    assert {"judge", "output", "judgements"} <= set(data["judged"])


def test_a_command_eval_yields_an_output_in_its_result_json(tmp_path: Path) -> None:
    command = 'echo \'{"output": "reply-1", "metrics": {"tokens": 5}}\''
    records = _run(tmp_path, command, "project:judge", command=True)
    assert [r.score for r in records] == [pytest.approx(0.9)] * 3
    assert records[0].metrics == {"tokens": 5.0}


def test_a_judge_that_raises_errs_the_trial_and_a_scored_output_is_refused(tmp_path: Path) -> None:
    broken = _run(tmp_path, "project:gen", "project:broken_judge")
    assert all(r.error and "judge project:broken_judge, judgement 0" in r.error for r in broken)
    assert all("503" in (r.error or "") for r in broken)
    scored = _run(tmp_path, "project:gen_scored", "project:judge")
    assert all("no `score`" in (r.error or "") for r in scored)


def test_rejudging_adds_judgements_without_generating_again(tmp_path: Path) -> None:
    records = _run(tmp_path, "project:gen", "project:judge")
    spec = make_spec(
        kind="python", target="project:gen", judge="project:judge", judge_repeats_max=3
    )
    (tmp_path / "project.py").write_text(
        PROJECT.replace("def gen(seed):", "def gen(seed):\n    raise SystemExit")
    )
    again = judged.rejudge([(spec, r, 1) for r in records], cwd=tmp_path, concurrency=2)
    assert [len(r.judged.judgements) for r in again if r.judged] == [3, 3, 3]
    assert [r.judged.output for r in again if r.judged] == [
        r.judged.output for r in records if r.judged
    ]


def test_replay_shows_the_output_and_each_judgement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_module(tmp_path, "project", PROJECT)
    (tmp_path / "firewall.toml").write_text(
        '[[evals]]\nid = "judged"\npython = "project:gen"\njudge = "project:judge"\n'
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["replay", "judged", "--seed", "11"], catch_exceptions=False)
    assert "# output:\n#   reply-" in result.output
    for number in range(3):  # judge_repeats_max, the default 3
        assert f"judgement {number} (seed {judge_seed(11, number)}) by project:judge: score" in (
            result.output
        )


def test_the_example_tells_the_model_from_the_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "--dry-run",
            "--no-issues",
            "--config",
            "examples/judge/firewall.toml",
            "--format",
            "json",
        ],
        catch_exceptions=False,
    )
    data = json.loads(result.stdout)
    reasons = {e["id"]: (e["status"], e["reason"]) for e in data["evals"]}
    assert reasons["reply-noisy-judge"][0] == "quarantine"
    assert reasons["reply-noisy-judge"][1].startswith("the judge scatters alone")
    assert reasons["reply-sampled-model"][0] == "quarantine"
    assert "; model: " in reasons["reply-sampled-model"][1]
    assert reasons["reply-sampled-model"][1].index("model:") < reasons["reply-sampled-model"][
        1
    ].index("judge:")


def test_the_strip_plot_draws_each_outputs_judgements_as_a_small_range() -> None:
    spec = make_spec(judge="j:j", threshold=0.6, pass_score=0.6)
    report = decide_report(
        spec, judged_trials([[0.55, 0.9, 0.7], [0.8, 0.6, 0.75], [0.7, 0.85, 0.6]])
    )
    page = render_html(make_artefact(report))
    assert page.count('class="judged"') == 3 * (1 + 3)  # a span and three ticks per output
    assert "judged 0.55, 0.9, 0.7" in page
