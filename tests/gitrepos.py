"""Real git repositories for the tests: a bare origin, and a fresh clone for every CI job.

A CI runner keeps nothing between jobs, so a lifecycle test gives each job its own
clone of one origin and never runs two commands of different jobs in one directory.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

# Tests must not read the machine's git configuration, nor write commits as its user.
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_SYSTEM": os.devnull,
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV, **(env or {})},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


def make_origin(root: Path, files: Mapping[str, str], *, branch: str = "main") -> Path:
    """A bare origin whose default branch holds ``files`` in one commit."""
    origin = root / "origin.git"
    git(root, "init", "--quiet", "--bare", f"--initial-branch={branch}", str(origin))
    seed = root / "seed"
    git(root, "clone", "--quiet", str(origin), str(seed))
    for name, text in files.items():
        (seed / name).parent.mkdir(parents=True, exist_ok=True)
        (seed / name).write_text(text)
    git(seed, "add", "--all")
    git(seed, "commit", "--quiet", "-m", "the project")
    git(seed, "push", "--quiet", "origin", f"HEAD:{branch}")
    return origin


def fresh_clone(origin: Path, where: Path, *, branch: str | None = None) -> Path:
    """A new clone, as a CI job starts from: nothing of any earlier job is in it."""
    args = ["clone", "--quiet", str(origin), str(where)]
    git(where.parent, *args)
    if branch is not None:
        git(where, "checkout", "--quiet", "-B", branch)
    return where


def branch_files(origin: Path, branch: str) -> list[str]:
    """The files on ``branch`` of the origin, read straight from the bare repository."""
    return git(origin, "ls-tree", "-r", "--name-only", branch).splitlines()
