"""The pytest plugin (the ``firewall`` entry point of ``pytest11``), off unless asked.

    pytest --firewall              honour quarantine.json: a quarantined test still runs,
                                   and its failure is reported as quarantined (XFAIL with
                                   the entry's reason and issue) instead of failing the session
    pytest --firewall-k 7          probe every selected test 7 times in this one process,
                                   with the firewall's seeds, and write a probe part that
                                   `firewall gate` decides (``--firewall-out``); it exits
                                   0 whatever the trials did, so CI runs
                                   ``pytest --firewall-k 7 --firewall-out P && firewall gate P``
    pytest --firewall-replay S     run with one trial's seed again: ``firewall_seed`` is S,
                                   and ``random`` is seeded with it before each test
    FIREWALL_SELECT=ID pytest      run only the test whose eval id is ID: what
                                   `firewall replay SUITE/ID` sets for a pytest suite's command

Test ids are ``firewall.testids``'s mapping of pytest node ids. ``--firewall`` lives
in ``quarantine.py``, ``--firewall-k`` in ``probe.py``; in a GitHub job either keeps
pytest's own report from issuing workflow commands (``commands.py``).

Without one of its options the plugin changes nothing: it reads no file, registers
no hook beyond its options, and imports nothing heavier than ``items.py``, so that
being installed costs a pytest run nothing. The ``firewall_seed`` fixture is always
there, for tests written against it to run in a plain session too: there it gives
the seed of trial 0 under the configuration's base seed.
"""

from __future__ import annotations

import os
import random

import pytest

from firewall.pytest_plugin.items import SEEDS, SELECT_VARIABLE, Seeds, Select


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("firewall", "flakiness firewall (firewall.pytest_plugin)")
    group.addoption(
        "--firewall",
        action="store_true",
        default=False,
        help="Honour quarantine.json: a quarantined test still runs, and its failure is "
        "reported as quarantined (xfail) instead of failing the session.",
    )
    group.addoption(
        "--firewall-k",
        type=int,
        metavar="K",
        default=None,
        help="Probe every selected test K times in this process with the firewall's seeds "
        "and write a probe part for `firewall gate`; exits 0 when the probe is complete, "
        "so in CI run the gate after it: pytest --firewall-k 7 && firewall gate PART.",
    )
    group.addoption(
        "--firewall-out",
        metavar="PATH",
        default=None,
        help="The probe part --firewall-k writes (default: firewall-probe.json beside the "
        "firewall's configuration, else in the rootdir).",
    )
    group.addoption(
        "--firewall-seed",
        metavar="SEED",
        default=None,
        help='Base seed of --firewall-k, or "random" (default: the configuration\'s seed).',
    )
    group.addoption(
        "--firewall-replay",
        type=int,
        metavar="SEED",
        default=None,
        help="Run every selected test once with this trial seed (from a probe part or "
        "report): firewall_seed is SEED and random is seeded with it.",
    )
    group.addoption(
        "--firewall-config",
        metavar="PATH",
        default=None,
        help="The firewall's configuration (firewall.toml or pyproject.toml; default: found "
        "as the firewall command finds it, else the defaults).",
    )


def pytest_configure(config: pytest.Config) -> None:
    option = config.option
    selected = os.environ.get(SELECT_VARIABLE)
    if selected:
        config.pluginmanager.register(Select(selected), "firewall-select")
    k, replay = option.firewall_k, option.firewall_replay
    if k is None:
        for name, given in (
            ("--firewall-out", option.firewall_out),
            ("--firewall-seed", option.firewall_seed),
        ):
            if given is not None:
                raise pytest.UsageError(f"firewall: {name} goes with --firewall-k K")
    if k is None and replay is not None:
        if replay < 0:
            raise pytest.UsageError(
                f"firewall: --firewall-replay: expected a seed >= 0, got {replay}"
            )
        config.stash[SEEDS] = Seeds(replay=replay)
        config.pluginmanager.register(Replay(replay), "firewall-replay")
    if (option.firewall or k is not None) and os.environ.get("GITHUB_ACTIONS") == "true":
        from firewall.pytest_plugin.commands import StopCommands

        config.pluginmanager.register(StopCommands(), "firewall-stop-commands")
    if not option.firewall and k is None:
        return  # nothing more asked: no configuration read, no registry
    from firewall.pytest_plugin.project import load_project

    project = load_project(config)
    if option.firewall:
        from firewall.pytest_plugin.quarantine import Quarantine

        config.pluginmanager.register(Quarantine.read(project), "firewall-quarantine")
    if k is not None:
        from firewall.pytest_plugin.probe import Probe

        probe = Probe.start(config, project, k)  # refuses --firewall-replay beside it
        config.stash[SEEDS] = Seeds(base=lambda: probe.base_seed)
        config.pluginmanager.register(probe, "firewall-probe")


class Replay:
    """``--firewall-replay S``: every test seeded with S, as the trial it replays was."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self) -> None:
        random.seed(self.seed)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self) -> None:
        random.seed(self.seed)


@pytest.fixture
def firewall_seed(request: pytest.FixtureRequest) -> int:
    """The firewall's seed for this test: trial ``i``'s under ``--firewall-k``, S under
    ``--firewall-replay S``, else trial 0's under the configuration's base seed."""
    config = request.config
    seeds = config.stash.get(SEEDS, None)
    if seeds is None:
        seeds = config.stash[SEEDS] = Seeds(base=lambda: _configured_base_seed(config))
    return seeds.of(request.node)


def _configured_base_seed(config: pytest.Config) -> int:
    from firewall.pytest_plugin.project import load_project
    from firewall.runner.seeds import BaseSeed

    return BaseSeed.parse(load_project(config).settings.seed).draw()
