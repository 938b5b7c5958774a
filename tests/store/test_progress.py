"""The nightly's progress file on the state branch: strict JSON out, and in."""

from __future__ import annotations

import json
import math

import pytest

from firewall.lifecycle import Progress
from firewall.store.progress import PROGRESS


def test_progress_round_trips_sorted_and_indented() -> None:
    progress = {"zeta": Progress(stable_streak=2, median=0.9, iqr=0.01, k=15), "alpha": Progress()}
    text = PROGRESS.render(progress)
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    assert PROGRESS.parse(text) == progress


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_is_never_written(value: float) -> None:
    # Python's json would write NaN and Infinity, which jq and JavaScript refuse.
    with pytest.raises(ValueError, match="not JSON compliant"):
        PROGRESS.render({"tone": Progress(median=value)})


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_a_file_with_a_non_finite_number_is_one_that_cannot_be_read(token: str) -> None:
    # As a missing file: the reviewed entries stand, and the next nightly writes it anew.
    text = f'{{"schema_version": 1, "evals": {{"tone": {{"median": {token}}}}}}}'
    assert PROGRESS.parse(text) is None
