"""A pytest suite to try `result = "junit"` on: one steady test, one flaky one."""

import os


def test_adds_an_item():
    assert 1 + 1 == 2


def test_pays_with_a_card():
    # The payment sandbox times out on some runs: fails on one trial in three.
    trial = int(os.environ.get("FIREWALL_TRIAL", "0"))
    assert trial % 3 != 2, "payment sandbox timed out"
