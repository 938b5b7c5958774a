"""firewall.spec: an eval's settings resolved (its own, else the global ones), and the
warnings about gates that cannot be met."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import invoke_split, make_spec

from firewall.config import parse_eval_options, parse_settings
from firewall.errors import ConfigError
from firewall.spec import EvalSpec, Source, warnings_for

SOURCE = Source(file="firewall.toml", line=3)


def resolved(table: dict[str, Any], **entry: Any) -> EvalSpec:
    settings = parse_settings(
        {**table, "evals": [{"id": "e", "command": "true", **entry}]}, source="f"
    )
    return EvalSpec.resolve(settings.evals[0], settings, SOURCE)


def test_the_new_settings_resolve_to_the_global_ones_by_default() -> None:
    spec = resolved({})

    assert (spec.min_scored, spec.adaptive, spec.max_k, spec.regression) == (3, True, 15, None)


def test_global_new_settings_reach_the_spec() -> None:
    spec = resolved({"min_scored": 2, "adaptive": False, "max_k": 9})

    assert (spec.min_scored, spec.adaptive, spec.max_k) == (2, False, 9)


def test_the_eval_own_new_settings_win() -> None:
    spec = resolved(
        {"min_scored": 2, "adaptive": False, "max_k": 9},
        min_scored=4,
        adaptive=True,
        max_k=25,
        regression={"max_drop": 0.02},
    )

    assert (spec.min_scored, spec.adaptive, spec.max_k) == (4, True, 25)
    assert spec.regression is not None and spec.regression.max_drop == 0.02


def test_a_default_max_k_never_stands_below_the_eval_k() -> None:
    assert resolved({}, k=40).max_k == 40
    assert resolved({"k": 20}).max_k == 20
    assert make_spec(k=30).max_k == 30 and make_spec(k=7).max_k == 15


def test_a_decorated_eval_whose_k_is_above_the_configured_max_k_is_a_config_error() -> None:
    settings = parse_settings({"max_k": 10}, source="f")
    entry = parse_eval_options({"id": "e", "python": "evals.x:f", "k": 12}, source="evals/x.py:4")

    with pytest.raises(ConfigError) as caught:
        EvalSpec.resolve(entry, settings, Source(file="evals/x.py", line=4))

    assert str(caught.value) == (
        "evals/x.py:4: @firewall.eval k: must be <= max_k (10, the global setting), "
        "or set this eval's max_k (got 12)"
    )


def test_a_decorated_eval_own_max_k_below_its_k_is_refused_when_its_options_are_read() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_eval_options({"id": "e", "python": "m:f", "k": 12, "max_k": 5}, source="x.py:1")

    assert "x.py:1: @firewall.eval max_k: must be >= k (12)" in str(caught.value)


def test_min_scored_above_k_warns_that_every_decision_is_error() -> None:
    (note,) = warnings_for(make_spec(k=3, min_scored=5))

    assert note.startswith("min_scored 5 > k=3")
    assert "every decision is ERROR" in note


def test_min_scored_that_cuts_max_errors_short_warns() -> None:
    (note,) = warnings_for(make_spec(k=7, max_errors=5, min_scored=3))

    assert note == "min_scored 3 with k=7 tolerates only 4 errored trials, fewer than max_errors 5"


def test_the_default_settings_warn_of_nothing() -> None:
    assert warnings_for(make_spec()) == []
    assert warnings_for(make_spec(k=40)) == []


def test_firewall_list_shows_the_new_settings(project: Path) -> None:
    (project / "firewall.toml").write_text(
        "k = 5\nmax_k = 9\nadaptive = false\n\n"
        '[[evals]]\nid = "triage"\ncommand = "true"\nmin_scored = 4\n'
        "regression = { max_drop = 0.05 }\n",
        encoding="utf-8",
    )

    result = invoke_split("list", "--format", "json")

    assert result.exit_code == 0, result.stderr
    (entry,) = json.loads(result.stdout)
    assert (entry["min_scored"], entry["adaptive"], entry["max_k"]) == (4, False, 9)
    assert entry["regression"] == {"max_drop": 0.05}
    assert invoke_split("list").exit_code == 0


def test_firewall_list_refuses_a_max_k_below_k_with_exit_code_2(project: Path) -> None:
    (project / "firewall.toml").write_text(
        'k = 9\n\n[[evals]]\nid = "triage"\ncommand = "true"\nmax_k = 5\n', encoding="utf-8"
    )

    result = invoke_split("list")

    assert result.exit_code == 2
    assert "firewall.toml: evals[0] (id 'triage').max_k: must be >= k (9" in result.stderr
