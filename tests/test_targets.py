"""A `python = "module:function"` target is found before any trial runs, without running it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from firewall.cli import main
from firewall.discovery import unresolved

MODULE = """\
import json
from pathlib import Path

Path("imported.marker").write_text("the orchestrator ran eval code")


def example_accuracy(seed):
    return 0.9


try:
    from fast import scorer
except ImportError:
    def scorer(seed):
        return 0.5
"""


@pytest.fixture
def evals(project: Path) -> Path:
    package = project / "evals"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "example_eval.py").write_text(MODULE)
    return project


def config(root: Path, target: str) -> None:
    (root / "firewall.toml").write_text(f'k = 3\n[[evals]]\nid = "acc"\npython = "{target}"\n')


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_a_misspelled_function_is_exit_2_with_did_you_mean_before_any_trial(evals: Path) -> None:
    config(evals, "evals.example_eval:exampel_accuracy")
    for command in ("list", "run"):
        result = invoke(command)
        assert result.exit_code == 2, result.output
        assert (
            "eval 'acc': python = 'evals.example_eval:exampel_accuracy': "
            "evals/example_eval.py defines no 'exampel_accuracy'; did you mean 'example_accuracy'?"
        ) in result.output
    assert not (evals / "firewall-report.json").exists()


def test_a_misspelled_module_is_exit_2_with_did_you_mean(evals: Path) -> None:
    config(evals, "evals.exmple_eval:example_accuracy")
    result = invoke("list")
    assert result.exit_code == 2
    assert (
        "no module 'evals.exmple_eval' in the project or on the interpreter's path" in result.output
    )
    assert "did you mean 'evals.example_eval'?" in result.output


@pytest.mark.parametrize("name", ["example_accuracy", "scorer", "json", "Path"])
def test_names_bound_at_the_top_level_resolve_without_running_the_module(
    evals: Path, name: str
) -> None:
    assert unresolved(f"evals.example_eval:{name}", evals) is None
    assert not (evals / "imported.marker").exists()


def test_a_module_that_may_bind_any_name_is_not_second_guessed(evals: Path) -> None:
    (evals / "evals" / "star.py").write_text("from evals.example_eval import *\n")
    (evals / "evals" / "lazy.py").write_text("def __getattr__(name):\n    return None\n")
    assert unresolved("evals.star:anything", evals) is None
    assert unresolved("evals.lazy:anything", evals) is None


def test_installed_modules_resolve_from_the_interpreters_path(project: Path) -> None:
    assert unresolved("json:loads", project) is None
    assert unresolved("json:lods", project) == (
        f"{Path(json.__file__)} defines no 'lods'; did you mean 'loads'?"
    )
