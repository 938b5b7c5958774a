"""The firewall's configuration as the plugin reads it: the project's, or the defaults.

A pytest project need not have one: without a ``firewall.toml`` or a
``[tool.firewall]`` table the contract's defaults hold, and the registry is
``quarantine.json`` in pytest's rootdir. With one, it is found as the
`firewall` command finds it (from the directory pytest was started in, up to
the repository's root), and the registry's path is relative to its directory.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from firewall.config import Settings
from firewall.configfile import find_config, has_firewall_table, load_config
from firewall.errors import FirewallError


@dataclasses.dataclass(frozen=True)
class Project:
    settings: Settings
    root: Path  # the configuration's directory: where its relative paths start

    @property
    def registry(self) -> Path:
        return self.root / self.settings.registry


def load_project(config: pytest.Config) -> Project:
    """The settings ``--firewall-config`` names or the project has; a broken
    configuration stops the session with the firewall's own message."""
    option = config.getoption("firewall_config")
    explicit = Path(option) if option else None
    cwd = config.invocation_params.dir
    try:
        found = find_config(explicit, cwd)
        if found is None or (explicit is None and found[1] and not has_firewall_table(found[0])):
            return Project(Settings(), config.rootpath)  # a pyproject.toml of pytest's own
        loaded = load_config(explicit, cwd)
    except FirewallError as exc:
        raise pytest.UsageError(f"firewall: {exc}") from None
    assert loaded.path is not None
    return Project(loaded.settings, loaded.path.parent.resolve())
