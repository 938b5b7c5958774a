"""Whether a quarantined id still names a test the project has, whichever door it came by.

A registry entry's id is an eval's, a suite's case (``SUITE/case``, known only once
the suite runs), or a pytest test's (``tests/test_pay.py/test_refund``, from its node
id through ``firewall.testids``). Only an eval is in the config; the other two are
found by their suite, or by their test file. An id none of these names is gone, and
`firewall status` and the nightly say to release it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from firewall.pipeline import suites
from firewall.spec import EvalSpec

Kind = Literal["eval", "case", "pytest"]


def kind_of(specs: Sequence[EvalSpec], eval_id: str, cwd: Path) -> Kind | None:
    """What ``eval_id`` names in this project, or None when nothing does any longer."""
    if any(spec.id == eval_id for spec in specs):
        return "eval"
    if any(suites.holds(spec, eval_id) for spec in specs):
        return "case"
    if _test_file(eval_id, cwd) is not None:
        return "pytest"
    return None


def _test_file(eval_id: str, cwd: Path) -> Path | None:
    """The Python file a pytest test's id starts with (``tests/test_pay.py/...``), if any."""
    parts = eval_id.split("/")
    for end in range(1, len(parts)):
        if parts[end - 1].endswith(".py"):
            candidate = cwd.joinpath(*parts[:end])
            return candidate if candidate.is_file() else None
    return None
