"""The state branch's rolled-up weeks, kept off its tip: one ref a week that no clone fetches.

A week's rollup (``rollup/2026-W44.jsonl``, ``firewall.store.rollups``) is a
parentless commit of its own, at ``refs/firewall/<branch>/weeks/2026-W44`` on the
remote. A ref outside ``refs/heads`` and ``refs/tags`` is fetched by no ``git
clone``, no ``actions/checkout`` (whatever its ``fetch-depth``) and no shallow
fetch of the branch: only ``git clone --mirror`` takes it, and only a reader that
wants older weeks than the branch keeps whole (``firewall calibrate``, ``status
--days`` beyond two weeks) asks for it, by name. So a CI command's fetch is the
tip alone, whatever the branch's age, and a year of weeks costs what the weeks
pack to, once, in a mirror.

A week is replaced as the tip is, in the same ``git push --atomic``, each ref with
its own lease: two jobs folding rows into one week cannot both land, and the one
that loses rebuilds on the new tip and the new week, as after any lost race.
"""

from __future__ import annotations

import datetime as dt
import re
import tempfile
import time
from collections.abc import Collection, Mapping
from pathlib import Path

from firewall.store.git import FETCH, IDENTITY, Git, StateError, last_line

FETCHED = "refs/firewall/weeks"  # where fetched weeks are kept in the local repository
ALL_AT_ONCE = 60  # more weeks than this are fetched with one pattern: all of them
_WEEK = re.compile(r"\d{4}-W\d{2}")


def remote_ref(branch: str, week: str) -> str:
    """Where the remote keeps ``branch``'s rollup of ``week``."""
    return f"refs/firewall/{branch}/weeks/{week}"


def path_of(week: str) -> str:
    """The rollup file of ``week``, as the week's commit (and an older tip) holds it."""
    return f"rollup/{week}.jsonl"


def week_of_path(name: str) -> str | None:
    """The week of a rollup file's path, or None when the path is no rollup's."""
    week = name.removeprefix("rollup/").removesuffix(".jsonl")
    return week if name.startswith("rollup/") and _WEEK.fullmatch(week) else None


def last_day(week: str) -> str | None:
    """The week's Sunday, the last day its rows can be of; None for a name that is no week."""
    try:
        year, number = week.split("-W")
        return dt.date.fromisocalendar(int(year), int(number), 7).isoformat()
    except ValueError:
        return None


def weeks_between(first: str, last: str) -> list[str]:
    """The ISO weeks from the one of day ``first`` to the one of day ``last`` (YYYY-MM-DD)."""
    day, end = dt.date.fromisoformat(first[:10]), dt.date.fromisoformat(last[:10])
    weeks: list[str] = []
    while True:
        year, number, _ = day.isocalendar()
        weeks.append(f"{year}-W{number:02d}")
        if day >= end or len(weeks) > ALL_AT_ONCE:
            return weeks
        day = min(day + dt.timedelta(days=7), end)


def fetch(
    git: Git,
    remote: str,
    branch: str,
    weeks: Collection[str] | None,
    *,
    auth: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The remote's commits of ``weeks`` (of every week with None), fetched: week to commit.
    A week the remote has no ref of is left out, and so is its stale local copy.

    Each week is asked for as a pattern (``.../2026-W44*``), which may match nothing:
    one fetch asks for the weeks that may exist, with no ``ls-remote`` first, and
    ``--prune`` drops a local copy of a week that the remote no longer has.
    """
    if weeks is not None and not weeks:
        return {}
    if weeks is None or len(weeks) > ALL_AT_ONCE:
        specs = [f"+refs/firewall/{branch}/weeks/*:{FETCHED}/*"]
    else:
        specs = [f"+{remote_ref(branch, week)}*:{FETCHED}/{week}*" for week in sorted(weeks)]
    fetched = git.run(
        *FETCH,
        "--prune",  # no --depth: git 2.39 fails a shallow fetch whose patterns match nothing
        remote,
        *specs,
        extra_env=auth,
    )
    if fetched.returncode != 0:
        raise StateError(
            f"git fetch of the rolled-up weeks of {remote}/{branch} failed: "
            f"{last_line(fetched.stderr)}"
        )
    listed = git.out("for-each-ref", "--format=%(objectname) %(refname)", f"{FETCHED}/")
    found = {}
    for line in listed.splitlines():
        commit, _, name = line.partition(" ")
        week = name.removeprefix(f"{FETCHED}/")
        if _WEEK.fullmatch(week) and (weeks is None or week in weeks):
            found[week] = commit
    return found


def commits(git: Git, blobs: Mapping[str, str], *, message: str) -> dict[str, str]:
    """A parentless commit per week holding its rollup file (``blobs``: week to blob id),
    made by three git processes however many weeks there are: week to commit."""
    weeks = sorted(blobs)
    if not weeks:
        return {}
    inner = _trees(git, [f"100644 blob {blobs[week]}\t{week}.jsonl" for week in weeks])
    outer = _trees(git, [f"040000 tree {tree}\trollup" for tree in inner])
    stamp = f"{int(time.time())} +0000"
    who = f"{IDENTITY['GIT_AUTHOR_NAME']} <{IDENTITY['GIT_AUTHOR_EMAIL']}> {stamp}"
    with tempfile.TemporaryDirectory(prefix="firewall-weeks-") as scratch:
        paths = []
        for week, tree in zip(weeks, outer, strict=True):
            path = Path(scratch) / week
            path.write_text(
                f"tree {tree}\nauthor {who}\ncommitter {who}\n\n{message} {week}\n",
                encoding="utf-8",
            )
            paths.append(str(path))
        made = git.out(
            "hash-object", "-t", "commit", "-w", "--stdin-paths", stdin="\n".join(paths) + "\n"
        )
    return dict(zip(weeks, made.split(), strict=True))


def _trees(git: Git, entries: list[str]) -> list[str]:
    """One tree of one entry each, from one ``git mktree --batch``."""
    made = git.out("mktree", "--batch", stdin="".join(f"{entry}\n\n" for entry in entries))
    return made.split()
