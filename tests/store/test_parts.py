"""A test probed by `pytest --firewall-k K` as an eval: its spec, as the gate rebuilds it."""

from __future__ import annotations

import pytest

from firewall.config import Settings, parse_settings
from firewall.spec import EvalSpec, Source
from firewall.store.parts import plugin_nodeid, plugin_spec
from firewall.testids import from_nodeid

NODEID = "tests/test_checkout.py::test_total"
EVAL_ID = "tests/test_checkout.py/test_total"
SOURCE = Source(file="tests/test_checkout.py", line=3)
# Every global setting away from its default, so that one the spec missed shows.
SETTINGS = parse_settings(
    {
        "threshold": 0.9,
        "flakiness": 0.05,
        "outlier_fence": 2.0,
        "timeout": 30,
        "import_timeout": 45,
        "max_errors": 1,
        "min_scored": 4,
        "adaptive": True,
        "max_k": 40,
    },
    source="firewall.toml",
)
# What the plugin decides itself: a plain test at the K of the command line, fixed.
FIXED = {"k", "max_k", "adaptive"}


def test_every_global_setting_an_eval_takes_reaches_a_pytest_probe() -> None:
    spec = plugin_spec(EVAL_ID, NODEID, k=5, settings=SETTINGS, source=SOURCE)
    shared = (set(Settings.model_fields) & set(EvalSpec.model_fields)) - FIXED
    assert shared  # the settings an eval inherits from the global table
    assert {name: getattr(spec, name) for name in shared} == {
        name: getattr(SETTINGS, name) for name in shared
    }
    assert (spec.k, spec.max_k, spec.adaptive) == (5, 5, False)
    assert spec.pass_score == SETTINGS.threshold
    assert plugin_nodeid(spec) == NODEID


@pytest.mark.parametrize("k", [2, 10_001])
def test_a_k_out_of_bounds_is_refused(k: int) -> None:
    with pytest.raises(ValueError, match="expected 3 to 10000 trials"):
        plugin_spec(EVAL_ID, NODEID, k=k, settings=SETTINGS, source=SOURCE)


@pytest.mark.parametrize(
    "nodeid",
    [
        NODEID,  # one plain word: read without shlex's tokenizer
        "tests/test_a.py::test_b[x y]",  # quoted by the plugin
        "tests/test_a.py::test_b[it's]",
        "tests/test_a.py::test_b[#1]",
    ],
)
def test_the_gate_reads_back_the_node_id_the_plugin_wrote(nodeid: str) -> None:
    spec = plugin_spec(from_nodeid(nodeid), nodeid, k=5, settings=SETTINGS, source=SOURCE)
    assert plugin_nodeid(spec) == nodeid


@pytest.mark.parametrize(
    "target",
    [
        "python -m pytest --firewall-replay {seed} tests/test_checkout.py::test_total x",
        "python -m pytest --firewall-replay {seed} 'tests/test_checkout.py::test_total'",
        "python -m pytest --firewall-replay {seed} ",
        "python -m pytest --firewall-replay {seed} tests/test_checkout.py::test_other",
    ],
)
def test_a_target_the_plugin_would_not_write_is_no_plugin_spec(target: str) -> None:
    spec = plugin_spec(EVAL_ID, NODEID, k=5, settings=SETTINGS, source=SOURCE)
    assert plugin_nodeid(spec.model_copy(update={"target": target})) is None
