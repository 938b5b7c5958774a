"""A git remote that hangs: no git process, nor any its transport started, outlives the firewall.

The remote is an ``ext::`` transport whose command sleeps for a number of seconds that
marks it (``tests/runner/test_no_process_left.py``'s way of finding live processes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from gitrepos import git
from processes import alive

from firewall.store.git import Git, StateError

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
PATIENCE_S = 30.0


def eventually_none(marker: str) -> list[int]:
    deadline = time.monotonic() + PATIENCE_S
    while (left := alive(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def hanging_remote(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository, a remote in it that never answers, and the marker of its transport."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    seconds = str(424_000 + uuid.uuid4().int % 1000)
    marker = f"{seconds}.{uuid.uuid4().int % 10**6}"  # sleep takes a fraction: unique per test
    return repo, f"ext::sleep {marker}", marker


ALLOW_EXT = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "protocol.ext.allow",
    "GIT_CONFIG_VALUE_0": "always",
}


def test_a_timeout_kills_the_transport_as_well_as_git(tmp_path: Path) -> None:
    repo, remote, marker = hanging_remote(tmp_path)
    try:
        with pytest.raises(StateError, match="git fetch could not run"):
            Git(repo, ALLOW_EXT, timeout=2.0).fetch_tip(remote, "main", "refs/firewall/tip")
        # Killed with git, not orphaned: gone as soon as the kernel has ended it.
        assert eventually_none(marker) == []
    finally:
        for pid in alive(marker):
            os.kill(pid, signal.SIGKILL)


def test_nothing_of_git_outlives_a_firewall_killed_by_sigkill(tmp_path: Path) -> None:
    repo, remote, marker = hanging_remote(tmp_path)
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from firewall.store.git import Git
        Git(Path({str(repo)!r}), {ALLOW_EXT!r}).fetch_tip({remote!r}, "main", "refs/x/tip")
        """
    )
    firewall = subprocess.Popen([sys.executable, "-c", script], env=os.environ.copy())
    try:
        deadline = time.monotonic() + PATIENCE_S
        while not alive(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive(marker), "the hanging transport never started"
        firewall.send_signal(signal.SIGKILL)
        firewall.wait()
        assert eventually_none(marker) == []
    finally:
        firewall.kill()
        for pid in alive(marker):
            os.kill(pid, signal.SIGKILL)
