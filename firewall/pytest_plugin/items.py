"""What the plugin keeps on pytest's own objects: a trial's place in its probe, the seeds.

Light on purpose (the standard library, pytest, ``firewall.testids``): the plugin's
entry module imports it whenever pytest starts, with the plugin on or off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from firewall import testids

TRIAL_FIXTURE = "_firewall_trial"
"""The fixture that ``--firewall-k`` parametrizes with the trial indices, as pytest-repeat
parametrizes its own: the trial's place in a test's node id."""

HIDDEN_FAILURE = "firewall_quarantined_failure"
"""Set on a report whose failure ``--firewall`` turned into a quarantined one: a probe
still counts it as the failure it was."""


def trial_id(index: int) -> str:
    """The parameter id of trial ``index`` in a node id: ``test_refund[trial3]``."""
    return f"trial{index}"


@dataclasses.dataclass(frozen=True)
class Trial:
    """One repetition of one test under ``--firewall-k``."""

    eval_id: str
    nodeid: str  # the test's own node id, without the trial's parameter
    index: int
    seed: int


TRIAL = pytest.StashKey[Trial]()
"""On an item that is a trial of a probe."""


@dataclasses.dataclass
class Seeds:
    """Where ``firewall_seed`` comes from in this session.

    ``replay``: one seed for every test (``--firewall-replay``). Otherwise a test that
    is no trial of a probe gets the seed of trial 0 under ``base`` (drawn on first use
    from the configuration), so that a plain run is the first trial of a probe.
    """

    replay: int | None = None
    base: Callable[[], int] | None = None
    _base_seed: int | None = None

    def of(self, node: pytest.Item) -> int:
        trial = node.stash.get(TRIAL, None)
        if trial is not None:
            return trial.seed
        if self.replay is not None:
            return self.replay
        from firewall.runner.seeds import trial_seed

        return trial_seed(self.base_seed(), eval_id_of(node), 0)

    def base_seed(self) -> int:
        if self._base_seed is None:
            self._base_seed = self.base() if self.base is not None else 0
        return self._base_seed


SEEDS = pytest.StashKey[Seeds]()
"""On the config: the session's seeds, set when a mode is on or ``firewall_seed`` is used."""


def eval_id_of(item: pytest.Item) -> str:
    """The eval id of a test, the same for every trial of it."""
    trial = item.stash.get(TRIAL, None)
    return trial.eval_id if trial is not None else testids.from_nodeid(item.nodeid)


def nodeid_of(item: pytest.Item) -> str:
    """The test's node id, without a trial's parameter."""
    trial = item.stash.get(TRIAL, None)
    return trial.nodeid if trial is not None else item.nodeid


SELECT_VARIABLE = "FIREWALL_SELECT"
"""Set by `firewall replay SUITE/case` for the suite's command: the case's id, the test to run."""


class Select:
    """Run only the test whose eval id is ``eval_id``: a suite's case replayed
    (`firewall replay SUITE/case`), whatever else the suite's command selects."""

    def __init__(self, eval_id: str) -> None:
        self.eval_id = eval_id

    @pytest.hookimpl(trylast=True)  # after -k and -m
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        kept = [item for item in items if eval_id_of(item) == self.eval_id]
        if len(kept) < len(items):
            config.hook.pytest_deselected(items=[item for item in items if item not in kept])
            items[:] = kept
