"""firewall.config: where the configuration comes from, its defaults, every way to get it wrong."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from firewall.config import parse_settings
from firewall.configfile import load_config
from firewall.errors import ConfigError, FirewallError

MINIMAL_EVAL = '[[evals]]\nid = "triage"\ncommand = "python evals/triage.py --seed {seed}"\n'


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def config_error(table: dict[str, Any], source: str = "firewall.toml") -> str:
    with pytest.raises(ConfigError) as caught:
        parse_settings(table, source=source)
    return str(caught.value)


def load_error(cwd: Path, explicit: Path | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(explicit, cwd)
    assert caught.value.exit_code == 2
    return str(caught.value)


# --- where the configuration comes from --------------------------------------------


def test_firewall_toml_is_read_with_keys_at_top_level(project: Path) -> None:
    write(project / "firewall.toml", "k = 9\n" + MINIMAL_EVAL)

    loaded = load_config(None, project)

    assert loaded.path == project / "firewall.toml"
    assert loaded.prefix == ""
    assert loaded.settings.k == 9
    assert [entry.id for entry in loaded.settings.evals] == ["triage"]


def test_pyproject_tool_firewall_table_is_read(project: Path) -> None:
    write(
        project / "pyproject.toml",
        """\
        [project]
        name = "demo"

        [tool.firewall]
        k = 11
        threshold = 0.85

        [[tool.firewall.evals]]
        id = "refusals"
        python = "evals.safety:refusal_rate"
        min_pass_rate = 0.9
        """,
    )

    loaded = load_config(None, project)

    assert loaded.prefix == "tool.firewall."
    assert (loaded.settings.k, loaded.settings.threshold) == (11, 0.85)
    assert loaded.settings.evals[0].python == "evals.safety:refusal_rate"
    assert loaded.settings.evals[0].min_pass_rate == 0.9


def test_firewall_toml_wins_over_pyproject(project: Path) -> None:
    write(project / "pyproject.toml", "[tool.firewall]\nk = 11\n")
    write(project / "firewall.toml", "k = 5\n")

    assert load_config(None, project).settings.k == 5


@pytest.mark.parametrize("name", ["custom.toml", "pyproject.toml"])
def test_explicit_config_path_names_either_kind_of_file(project: Path, name: str) -> None:
    write(project / "firewall.toml", "k = 5\n")  # ignored: --config wins
    other = project / "conf"
    other.mkdir()
    text = "[tool.firewall]\nk = 13\n" if name == "pyproject.toml" else "k = 13\n"
    path = write(other / name, text)

    loaded = load_config(path, project)

    assert loaded.path == path
    assert loaded.settings.k == 13


def test_eval_source_lines_are_recorded(project: Path) -> None:
    write(project / "firewall.toml", "k = 7\n\n" + MINIMAL_EVAL)

    assert load_config(None, project).eval_lines == {"triage": 4}


# --- defaults ------------------------------------------------------------------------


def test_defaults_follow_the_contract(project: Path) -> None:
    write(project / "firewall.toml", "")

    settings = load_config(None, project).settings

    assert settings.k == 7
    assert settings.threshold == 0.8
    assert settings.flakiness == 0.03
    assert settings.outlier_fence == 3.0
    assert settings.timeout == 300
    assert settings.concurrency == 4
    assert settings.max_errors == 0
    assert settings.registry == "quarantine.json"
    assert settings.history == ".firewall/history.jsonl"
    assert settings.report == "firewall-report.json"
    assert settings.paths == []
    assert settings.evals == []
    assert (settings.nightly.k, settings.nightly.release_after, settings.nightly.review_days) == (
        15,
        3,
        30,
    )
    assert settings.github.issues is True
    assert settings.github.labels == ["flaky-eval"]


def test_eval_defaults() -> None:
    entry = parse_settings({"evals": [{"id": "e", "command": "true"}]}, source="f").evals[0]

    assert entry.result == "json"
    assert entry.confidence == 0.95
    assert entry.blocking is True
    assert entry.tags == []
    assert entry.min_pass_rate is None and entry.pass_score is None
    assert entry.k is None and entry.threshold is None  # inherit the global setting


@pytest.mark.parametrize("seed", [0, 20261129, "random"])
def test_seed_is_a_non_negative_int_or_random(seed: int | str) -> None:
    assert parse_settings({"seed": seed}, source="f").seed == seed


def test_the_documented_example_configuration_is_valid(project: Path) -> None:
    write(
        project / "pyproject.toml",
        """\
        [tool.firewall]
        k = 7
        threshold = 0.80
        flakiness = 0.03
        outlier_fence = 3.0
        seed = 20261129
        timeout = 300
        concurrency = 4
        max_errors = 0
        registry = "quarantine.json"
        history = ".firewall/history.jsonl"
        report = "firewall-report.json"
        paths = ["evals"]

        [tool.firewall.nightly]
        k = 15
        release_after = 3
        review_days = 30

        [tool.firewall.github]
        issues = true
        labels = ["flaky-eval"]

        [[tool.firewall.evals]]
        id = "triage-accuracy"
        command = "python evals/triage.py --seed {seed}"
        threshold = 0.85

        [[tool.firewall.evals]]
        id = "refusals"
        python = "evals.safety:refusal_rate"
        k = 30
        min_pass_rate = 0.90
        budgets = { p95_latency_ms = 2000, mean_tokens = 500, mean_cost_usd = 0.01 }
        result = "json"
        tags = ["safety"]
        owner = "@octo-org/safety"
        blocking = false
        """,
    )

    settings = load_config(None, project).settings

    assert [entry.id for entry in settings.evals] == ["triage-accuracy", "refusals"]
    assert settings.evals[1].budgets.p95_latency_ms == 2000


# --- errors: every one names the file, the key and what is allowed -----------------


def test_config_error_is_a_firewall_error_with_exit_code_2() -> None:
    assert issubclass(ConfigError, FirewallError)
    assert ConfigError("x").exit_code == 2


@pytest.mark.parametrize(
    ("table", "key", "allowed"),
    [
        ({"kk": 7}, "kk", "threshold"),
        ({"nightly": {"relase_after": 2}}, "nightly.relase_after", "release_after"),
        ({"github": {"issue": False}}, "github.issue", "issues"),
        ({"evals": [{"id": "e", "command": "true", "treshold": 0.9}]}, "treshold", "threshold"),
        (
            {"evals": [{"id": "e", "command": "true", "budgets": {"p99_latency_ms": 9}}]},
            "budgets.p99_latency_ms",
            "p95_latency_ms",
        ),
    ],
)
def test_unknown_keys_are_named_with_the_allowed_ones(
    table: dict[str, Any], key: str, allowed: str
) -> None:
    message = config_error(table)

    assert message.startswith("firewall.toml: ")
    assert key in message
    assert "unknown key" in message
    assert allowed in message


@pytest.mark.parametrize(
    ("table", "key", "allowed"),
    [
        ({"k": "7"}, "k", "integer"),
        ({"k": 7.5}, "k", "integer"),
        ({"k": True}, "k", "integer"),
        ({"threshold": "high"}, "threshold", "number"),
        ({"timeout": "5m"}, "timeout", "number"),
        ({"paths": "evals"}, "paths", "list"),
        ({"github": {"issues": "yes"}}, "github.issues", "bool"),
        ({"evals": {"id": "e"}}, "evals", "list"),
        ({"evals": [{"id": "e", "command": "true", "tags": "nightly"}]}, "tags", "list"),
        ({"evals": [{"id": "e", "command": "true", "blocking": 0}]}, "blocking", "bool"),
        ({"evals": [{"id": "e", "command": "true", "result": "exit"}]}, "result", "exit-code"),
    ],
)
def test_wrong_types_are_named_with_what_is_allowed(
    table: dict[str, Any], key: str, allowed: str
) -> None:
    message = config_error(table)

    assert message.startswith("firewall.toml: ")
    assert f"{key}:" in message
    assert allowed in message


@pytest.mark.parametrize(
    ("table", "key", "allowed"),
    [
        ({"k": 2}, "k", "greater than or equal to 3"),
        ({"nightly": {"k": 1}}, "nightly.k", "greater than or equal to 3"),
        ({"evals": [{"id": "e", "command": "true", "k": 2}]}, "k", "greater than or equal to 3"),
        ({"threshold": 1.2}, "threshold", "less than or equal to 1"),
        ({"threshold": -0.1}, "threshold", "greater than or equal to 0"),
        ({"flakiness": 1.5}, "flakiness", "less than or equal to 1"),
        ({"evals": [{"id": "e", "command": "true", "threshold": 2}]}, "threshold", "1"),
        ({"evals": [{"id": "e", "command": "true", "min_pass_rate": 1.1}]}, "min_pass_rate", "1"),
        ({"evals": [{"id": "e", "command": "true", "pass_score": -1}]}, "pass_score", "0"),
        (
            {"evals": [{"id": "e", "command": "true", "confidence": 1}]},
            "confidence",
            "less than or equal to 0.9999",
        ),
        ({"timeout": 1e10}, "timeout", "less than or equal to 604800"),
        ({"outlier_fence": float("inf")}, "outlier_fence", "less than or equal to 100"),
        ({"timeout": 0}, "timeout", "greater than 0"),
        ({"concurrency": 0}, "concurrency", "greater than or equal to 1"),
        ({"max_errors": -1}, "max_errors", "greater than or equal to 0"),
        ({"outlier_fence": -1}, "outlier_fence", "greater than or equal to 0"),
    ],
)
def test_impossible_values_are_named_with_the_allowed_range(
    table: dict[str, Any], key: str, allowed: str
) -> None:
    message = config_error(table)

    assert message.startswith("firewall.toml: ")
    assert f"{key}:" in message
    assert allowed in message


@pytest.mark.parametrize(
    "entry",
    [
        {"id": "e"},
        {"id": "e", "command": "true", "python": "evals.x:f"},
    ],
)
def test_an_eval_needs_exactly_one_of_command_or_python(entry: dict[str, Any]) -> None:
    message = config_error({"evals": [entry]})

    assert message.startswith("firewall.toml: evals[0] (id 'e')")
    assert "exactly one of `command` or `python`" in message


def test_exit_code_result_is_for_command_evals_only() -> None:
    message = config_error({"evals": [{"id": "e", "python": "m:f", "result": "exit-code"}]})

    assert "evals[0] (id 'e')" in message and "command" in message


def test_duplicate_eval_ids_are_refused() -> None:
    message = config_error(
        {"evals": [{"id": "dup", "command": "true"}, {"id": "dup", "command": "false"}]}
    )

    assert message.startswith("firewall.toml: ")
    assert "'dup'" in message and "unique" in message


@pytest.mark.parametrize("bad_id", ["has space", "semi;colon", "dollar$", "", "tab\tid", "é"])
def test_eval_ids_may_use_only_letters_digits_and_dot_underscore_slash_dash(bad_id: str) -> None:
    message = config_error({"evals": [{"id": bad_id, "command": "true"}]})

    assert "evals[0]" in message and ".id:" in message
    assert "letters, digits and . _ / -" in message
    assert repr(bad_id) in message


@pytest.mark.parametrize("good_id", ["a", "triage-accuracy", "suite/case_1.v2", "A.B-C_D/E"])
def test_eval_ids_in_the_allowed_alphabet_are_accepted(good_id: str) -> None:
    assert parse_settings({"evals": [{"id": good_id, "command": "true"}]}, source="f")


def test_python_target_must_be_module_colon_function() -> None:
    message = config_error({"evals": [{"id": "e", "python": "evals.safety.refusal_rate"}]})

    assert "python:" in message and "module:function" in message


@pytest.mark.parametrize("seed", [-1, 1.5, True, "rand", "20261129"])
def test_bad_seed_is_refused(seed: Any) -> None:
    message = config_error({"seed": seed})

    assert "seed:" in message
    assert 'non-negative integer or "random"' in message
    assert repr(seed) in message


def test_every_problem_is_reported_not_only_the_first() -> None:
    message = config_error({"k": 1, "threshold": 3, "bogus": True})

    assert "k:" in message and "threshold:" in message and "bogus:" in message


def test_errors_in_pyproject_carry_the_tool_firewall_prefix(project: Path) -> None:
    write(
        project / "pyproject.toml",
        """\
        [tool.firewall]
        k = "7"

        [[tool.firewall.evals]]
        id = "refusals"
        python = "evals.safety:refusal_rate"
        budgets = { p99 = 3 }
        """,
    )

    message = load_error(project)

    assert "pyproject.toml: tool.firewall.k: " in message
    assert "tool.firewall.evals[0] (id 'refusals').budgets.p99: unknown key" in message


def test_errors_in_firewall_toml_name_that_file(project: Path) -> None:
    write(project / "firewall.toml", "k = 2\n")

    message = load_error(project)

    assert message.startswith("firewall.toml: k: ")
    assert "3" in message


def test_errors_in_an_explicit_config_name_that_file(project: Path) -> None:
    path = write(project / "ci.toml", "flakiness = 2\n")

    message = load_error(project, path)

    assert "ci.toml: flakiness:" in message


def test_invalid_toml_names_the_file(project: Path) -> None:
    write(project / "firewall.toml", "k = = 7\n")

    message = load_error(project)

    assert "firewall.toml" in message
    assert "not valid TOML" in message


@pytest.mark.parametrize("text", ["[project]\nname = 'demo'\n", "tool = 3\n", ""])
def test_pyproject_without_tool_firewall_table_is_an_error(project: Path, text: str) -> None:
    write(project / "pyproject.toml", text)

    message = load_error(project)

    assert "pyproject.toml" in message
    assert "[tool.firewall]" in message


def test_no_configuration_at_all_is_an_error_that_says_what_to_create(project: Path) -> None:
    message = load_error(project)

    assert str(project) in message
    assert "firewall.toml" in message and "[tool.firewall]" in message


def test_an_explicit_config_that_does_not_exist_is_an_error(project: Path) -> None:
    message = load_error(project, project / "missing.toml")

    assert "missing.toml" in message


def test_top_level_that_is_not_a_table_is_an_error(project: Path) -> None:
    write(project / "pyproject.toml", "[tool]\nfirewall = 3\n")

    message = load_error(project)

    assert "pyproject.toml" in message and "tool.firewall" in message


def test_a_config_that_is_not_utf8_names_the_file(project: Path) -> None:
    (project / "firewall.toml").write_bytes(b"k = 7\n\xff\xfe\n")

    message = load_error(project)

    assert "firewall.toml" in message


# --- [github] labels and [state] ---------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "index"), [(["flaky, eval"], 0), (["flaky-eval", ""], 1), (["   "], 0)]
)
def test_a_label_must_have_a_name_and_no_comma(labels: list[str], index: int) -> None:
    message = config_error({"github": {"labels": labels}})
    assert message.startswith(f"firewall.toml: github.labels[{index}]: ")
    assert "not blank and has no comma" in message or "at least 1 character" in message


def test_a_label_longer_than_github_allows_is_refused() -> None:
    assert "at most 50 characters" in config_error({"github": {"labels": ["x" * 51]}})


def test_state_defaults_to_the_origin_remote_and_an_orphan_branch() -> None:
    state = parse_settings({}, source="firewall.toml").state
    assert (state.remote, state.branch) == ("origin", "firewall-state")
    assert parse_settings({"state": {"remote": ""}}, source="x").state.remote == ""


@pytest.mark.parametrize("branch", ["-x", "a..b", "a//b", "state.lock", "state/", "with space"])
def test_state_branch_must_be_a_git_branch_name(branch: str) -> None:
    message = config_error({"state": {"branch": branch}})
    assert message.startswith("firewall.toml: state.branch: ") and "git branch name" in message


def test_state_remote_must_be_a_remote_name() -> None:
    message = config_error({"state": {"remote": "git@host:repo"}})
    assert message.startswith("firewall.toml: state.remote: ") and "name of a git remote" in message


# --- min_scored, adaptive, max_k, regression (contract §2) -------------------------------


def test_the_new_keys_default_as_the_contract_says() -> None:
    settings = parse_settings({"evals": [{"id": "e", "command": "true"}]}, source="f")
    entry = settings.evals[0]

    assert (settings.min_scored, settings.adaptive, settings.max_k) == (3, True, 15)
    assert (entry.min_scored, entry.adaptive, entry.max_k) == (None, None, None)  # inherit
    assert entry.regression is None


def test_the_new_keys_are_read_globally_and_per_eval(project: Path) -> None:
    write(
        project / "pyproject.toml",
        """\
        [tool.firewall]
        k = 7
        max_errors = 2
        min_scored = 4
        adaptive = false
        max_k = 21

        [[tool.firewall.evals]]
        id = "triage-accuracy"
        command = "python evals/triage.py --seed {seed}"
        min_scored = 5
        adaptive = true
        max_k = 30
        regression = { max_drop = 0.01 }
        """,
    )

    settings = load_config(None, project).settings

    assert (settings.min_scored, settings.adaptive, settings.max_k) == (4, False, 21)
    entry = settings.evals[0]
    assert (entry.min_scored, entry.adaptive, entry.max_k) == (5, True, 30)
    assert entry.regression is not None and entry.regression.max_drop == 0.01


@pytest.mark.parametrize(
    ("table", "key", "allowed"),
    [
        ({"min_scored": 0}, "min_scored", "greater than or equal to 1"),
        ({"min_scored": 2.5}, "min_scored", "integer"),
        (
            {"evals": [{"id": "e", "command": "true", "min_scored": 0}]},
            "min_scored",
            "greater than or equal to 1",
        ),
        ({"adaptive": "yes"}, "adaptive", "bool"),
        ({"adaptive": 1}, "adaptive", "bool"),
        ({"evals": [{"id": "e", "command": "true", "adaptive": "no"}]}, "adaptive", "bool"),
        ({"max_k": 2}, "max_k", "greater than or equal to 3"),
        ({"max_k": 10_001}, "max_k", "less than or equal to 10000"),
        ({"max_k": "15"}, "max_k", "integer"),
        (
            {"evals": [{"id": "e", "command": "true", "max_k": 2}]},
            "max_k",
            "greater than or equal to 3",
        ),
        (
            {"evals": [{"id": "e", "command": "true", "regression": {"max_drop": 1.5}}]},
            "regression.max_drop",
            "less than or equal to 1",
        ),
        (
            {"evals": [{"id": "e", "command": "true", "regression": {"max_drop": -0.1}}]},
            "regression.max_drop",
            "greater than or equal to 0",
        ),
        (
            {"evals": [{"id": "e", "command": "true", "regression": {"max_drop": "1%"}}]},
            "regression.max_drop",
            "number",
        ),
        (
            {"evals": [{"id": "e", "command": "true", "regression": {}}]},
            "regression.max_drop",
            "required",
        ),
        (
            {"evals": [{"id": "e", "command": "true", "regression": 0.01}]},
            "regression",
            "expected a table",
        ),
    ],
)
def test_the_new_keys_refuse_what_the_contract_does_not_allow(
    table: dict[str, Any], key: str, allowed: str
) -> None:
    message = config_error(table)

    assert message.startswith("firewall.toml: ")
    assert f"{key}:" in message
    assert allowed in message


def test_an_unknown_key_under_regression_names_the_allowed_one() -> None:
    message = config_error(
        {"evals": [{"id": "e", "command": "true", "regression": {"max_drop": 0.1, "drop": 1}}]}
    )

    assert message == (
        "firewall.toml: evals[0] (id 'e').regression.drop: unknown key; allowed here: max_drop"
    )


def test_regression_is_per_eval_only() -> None:
    assert "regression: unknown key" in config_error({"regression": {"max_drop": 0.1}})


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"k": 9, "max_k": 8}, "firewall.toml: max_k: must be >= k (9)"),
        (
            {"evals": [{"id": "e", "command": "true", "k": 12, "max_k": 10}]},
            "firewall.toml: evals[0] (id 'e').max_k: must be >= k (12)",
        ),
        (
            {"k": 12, "evals": [{"id": "e", "command": "true", "max_k": 10}]},
            "firewall.toml: evals[0] (id 'e').max_k: must be >= k (12, the global setting)",
        ),
        (
            {
                "max_k": 15,
                "evals": [{"id": "ok", "command": "true"}, {"id": "e", "command": "true", "k": 40}],
            },
            "firewall.toml: evals[1] (id 'e').k: must be <= max_k (15, the global setting)",
        ),
    ],
)
def test_max_k_below_the_eval_k_is_an_error_naming_the_key(
    table: dict[str, Any], message: str
) -> None:
    assert config_error(table).startswith(message)


def test_a_max_k_conflict_in_pyproject_carries_the_prefix(project: Path) -> None:
    write(
        project / "pyproject.toml",
        "[tool.firewall]\nk = 12\n\n"
        + MINIMAL_EVAL.replace("[[evals]]", "[[tool.firewall.evals]]")
        + "max_k = 10\n",
    )

    message = load_error(project)

    assert message.startswith("pyproject.toml: tool.firewall.evals[0] (id 'triage').max_k: ")
    assert "must be >= k (12, the global setting)" in message and "(got 10)" in message


def test_an_eval_k_above_the_default_max_k_raises_its_max_k() -> None:
    # max_k left at its default: an eval that asks for 40 trials keeps them (as the example
    # suite's exit-code eval does), and adaptivity may not cut it below.
    settings = parse_settings({"evals": [{"id": "e", "command": "true", "k": 40}]}, source="f")

    assert settings.evals[0].k == 40 and settings.max_k == 15


@pytest.mark.parametrize("bad", ["flaky\neval", "flaky\r", "\x1b[31mred", "tab\there"])
def test_a_label_is_one_line_of_printable_text(bad: str) -> None:
    message = config_error({"github": {"labels": ["flaky-eval", bad]}})
    assert message.startswith("firewall.toml: github.labels[1]: ")
    assert "line break or control character" in message


@pytest.mark.parametrize("bad", ["smoke\n::error::forged", "\x1b[2J", "nul\x00"])
def test_a_tag_is_one_line_of_printable_text(bad: str) -> None:
    entry = {"id": "triage", "command": "true", "tags": ["smoke", bad]}
    message = config_error({"evals": [entry]})
    assert message == (
        "firewall.toml: evals[0] (id 'triage').tags[1]: a tag is one line: no line break or "
        f"control character (got {bad!r})"
    )
    limit = config_error({"limits": [{"tag": bad, "rate": "1/s"}]})
    assert limit.startswith("firewall.toml: limits[0].tag: a tag is one line")


def test_a_decorated_evals_tags_are_one_line_too() -> None:
    from firewall.config import parse_eval_options

    with pytest.raises(ConfigError, match=r"@firewall.eval tags\[0\]: a tag is one line"):
        parse_eval_options({"python": "m:f", "tags": ["a\nb"]}, source="evals/m.py:3")
