"""In a GitHub job, no line of pytest's own report is a workflow command.

Under ``--firewall`` or ``--firewall-k`` a session reports tests whose text is
eval text: an assertion's message, what a test printed, a parameter id. The
firewall's own lines are made inert (``firewall.output.inert``), but pytest
prints the rest itself, and a line of it that starts with ``::error::`` (or holds
``##[error]`` anywhere) would be acted on by the runner: a forged annotation, a
masked value, an environment file's command. So when ``GITHUB_ACTIONS`` is
``true`` the whole session is written between ``::stop-commands::TOKEN`` and
``::TOKEN::`` (the runner's own markers), with a token drawn afresh
for each session and never printed before its start.

The limit: this keeps *text* from being a command, not code. A test can write to
the job's file descriptors itself, or read the token from its own process, as it
can do anything the job can. The plugin prints no workflow command of its own.
"""

from __future__ import annotations

import secrets
import sys
from typing import TextIO

import pytest


class StopCommands:
    """Registered by ``pytest_configure`` in a GitHub job when a firewall mode is on."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(16)
        self.stream: TextIO | None = None

    @pytest.hookimpl(tryfirst=True)  # before the session's header
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        # The terminal's own stream, which pytest's capture leaves alone; stdout without one.
        self.stream = getattr(getattr(reporter, "_tw", None), "_file", None) or sys.stdout
        self._line(f"::stop-commands::{self.token}")

    @pytest.hookimpl(trylast=True)  # after the terminal summary, the session's last words
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.stream is not None:
            self._line(f"::{self.token}::")
            self.stream = None

    def _line(self, text: str) -> None:
        assert self.stream is not None
        self.stream.write(f"\n{text}\n")
        self.stream.flush()
