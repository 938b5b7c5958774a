"""A plain pytest suite for the firewall's pytest plugin (README: "pytest: honour the
registry, probe in process"). From the repository root:

    pytest examples/pytest --firewall-k 7 --firewall-out part.json
    firewall gate --dry-run part.json

Under the repository's base seed the gate reads PASS for the sum, QUARANTINE for the
race (it fails in two of the seven trials: an IQR of 0.5), and FAIL for the
rounding bug at 5 cents. Without ``--dry-run`` it would add the race to this
repository's quarantine.json; ``pytest examples/pytest --firewall`` would then report
its failures as quarantined.
"""

from __future__ import annotations

import random

import pytest

RACE_RATE = 0.25


def test_cart_total_adds_up() -> None:
    assert sum([1250, 399, 1]) == 1650


def test_receipt_waits_for_the_cache() -> None:
    # A race, drawn from `random` (seeded per trial by the plugin): about one run in four
    # reads the receipt before the cache is warm.
    cache_warm = random.random() >= RACE_RATE
    assert cache_warm


@pytest.mark.parametrize("cents", [5, 15])
def test_vat_is_rounded_half_up(cents: int, firewall_seed: int) -> None:
    # Stable, and wrong: round() rounds half to even. firewall_seed only shows the fixture.
    assert firewall_seed >= 0
    assert round(cents / 10) == (cents + 5) // 10
