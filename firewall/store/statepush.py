"""Writing the state branch: the tree of a push built, the push leased, its refusals read.

``firewall.store.gitstate`` folds a run into the tip's files and its weeks, and
retries a push that lost a race; this module writes what it folded, as git
objects and one push, and tells a refusal (a protected branch, a read-only
token, a hook) from a lost race, with what to change.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import tempfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from firewall.store import statusref
from firewall.store.atomic import advice
from firewall.store.git import IDENTITY, Git, StateError
from firewall.store.recent import RECENT
from firewall.store.weeks import remote_ref


def push_tip(
    git: Git,
    remote: str,
    branch: str,
    tip: str | None,
    tree: str,
    archived: Mapping[str, tuple[str, str | None]],
    *,
    message: str,
    auth: Mapping[str, str],
    status: str | None = None,
) -> tuple[str, subprocess.CompletedProcess[str]]:
    """A parentless commit of ``tree`` (``write_tree``: the tip's, changed), pushed in place
    of the branch's ``tip`` with the ``archived`` weeks (per week its new commit and the
    one it replaces) and, given its ``status.jsonl``, the status commit cut from it
    (``firewall.store.statusref``): the commit, and git's answer (the caller reads the
    exit status)."""
    # Every push starts the branch anew: a parentless commit, so that the branch's
    # history is its tip, and a full clone fetches what a shallow one does, not a
    # year of superseded files. It replaces the tip only if the tip is still the one
    # it was built on (the lease), and each week it changes only if that week is
    # still the one it read; all or none (--atomic). A racing writer sees a stale
    # lease or a non-fast-forward and rebuilds on the new tip, as after any lost race.
    commit = git.out("commit-tree", tree, "-m", message, extra_env=IDENTITY)
    ref = f"refs/heads/{branch}"
    leases = [f"--force-with-lease={ref}:{tip or ''}"]
    specs = [f"{commit}:{ref}"]
    for week, (new, old) in sorted(archived.items()):
        leases.append(f"--force-with-lease={remote_ref(branch, week)}:{old or ''}")
        specs.append(f"{new}:{remote_ref(branch, week)}")
    if status is not None:
        # Replaced whatever it was: it is cut from this tip, whose lease guards both.
        made = status_commit(git, tree, statusref.stamped(status, commit), message=message)
        specs.append(f"+{made}:{statusref.remote_ref(branch)}")
    pushed = git.run(
        # recent.jsonl is rewritten whole by every push: a delta search against the
        # last one and a thorough deflate cost the job a second of CPU at 5,000
        # evals, to save a megabyte of upload. Deflate it fast and whole instead.
        "-c",
        "core.bigFileThreshold=1m",
        "-c",
        "pack.compression=1",
        "push",
        "--quiet",
        *(["--atomic"] if len(specs) > 1 else []),
        *leases,
        remote,
        *specs,
        extra_env=auth,
    )
    return commit, pushed


def status_commit(git: Git, tree: str, status: str, *, message: str) -> str:
    """A parentless commit of ``status.jsonl`` and the small files at the top of the tip's
    ``tree`` (the same blobs): what `firewall status` reads."""
    listed = git.out("ls-tree", tree).splitlines()
    entries = [
        line
        for line in listed
        if line.split(maxsplit=2)[1:2] == ["blob"]
        and line.partition("\t")[2] not in (statusref.STATUS, RECENT)
    ]
    entries.append(f"100644 blob {write_blob(git, status)}\t{statusref.STATUS}")
    made = git.out("mktree", stdin="".join(f"{entry}\n" for entry in sorted(entries, key=_path)))
    return git.out("commit-tree", made, "-m", f"{message} (status)", extra_env=IDENTITY)


def _path(entry: str) -> str:
    return entry.partition("\t")[2]


def write_tree(git: Git, tip: str | None, changes: Mapping[str, str | None]) -> str:
    """The tip's tree with ``changes`` made: a file's new text, or None to remove it."""
    with tempfile.TemporaryDirectory(prefix="firewall-state-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        if tip is not None:
            git.out("read-tree", tip, extra_env=index)
        for path, text in changes.items():
            if text is None:
                git.out("update-index", "--force-remove", path, extra_env=index)
                continue
            blob = write_blob(git, text)
            git.out(
                "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", extra_env=index
            )
        return git.out("write-tree", extra_env=index)


def write_blob(git: Git, text: str) -> str:
    """``text`` written as a loose blob: its id. Written here, not by ``git hash-object``:
    git hashes with collision-detecting SHA-1, about a hundred megabytes a second, and at
    5,000 evals recent.jsonl is fifteen (0.13 s of CPU each push); hashlib's is ten times
    as fast. The object is stored, not deflated: the push deflates it into its pack
    anyway, and the checkout is thrown away. The text is encoded a megabyte at a time:
    encoded whole, it would be a second copy of recent.jsonl in memory. A failure is a
    ``StateError`` naming the object directory."""
    asked = git.out("rev-parse", "--show-object-format", "--git-path", "objects")
    kind, objects = asked.split("\n", 1)
    store = git.cwd / objects
    chunks = range(0, len(text), _CHUNK)
    size = len(text) if text.isascii() else sum(len(_encoded(text, at)) for at in chunks)
    header = f"blob {size}\0".encode()
    digest = hashlib.new(kind, header)
    temp = None
    try:
        fd, temp = tempfile.mkstemp(dir=store, prefix="tmp_obj_")
        with os.fdopen(fd, "wb") as out:
            stored = zlib.compressobj(0)
            out.write(stored.compress(header))
            for at in chunks:
                chunk = _encoded(text, at)
                digest.update(chunk)
                out.write(stored.compress(chunk))
            out.write(stored.flush())
        os.chmod(temp, 0o444)
        name = digest.hexdigest()
        (store / name[:2]).mkdir(exist_ok=True)
        os.replace(temp, store / name[:2] / name[2:])  # the same bytes, were it there already
        temp = None
    except OSError as exc:
        raise StateError(
            f"could not write a git object in {store}: {exc.strerror or exc}; {advice(exc)}"
        ) from None
    finally:
        if temp is not None:  # no half-written object left, whatever stopped it
            with contextlib.suppress(OSError):
                os.unlink(temp)
    return name


def _encoded(text: str, at: int) -> bytes:
    """A megabyte of ``text`` as UTF-8; a lone surrogate (an eval's output can decode to
    one) is written ``?``, so that the branch holds UTF-8 and the push goes on."""
    return text[at : at + _CHUNK].encode("utf-8", "replace")


_CHUNK = 1 << 20


def refused(stderr: str) -> str | None:
    """Why the remote refused a push for good (not a race), with what to change; or None.

    GitHub answers GH006 for a protected branch and GH013 for a repository rule; a
    token without ``contents: write`` gets a 403; any pre-receive hook may decline.
    Retrying any of them only spends the job's time.
    """
    if said := _line_with(stderr, ("gh006", "gh013", "protected branch", "rule violations")):
        return (
            f"{said}: the branch is protected by a branch protection rule or a ruleset; "
            "exempt the state branch from it (the firewall alone writes it)"
        )
    if said := _line_with(stderr, ("permission", r"\b403\b", "write access")):
        return (
            f"{said}: the job's token may not push; give the workflow "
            "`permissions: contents: write` (and keep persist-credentials on in actions/checkout)"
        )
    if said := _line_with(stderr, ("hook declined",)):
        return f"{said}: a server-side hook declined it; let the state branch through"
    return None


def _line_with(stderr: str, signs: Sequence[str]) -> str | None:
    """The first line of git's answer that carries one of ``signs`` (regular expressions),
    without git's prefixes. A status is a word of its own: the commit named on the line of a
    lost race (``! [rejected] 781c403b... (fetch first)``) is no 403."""
    for line in stderr.splitlines():
        if any(re.search(sign, line.lower()) for sign in signs):
            text = line.strip()
            for prefix in ("remote:", "error:", "fatal:"):
                text = text.removeprefix(prefix).strip()
            return text
    return None


def lost_a_race(stderr: str) -> bool:
    text = stderr.lower()
    return (
        any(
            sign in text
            for sign in (
                "non-fast-forward",
                "fetch first",
                "cannot lock ref",
                "stale info",
                "rejected",
            )
        )
        and "permission" not in text
    )
