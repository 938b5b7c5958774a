"""The errors a user is meant to read.

Every error the firewall expects to meet in the wild is a ``FirewallError``:
the command-line boundary prints its message on one line and exits with its
``exit_code``. Anything else is a bug and keeps its traceback.

    FirewallError                 exit 2 unless stated
    ├── ConfigError               bad firewall.toml / [tool.firewall] / decorator options
    ├── DiscoveryError            an eval module that cannot be imported or scanned
    ├── RegistryError             quarantine.json that cannot be read or written
    ├── ArtefactError             a report or probe part that cannot be read
    └── UsageError                a command line that cannot be honoured
"""

from __future__ import annotations


class FirewallError(Exception):
    """An expected failure, explained in one line that says what to do."""

    exit_code = 2


class ConfigError(FirewallError):
    """The configuration names an unknown key, a wrong type or an impossible value."""


class DiscoveryError(FirewallError):
    """Decorated evals could not be discovered."""


class RegistryError(FirewallError):
    """The quarantine registry is unreadable, of an unknown version, or locked."""


class ArtefactError(FirewallError):
    """A report or probe part is missing or malformed."""


class UsageError(FirewallError):
    """The command line asks for something that cannot be done."""
