"""Which commit a run tested: the CI's word for it when there is one, else ``git`` itself."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git_info(cwd: Path) -> dict[str, str | None]:
    """The commit and ref under test, keyed as the artefact's ``git_sha`` and ``git_ref``."""
    sha = os.environ.get("GITHUB_SHA") or _git(cwd, "rev-parse", "HEAD")
    ref = os.environ.get("GITHUB_REF") or _git(cwd, "symbolic-ref", "-q", "HEAD")
    return {"git_sha": sha, "git_ref": ref}


def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None
