"""Git, the one way the firewall runs it: never prompting, bounded in time, errors named.

The state branch and the rolling proposal are written with git's plumbing
(``hash-object``, ``update-index`` on a private index, ``commit-tree``, ``push``),
so the job's work tree and index are never touched. The questions a run asks
of the checkout (the commit under test, its branch, a remote's default branch)
go through ``ask``, which answers None where git cannot.
"""

from __future__ import annotations

import atexit
import base64
import dataclasses
import os
import signal
import subprocess
import tempfile
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import AnyStr

from firewall.runner.reaper import MARKER, Reaper

GIT_TIMEOUT_S = 60.0
ASK_TIMEOUT_S = 10.0  # a question about the checkout: `ls-remote` asks the remote
IDENTITY = {
    "GIT_AUTHOR_NAME": "flakiness-firewall",
    "GIT_AUTHOR_EMAIL": "flakiness-firewall@users.noreply.github.com",
    "GIT_COMMITTER_NAME": "flakiness-firewall",
    "GIT_COMMITTER_EMAIL": "flakiness-firewall@users.noreply.github.com",
}


class StateError(Exception):
    """A git command on one of the firewall's branches failed; the message says which and why."""


def bounded(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout: float,
    stdin: AnyStr | None = None,
    text: bool = True,
) -> subprocess.CompletedProcess[AnyStr]:
    """``subprocess.run`` for git, whose remote may hang: nothing it started outlives it.

    Git talks to a remote through processes of its own (``ssh``, ``git-remote-https``, an
    ``ext::`` command), which a timeout that kills git alone would leave running, holding
    the connection. So git leads a process group of its own, and the whole group is
    killed on a timeout or on anything else that ends the wait (a Ctrl-C). If the
    firewall itself is killed (SIGKILL, a CI job's timeout), the group is no longer
    anyone's to kill: every git process carries the mark of a supervisor that
    outlives the firewall (``firewall.runner.reaper``), which kills them then.
    """
    with subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, MARKER: str(_reaper().scratch)},
        text=text,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except BaseException:
            # Not yet reaped, so the group's id is still this git's and no one else's.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


_REAPERS: list[Reaper] = []
_REAPER_LOCK = threading.Lock()


def _reaper() -> Reaper:
    """One supervisor for every git process of this firewall, started with the first
    (git runs in threads: eight jobs' pushes in a test, the publish stage's)."""
    with _REAPER_LOCK:
        if not _REAPERS:
            _REAPERS.append(Reaper())
            atexit.register(_REAPERS[0].close)
        return _REAPERS[0]


# How the state branch's refs are fetched. The pack is kept as it came: under a hundred
# objects git would unpack it into loose ones, inflating and deflating every file again
# (half the fetch's CPU at 5,000 evals), for refs that are read once and replaced. A CI
# checkout is thrown away: no maintenance after the fetch (a process of its own). The
# refs are parentless commits that share nothing with the checkout's history: telling
# the remote what the checkout has ("have" lines) is a round trip that saves no byte.
FETCH = (
    "-c",
    "fetch.unpackLimit=1",
    "-c",
    "fetch.negotiationAlgorithm=noop",
    "-c",
    "maintenance.auto=false",
    "fetch",
    "--quiet",
    "--no-tags",
    "--no-write-fetch-head",
)


@dataclasses.dataclass(frozen=True)
class Git:
    cwd: Path
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    timeout: float = GIT_TIMEOUT_S

    def run(
        self,
        *args: str,
        stdin: str | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Git's answer, whatever it is (the caller reads the exit status)."""
        try:
            return bounded(
                ["git", "-C", str(self.cwd), *args],
                stdin=stdin,
                env=self.environment(extra_env),
                timeout=self.timeout,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise StateError(f"git {_verb(args)} could not run: {exc}") from None

    def batch(self, request: bytes) -> bytes:
        """``git cat-file --batch``: many objects' contents from one process."""
        try:
            proc = bounded(
                ["git", "-C", str(self.cwd), "cat-file", "--batch"],
                stdin=request,
                env=self.environment(None),
                timeout=self.timeout,
                text=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise StateError(f"git cat-file could not run: {exc}") from None
        if proc.returncode != 0:
            raise StateError(
                f"git cat-file failed: {last_line(proc.stderr.decode(errors='replace'))}"
            )
        return proc.stdout

    def objects(self, names: Sequence[str]) -> list[bytes | None]:
        """The objects' contents (``<commit>:<path>`` or ids) from one ``cat-file --batch``;
        None for one that is missing."""
        if not names:
            return []
        out = self.batch("".join(f"{name}\n" for name in names).encode())
        found: list[bytes | None] = []
        at = 0
        for _ in names:
            header_end = out.index(b"\n", at)
            header = out[at:header_end].split()
            if len(header) != 3:  # "<name> missing"
                found.append(None)
                at = header_end + 1
                continue
            size = int(header[2])
            found.append(out[header_end + 1 : header_end + 1 + size])
            at = header_end + 1 + size + 1
        return found

    def environment(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        # Never ask for credentials on a terminal: a CI job would hang, a laptop would prompt
        # in the middle of a run. Git's own credential helpers (and an ssh agent) still answer.
        env = {**os.environ, **self.env, "GIT_TERMINAL_PROMPT": "0", **(extra or {})}
        if "GIT_SSH_COMMAND" not in env and "GIT_SSH" not in env:
            env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes -o ConnectTimeout=10"
        return env

    def out(
        self, *args: str, stdin: str | None = None, extra_env: Mapping[str, str] | None = None
    ) -> str:
        """Git's output, stripped; a failure is a ``StateError`` naming the command."""
        proc = self.run(*args, stdin=stdin, extra_env=extra_env)
        if proc.returncode != 0:
            raise StateError(f"git {_verb(args)} failed: {last_line(proc.stderr)}")
        return proc.stdout.strip()

    def fetch_tip(
        self, remote: str, branch: str, into: str, *, auth: Mapping[str, str] | None = None
    ) -> str | None:
        """Fetch the tip of ``branch`` (shallow) into the local ref ``into``; None if none."""
        return self.fetch_ref(remote, f"refs/heads/{branch}", into, auth=auth)

    def fetch_ref(
        self, remote: str, ref: str, into: str, *, auth: Mapping[str, str] | None = None
    ) -> str | None:
        """Fetch the remote's ``ref`` (shallow) into the local ref ``into``: its commit, or
        None when the remote has no such ref."""
        fetched = self.run(*FETCH, "--depth=1", remote, f"+{ref}:{into}", extra_env=auth)
        if fetched.returncode != 0:
            if "couldn't find remote ref" in fetched.stderr:
                return None
            shown = ref.removeprefix("refs/heads/")
            raise StateError(f"git fetch from {remote}/{shown} failed: {last_line(fetched.stderr)}")
        return self.out("rev-parse", "--verify", f"{into}^{{commit}}")

    def remote_commit(
        self, remote: str, ref: str, *, auth: Mapping[str, str] | None = None
    ) -> str | None:
        """The commit the remote's ``ref`` names now (``ls-remote``); None when it has no such
        ref or cannot be asked."""
        asked = self.run("ls-remote", remote, ref, extra_env=auth)
        for line in asked.stdout.splitlines() if asked.returncode == 0 else ():
            commit, _, name = line.partition("\t")
            if name == ref:
                return commit
        return None

    def blob(self, text: str) -> str:
        """Write ``text`` into the object store; its blob's id."""
        return self.out("hash-object", "-w", "--stdin", stdin=text)

    def file_at(self, commit: str, path: str) -> str | None:
        """The file at ``path`` in ``commit``, or None when the commit has none there."""
        shown = self.run("show", f"{commit}:{path}")
        return shown.stdout if shown.returncode == 0 else None

    def carries(self, tip: str, parent: str, path: str, blob: str) -> bool:
        """Whether ``tip`` is one commit on ``parent`` whose ``path`` is exactly ``blob``."""
        # The raw commit, not `tip^`: a shallow fetch has the parent's id but not the parent.
        header = self.run("cat-file", "commit", tip).stdout.split("\n\n", 1)[0].splitlines()
        parents = [line.split()[1] for line in header if line.startswith("parent ")]
        current = self.run("rev-parse", "--verify", f"{tip}:{path}").stdout.strip()
        return parents == [parent] and current == blob

    def commit_file(self, parent: str, path: str, blob: str, *, message: str) -> str:
        """One commit on ``parent`` that sets ``path`` to ``blob``, made on a private index
        so that the job's work tree and index are never touched; its id."""
        with tempfile.TemporaryDirectory(prefix="firewall-commit-") as scratch:
            index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            self.out("read-tree", parent, extra_env=index)
            self.out(
                "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", extra_env=index
            )
            tree = self.out("write-tree", extra_env=index)
        return self.out("commit-tree", tree, "-p", parent, "-m", message, extra_env=IDENTITY)


def ask(cwd: Path, *args: str) -> str | None:
    """Git's answer to a question about the checkout, stripped; None where git has none
    (not a repository, no such remote, no credentials for it, no answer in time)."""
    try:
        proc = Git(cwd, timeout=ASK_TIMEOUT_S).run(*args)
    except StateError:
        return None
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


@dataclasses.dataclass(frozen=True)
class GitInfo:
    """The commit and ref under test: the CI's word for them when there is one, else git's."""

    sha: str | None
    ref: str | None

    @classmethod
    def find(cls, cwd: Path, env: Mapping[str, str]) -> GitInfo:
        return cls(
            sha=env.get("GITHUB_SHA") or ask(cwd, "rev-parse", "HEAD"),
            ref=env.get("GITHUB_REF") or ask(cwd, "symbolic-ref", "-q", "HEAD"),
        )


def last_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def push_auth(git: Git, remote: str, env: Mapping[str, str]) -> dict[str, str]:
    """The environment that makes git push to ``remote`` with ``GITHUB_TOKEN``, or nothing.

    Only an https remote on the host of ``GITHUB_SERVER_URL`` (github.com by default)
    gets the token: a mirror elsewhere never sees it. `actions/checkout` persists the
    job's own token as ``http.https://github.com/.extraheader`` in ``.git/config``; git
    sends every matching ``extraheader``, and a more specific URL wins over a general
    one, so this one is keyed by the remote's own URL and first set empty, which drops
    the headers read before it. The configuration travels in ``GIT_CONFIG_*`` variables
    (git 2.31 on), which no other user's ``ps`` shows and no file keeps.
    """
    token = env.get("GITHUB_TOKEN", "")
    if not token:
        return {}
    url = _remote_url(git, remote)
    server = urllib.parse.urlsplit(env.get("GITHUB_SERVER_URL") or "https://github.com")
    where = urllib.parse.urlsplit(url)
    if where.scheme != "https" or not where.hostname or where.hostname != server.hostname:
        return {}
    return git_config(
        git.environment(None),
        [
            (f"http.{url}.extraheader", ""),
            (f"http.{url}.extraheader", f"AUTHORIZATION: basic {_basic(token)}"),
        ],
    )


def git_config(env: Mapping[str, str], pairs: list[tuple[str, str]]) -> dict[str, str]:
    """``pairs`` as ``GIT_CONFIG_*`` variables, after any that ``env`` already holds."""
    count = env.get("GIT_CONFIG_COUNT", "")
    start = int(count) if count.isdigit() else 0
    config = {"GIT_CONFIG_COUNT": str(start + len(pairs))}
    for index, (key, value) in enumerate(pairs, start):
        config[f"GIT_CONFIG_KEY_{index}"], config[f"GIT_CONFIG_VALUE_{index}"] = key, value
    return config


def _basic(token: str) -> str:
    # What actions/checkout sends: GitHub takes any user name with a token as the password.
    return base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")


def _remote_url(git: Git, remote: str) -> str:
    """Where git pushes ``remote``: its push URL when it is a remote's name, else itself."""
    found = git.run("remote", "get-url", "--push", remote)
    return found.stdout.strip() if found.returncode == 0 else remote


def _verb(args: Sequence[str]) -> str:
    """The git command of ``args``, past any ``-c name=value`` before it."""
    rest = list(args)
    while len(rest) > 2 and rest[0] == "-c":
        rest = rest[2:]
    return rest[0] if rest else "git"
