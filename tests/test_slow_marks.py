"""Each entry of the `slow` list (tests/conftest.py) names a test that exists: a renamed
test would otherwise leave the fast subset (`-m "not slow"`) quietly slower."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SLOW

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("entry", SLOW)
def test_every_slow_entry_names_a_test_that_exists(entry: str) -> None:
    path, _, name = entry.partition("::")
    module = ROOT / path
    assert module.is_file(), f"{entry}: no such module"
    if name:
        assert re.search(rf"^def {re.escape(name)}\(", module.read_text(), re.M), (
            f"{entry}: no such test in {path}"
        )
