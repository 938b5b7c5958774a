"""The API eval code imports: the decorator, TrialResult and firewall.stats."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import firewall


def test_decorator_keeps_the_function_and_records_options() -> None:
    @firewall.eval(threshold=0.85, k=9, tags=["regression"])
    def triage_accuracy(seed: int) -> float:
        return seed / 10

    @firewall.eval
    def plain(seed: int) -> float:
        return 1.0

    assert triage_accuracy(seed=5) == 0.5
    assert getattr(triage_accuracy, firewall.EVAL_ATTRIBUTE) == {
        "id": "triage-accuracy",
        "threshold": 0.85,
        "k": 9,
        "tags": ["regression"],
    }
    assert getattr(plain, firewall.EVAL_ATTRIBUTE) == {"id": "plain"}


def test_the_public_surface_is_pinned() -> None:
    """What users may import, exactly: a name added or dropped is a decision, made here."""
    assert sorted(firewall.__all__) == [
        "EVAL_ATTRIBUTE",
        "TrialResult",
        "__version__",
        "eval",
        "stats",
    ]
    assert sorted(firewall.stats.__all__) == ["cohen_kappa", "drift_rate", "iqr", "wilson_interval"]
    assert all(callable(getattr(firewall.stats, name)) for name in firewall.stats.__all__)


def test_stats_helpers_compute_what_the_docs_say() -> None:
    low, high = firewall.stats.wilson_interval(18, 20)
    assert (round(low, 4), round(high, 4)) == (0.6990, 0.9721)  # Wilson's, z = 1.96
    assert firewall.stats.iqr([0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(0.2)
    assert firewall.stats.cohen_kappa(["a", "a"], ["a", "a"]) is None  # chance agreement is 1
    assert firewall.stats.cohen_kappa(["a", "b", "a", "b"], ["a", "b", "a", "b"]) == 1.0
    assert firewall.stats.drift_rate(["x", "x", "y", "x"]) == 0.25


def test_the_documented_import_works_in_a_fresh_interpreter() -> None:
    """The README's `from firewall.stats import cohen_kappa`, and no more than the four."""
    code = (
        "import firewall.stats as s\n"
        "from firewall.stats import cohen_kappa, drift_rate, iqr, wilson_interval\n"
        "print(sorted(n for n in vars(s) if not n.startswith('_')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names = proc.stdout.strip()
    assert names == "['annotations', 'cohen_kappa', 'drift_rate', 'iqr', 'wilson_interval']"


def test_trial_result_serialises_only_what_was_set() -> None:
    result = firewall.TrialResult(score=0.5, fields={"category": "billing"})
    assert result.to_json() == {"score": 0.5, "fields": {"category": "billing"}}


def test_decorated_functions_stay_typed_for_users(tmp_path: Path) -> None:
    """`mypy --strict` on a user's eval module: the decorator must not erase types."""
    module = tmp_path / "user_evals.py"
    module.write_text(
        "import firewall\n\n"
        "@firewall.eval(threshold=0.8)\n"
        "def a(seed: int) -> float:\n    return 1.0\n\n"
        "@firewall.eval\n"
        "def b(seed: int) -> float:\n    return 1.0\n\n"
        "total: float = a(seed=1) + b(seed=2)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(module)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
