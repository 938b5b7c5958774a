"""Inspect AI tasks as evals (`inspect = "file.py@task"`), run offline on Inspect's mockllm.

The tasks below answer through mockllm with outputs that carry their own token
usage: without it mockllm counts tokens with tiktoken, which downloads its
encoding. Inspect's own files (traces, caches) go to the test's directories.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from firewall.cli import main
from firewall.config import Settings
from firewall.errors import ConfigError
from firewall.runner.seeds import trial_seed

TASKS = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match, scorer, mean, Score, Target
from inspect_ai.solver import Generate, TaskState, generate, solver

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


def echo_model(failing):
    """Echoes each sample's word back; the `failing` words, right on even seeds only."""

    def answer(messages, tools, tool_choice, config):
        word = messages[-1].text
        right = word not in failing or config.seed % 2 == 0
        output = ModelOutput.from_content("mockllm/model", word if right else "no idea")
        output.usage = ModelUsage(input_tokens=3, output_tokens=2, total_tokens=5)
        return output

    return get_model("mockllm/model", custom_outputs=answer)


@task
def echo(failing: list[str] = []) -> Task:
    return Task(
        dataset=[Sample(id=word, input=word, target=word) for word in WORDS],
        solver=generate(),
        scorer=match(),
        model=echo_model(failing),
    )


@solver
def copy_target():
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.output = ModelOutput.from_content("none", state.target.text)
        return state

    return solve


@task
def no_model_call() -> Task:
    """Calls no model at all: runs under whatever model it is given."""
    return Task(
        dataset=[Sample(id=word, input=word, target=word) for word in WORDS[:3]],
        solver=copy_target(),
        scorer=match(),
    )


@scorer(metrics=[mean()])
def out_of_ten():
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=7)

    return score


@task
def rated() -> Task:
    return Task(dataset=[Sample(input="a", target="a")], solver=copy_target(), scorer=out_of_ten())


@task
def graded_by(model: str) -> Task:
    """A task whose own argument is called `model` (a grader's, say)."""
    return Task(dataset=[Sample(input="a", target="a")], solver=copy_target(), scorer=match())


@task
def counted() -> Task:
    """mockllm's default output, without usage: Inspect counts its tokens with tiktoken."""
    return Task(dataset=[Sample(input="a", target="a")], solver=generate(), scorer=match())
'''

SEED = 3
FAILING = ["charlie", "delta", "echo", "foxtrot"]


@pytest.fixture
def inspect_project(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytest.importorskip("inspect_ai")
    for name in ("XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "TIKTOKEN_CACHE_DIR"):
        monkeypatch.setenv(name, str(project.parent / f"{project.name}-{name.lower()}"))
    for name in ("INSPECT_EVAL_MODEL", "INSPECT_LOG_DIR"):
        monkeypatch.delenv(name, raising=False)
    (project / "tasks.py").write_text(TASKS, encoding="utf-8")
    return project


def write_config(root: Path, evals: str) -> None:
    header = f"k = 6\nseed = {SEED}\nadaptive = false\nconcurrency = 2\n"
    (root / "firewall.toml").write_text(header + evals, encoding="utf-8")


def inspect_eval(eval_id: str, target: str, extra: str = "") -> str:
    return f'[[evals]]\nid = "{eval_id}"\ninspect = "{target}"\n{extra}\n'


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def evals_of(root: Path) -> dict[str, Any]:
    report = json.loads((root / "firewall-report.json").read_text())
    return {entry["id"]: entry for entry in report["evals"]}


def test_a_stable_task_passes_and_one_whose_samples_flip_together_is_quarantined(
    inspect_project: Path,
) -> None:
    # The failing words fail together on odd seeds: whole trials shift, more than the
    # noise of six items explains. The probe must see both kinds of seed.
    odd = sum(trial_seed(SEED, "flaky", i) % 2 for i in range(6))
    assert 0 < odd < 6
    write_config(
        inspect_project,
        inspect_eval("stable", "tasks.py@echo")
        + inspect_eval(
            "flaky", "tasks.py@echo", f"task_args = {{ failing = {json.dumps(FAILING)} }}"
        )
        + inspect_eval(
            "configured", "tasks.py@no_model_call", 'model = "mockllm/configured"\nk = 3'
        ),
    )

    result = invoke("run")

    assert result.exit_code == 0, result.output
    evals = evals_of(inspect_project)
    assert {eval_id: entry["status"] for eval_id, entry in evals.items()} == {
        "stable": "pass",
        "flaky": "quarantine",
        "configured": "pass",
    }
    stable = evals["stable"]["trials"]
    assert [trial["score"] for trial in stable] == [1.0] * 6
    assert stable[0]["items"] == {word: 1.0 for word in ["alpha", "bravo", *FAILING]}
    assert stable[0]["model_id"] == "mockllm/model"
    assert stable[0]["metrics"]["tokens"] == 30  # the preset 5 tokens, for each of 6 samples
    flaky = evals["flaky"]
    for trial in flaky["trials"]:
        assert trial["score"] == (1.0 if trial["seed"] % 2 == 0 else pytest.approx(2 / 6))
    assert "Cochran" in flaky["reason"]
    assert sorted(flip["case"] for flip in flaky["flips"]) == sorted(FAILING)
    # The config's model reaches Inspect, for a task that names none of its own.
    assert {trial["model_id"] for trial in evals["configured"]["trials"]} == {"mockllm/configured"}
    # Inspect's logs went with the run's scratch directory, not into ./logs.
    assert not (inspect_project / "logs").exists()


def test_a_metric_outside_0_1_errors_and_names_the_metric(inspect_project: Path) -> None:
    write_config(inspect_project, inspect_eval("rated", "tasks.py@rated", "k = 3"))

    result = invoke("run")

    assert result.exit_code == 3, result.output
    [trial, *_] = evals_of(inspect_project)["rated"]["trials"]
    assert "metric out_of_ten/mean is 7.0, outside [0, 1]" in trial["error"]


def test_a_task_argument_named_model_is_told_apart_from_the_eval_s_model(
    inspect_project: Path,
) -> None:
    write_config(
        inspect_project,
        inspect_eval("graded", "tasks.py@graded_by", 'model = "mockllm/model"\nk = 3')
        + inspect_eval(
            "given", "tasks.py@graded_by", 'task_args = { model = "mockllm/grader" }\nk = 3'
        ),
    )

    result = invoke("run")

    evals = evals_of(inspect_project)
    assert result.exit_code == 3, result.output
    error = evals["graded"]["trials"][0]["error"]
    assert "missing 1 required positional argument: 'model'" in error
    assert 'pass it as task_args = { model = "..." }' in error
    assert "not the eval's `model` key, which is Inspect's model" in error
    assert evals["given"]["status"] == "pass", evals["given"]["reason"]


def test_mockllm_offline_says_it_needs_a_tokenizer_and_what_to_do(
    inspect_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Offline for sure: every HTTPS request goes to a proxy on a port nobody listens on.
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    write_config(
        inspect_project,
        inspect_eval("counted", "tasks.py@counted", 'model = "mockllm/model"\nk = 3'),
    )

    result = invoke("run")

    assert result.exit_code == 3, result.output
    error = evals_of(inspect_project)["counted"]["trials"][0]["error"]
    assert "Inspect could not download a tokenizer" in error
    assert "run once with network access" in error and "ModelOutput.usage" in error


def test_list_shows_the_task_its_model_and_arguments(inspect_project: Path) -> None:
    write_config(
        inspect_project,
        inspect_eval(
            "flaky", "tasks.py@echo", 'model = "mockllm/model"\ntask_args = { failing = ["delta"] }'
        ),
    )

    table = invoke("list")
    listed = invoke("list", "--format", "json")

    assert table.exit_code == 0, table.output
    assert "flaky" in table.output and "inspect" in table.output
    [spec] = json.loads(listed.output)
    assert (spec["kind"], spec["target"]) == ("inspect", "tasks.py@echo")
    assert spec["inspect_model"] == "mockllm/model"
    assert spec["task_args"] == {"failing": ["delta"]}


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("tasks.py@ecko", "tasks.py has no @task 'ecko'; did you mean 'echo'?"),
        ("missing.py@echo", "no file missing.py"),
    ],
)
def test_a_task_that_is_not_there_is_exit_2_before_any_trial(
    inspect_project: Path, target: str, problem: str
) -> None:
    write_config(inspect_project, inspect_eval("typo", target))

    result = CliRunner().invoke(main, ["run"])

    assert result.exit_code == 2, result.output
    assert f"eval 'typo': inspect = '{target}': {problem}" in result.output
    assert not (inspect_project / "firewall-report.json").exists()


def config_error(entry: dict[str, Any]) -> str:
    from firewall.config import parse_settings

    with pytest.raises(ConfigError) as caught:
        parse_settings({"evals": [{"id": "e", **entry}]}, source="firewall.toml")
    return str(caught.value)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"inspect": "tasks.py@echo", "python": "m:f"}, "exactly one of"),
        ({"inspect": "tasks.py"}, 'inspect: expected "path/to/file.py@task"'),
        ({"inspect": "tasks.py@echo", "model": "gpt-4o"}, "model: expected an Inspect model"),
        ({"python": "m:f", "model": "openai/gpt-4o"}, "apply to `inspect` evals only"),
        ({"command": "true", "task_args": {"n": 1}}, "apply to `inspect` evals only"),
        ({"inspect": "tasks.py@echo", "result": "exit-code"}, "`command` evals only"),
    ],
)
def test_the_inspect_keys_are_checked_and_named(entry: dict[str, Any], message: str) -> None:
    assert message in config_error(entry)


def test_task_args_must_travel_as_json() -> None:
    import datetime

    when = datetime.date(2026, 1, 1)  # TOML has dates; a task's arguments cannot carry them
    message = config_error({"inspect": "tasks.py@echo", "task_args": {"since": when}})

    assert "evals[0] (id 'e').task_args: task arguments are strings, numbers" in message
    assert Settings.model_validate(
        {"evals": [{"id": "e", "inspect": "t.py@x", "task_args": {"n": [1, {"a": True}]}}]}
    )


def test_the_shipped_example_is_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("inspect_ai")
    monkeypatch.chdir(Path(__file__).resolve().parents[1])

    result = invoke("list", "--config", "examples/inspect/firewall.toml", "--format", "json")

    assert result.exit_code == 0, result.output
    listed = {spec["id"]: spec for spec in json.loads(result.output)}
    assert set(listed) == {"triage-inspect", "triage-inspect-hot"}
    assert listed["triage-inspect-hot"]["task_args"] == {"stand_in": True, "temperature": 1.2}
