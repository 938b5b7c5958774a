"""The history on a branch of the repository's own git remote, so that it outlives the runner.

A CI runner keeps nothing between jobs. The firewall therefore keeps its
history where every job can reach it: an orphan branch (``[state] branch``,
``firewall-state`` by default) of a git remote (``[state] remote``, ``origin``).
It writes the branch itself, with git's plumbing and the job's own git
credentials, so that GitHub, GitLab, Jenkins and a laptop behave alike; no
workflow step is needed and the work tree is never touched.

The branch holds one file per run, so that concurrent jobs never edit the
same file: a push that loses the race is rebuilt on the new tip and pushed
again. Runs older than two weeks are rolled up, one row per eval per week,
so that what a job fetches stays small as the repository ages; a roll-up
commits the new tip without a parent, so that the branch's history (what a
plain ``git clone`` fetches) is never more than the pushes since the last
roll-up. Readers take the branch's tip only (``git fetch --depth 1``), and of
it only the files of the window they ask for. The files' formats are
``firewall.store.statefiles``'s; ``firewall.store.shared`` joins the branch
with the local history file.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import random
import re
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from firewall.constants import RAW_DAYS
from firewall.store.git import IDENTITY, Git, StateError, last_line, push_auth
from firewall.store.history import HistoryRow
from firewall.store.statefiles import (
    parse_file,
    parse_rollup,
    render_rollup,
    roll_up,
    run_file,
    week_of,
)
from firewall.timeutil import to_text

STATE_REF = "refs/firewall/state"  # where the fetched tip is kept in the local repository
PUSH_WINDOW_S = 60.0  # a push that keeps losing races retries this long, not a fixed count


@dataclasses.dataclass
class GitState:
    """The state branch of one remote, fetched at most once per command.

    A reader takes only the files its window needs: run files are dated by their path
    and rollups by their week, so the tree's listing says which to read, and a year of
    state costs a trend window what two weeks cost. A file is parsed once per command,
    whatever the number of reads, and a push reads no rows at all.
    """

    cwd: Path
    remote: str
    branch: str
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    notice: Callable[[str], None] | None = None  # told once of files that could not be read
    _tip: str | None = dataclasses.field(default=None, repr=False)
    _fetched: bool = dataclasses.field(default=False, repr=False)
    _parsed: dict[str, list[HistoryRow]] = dataclasses.field(default_factory=dict, repr=False)
    _skipped: list[str] = dataclasses.field(default_factory=list, repr=False)

    def describe(self) -> str:
        return f"{self.remote}/{self.branch}"

    def rows(
        self, since: str | None = None, eval_ids: Collection[str] | None = None
    ) -> list[HistoryRow]:
        """The tip's rows built at ``since`` or later (all of them without), oldest first,
        reading only the run files dated in the window and the weeks that reach into it;
        with ``eval_ids``, only those evals' rows."""
        tip = self.tip()
        if tip is None:
            return []
        day = since[:10] if since else ""
        wanted = [
            (blob, name) for blob, name in self._listing(tip) if (_file_day(name) or "") >= day
        ]
        rows = [
            row
            for row in self._rows_of(wanted)
            if (since is None or row.build_ts >= since)
            and (eval_ids is None or row.eval_id in eval_ids)
        ]
        return sorted(rows, key=lambda row: row.build_ts)

    def last_run(self) -> list[HistoryRow]:
        """The rows of the newest run file: the paths sort by day and time."""
        tip = self.tip()
        runs = [(blob, name) for blob, name in self._listing(tip) if name.startswith("runs/")]
        return self._rows_of([max(runs, key=lambda entry: entry[1])]) if runs else []

    def holds_history(self) -> bool:
        """Whether the tip holds any run or rollup (a new branch holds none yet)."""
        tip = self.tip()
        return tip is not None and bool(self._listing(tip))

    def read_text(self, path: str) -> str | None:
        """A file of the branch's tip (``progress.json``), or None when there is none."""
        return self._text(self.tip(), path)

    def tip(self) -> str | None:
        """The branch's tip, fetched on first use; None when the branch does not exist."""
        if not self._fetched:
            self._tip, self._fetched = self._fetch(), True
        return self._tip

    def push(
        self,
        rows: Sequence[HistoryRow],
        *,
        files: Mapping[str, str] | None = None,
        updates: Mapping[str, Callable[[str | None], str]] | None = None,
        keep_days: int | None = RAW_DAYS,
    ) -> None:
        """Add one run's rows as a file of its own, replace ``files``, change ``updates``
        (each given the tip's text of its file), roll up old runs, push.

        A push that loses a race with another job is rebuilt on the new tip and tried
        again, with a growing, jittered pause, for up to ``PUSH_WINDOW_S``: a count of
        tries is soon spent when many jobs push at once (a sharded matrix), and a
        window is what a job can afford. Run files never collide, a replaced file is the
        writer's whole new version, and an update is applied again to the new tip's
        text, so that two jobs changing different evals of one file both keep theirs.
        Raises ``StateError`` when it cannot push, saying whether the remote refused
        it (a protected branch, a hook, a read-only token) or the race was lost.
        """
        fixed = dict(files or {})
        if rows:
            path, text = run_file(rows)
            fixed[path] = text
        if not fixed and not updates:
            return
        self.tip()
        names = [*fixed, *(updates or {})]
        what = f"{rows[0].mode} {rows[0].run_id}, {len(rows)} evals" if rows else ", ".join(names)
        deadline = time.monotonic() + PUSH_WINDOW_S
        attempt = 0
        while attempt == 0 or time.monotonic() < deadline:
            if attempt:
                # Let the winner finish; jitter keeps the losers from meeting again.
                time.sleep(random.uniform(0.05, 0.3) * min(attempt, 8))
                self._tip = self._fetch()
            attempt += 1
            changes = dict(fixed)
            for name, update in (updates or {}).items():
                changes[name] = update(self._text(self._tip, name))
            cutoff = _cutoff(rows, keep_days) if rows else None
            tree, rolled = self._tree(self._tip, changes, rollup_before=cutoff)
            # A roll-up starts the branch anew: a parentless commit, so that the branch's
            # history is never deeper than the pushes since the last roll-up (a day's), and
            # a full clone fetches the tip, not a year of superseded run files. It replaces
            # the tip only if the tip is still the one it was built on (the lease); a racing
            # writer sees a non-fast-forward and rebuilds on it, as after any lost race.
            parent = self._tip if self._tip and not rolled else None
            commit = self._git(
                "commit-tree",
                tree,
                *(("-p", parent) if parent else ()),
                "-m",
                f"firewall: {what}" + (" (rolled up: the branch starts anew)" if rolled else ""),
                extra_env=IDENTITY,
            )
            ref = f"refs/heads/{self.branch}"
            lease = (f"--force-with-lease={ref}:{self._tip}",) if rolled else ()
            pushed = self._run(
                "push",
                "--quiet",
                *lease,
                self.remote,
                f"{'+' if rolled else ''}{commit}:{ref}",
                extra_env=self._auth,
            )
            if pushed.returncode == 0:
                self._tip = commit
                return
            if refusal := _refused(pushed.stderr):
                raise StateError(f"git push to {self.describe()} was refused: {refusal}")
            if not _lost_a_race(pushed.stderr):
                raise StateError(
                    f"git push to {self.describe()} failed: {last_line(pushed.stderr)}"
                )
        raise StateError(
            f"git push to {self.describe()} lost the race {attempt} times in "
            f"{PUSH_WINDOW_S:g} s to other jobs pushing at once"
        )

    # --- reading ---------------------------------------------------------------------

    def _fetch(self) -> str | None:
        """The tip of the remote branch, fetched shallow; None when the branch does not exist."""
        return self._g.fetch_tip(self.remote, self.branch, STATE_REF, auth=self._auth)

    @functools.cached_property
    def _auth(self) -> dict[str, str]:
        """The checkout's own credentials where it persisted them (a push made with the job's
        GITHUB_TOKEN starts no workflow, whatever a workflow's `on: push` says); else, as
        with actions/checkout's `persist-credentials: false`, the step's GITHUB_TOKEN, sent
        as the proposal's push sends it (``store.git.push_auth``)."""
        persisted = self._g.run("config", "--get-regexp", r"^http\..*\.extraheader$")
        if persisted.returncode == 0 and persisted.stdout.strip():
            return {}
        return push_auth(self._g, self.remote, self.env)

    def _listing(self, tip: str | None) -> list[tuple[str, str]]:
        """The tip's run and rollup files, as (blob, path): one ``ls-tree``, no contents."""
        if tip is None:
            return []
        listed = self._git("ls-tree", "-r", tip, "--", "runs/", "rollup/").splitlines()
        files = []
        for line in listed:
            info, _, name = line.partition("\t")
            if name.endswith(".jsonl") and _file_day(name) is not None:
                files.append((info.split()[-1], name))
        return files

    def _rows_of(self, files: Sequence[tuple[str, str]]) -> list[HistoryRow]:
        """The files' rows, each blob parsed once per command; what cannot be read is
        skipped and said once, through ``notice``."""
        new = [(blob, name) for blob, name in files if blob not in self._parsed]
        if new:
            texts = self._blobs_by_id([blob for blob, _ in new])
            for (blob, name), text in zip(new, texts, strict=True):
                skipped: list[str] = []
                parse = parse_file if name.startswith("runs/") else parse_rollup
                self._parsed[blob] = list(parse(text, skipped=skipped.append))
                if skipped:
                    self._skip(
                        f"{name}: {skipped[0]}"
                        + (f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else "")
                    )
        return [row for blob, _ in files for row in self._parsed[blob]]

    def _skip(self, what: str) -> None:
        if self.notice is not None and not self._skipped:
            self.notice(
                f"the history branch {self.describe()} holds lines that cannot be read, "
                f"skipped: {what}"
            )
        self._skipped.append(what)

    def _blobs(self, tip: str, names: Sequence[str]) -> list[str]:
        """The files' contents in one `git cat-file --batch`, not one process per file."""
        return self._blobs_by_id([f"{tip}:{name}" for name in names])

    def _blobs_by_id(self, objects: Sequence[str]) -> list[str]:
        names = objects
        if not names:
            return []
        request = "".join(f"{name}\n" for name in names).encode()
        out = self._g.batch(request)
        texts, at = [], 0
        for _ in names:
            header_end = out.index(b"\n", at)
            size = int(out[at:header_end].split()[2])
            texts.append(out[header_end + 1 : header_end + 1 + size].decode("utf-8", "replace"))
            at = header_end + 1 + size + 1
        return texts

    # --- writing ---------------------------------------------------------------------

    def _tree(
        self, tip: str | None, files: Mapping[str, str], *, rollup_before: str | None
    ) -> tuple[str, bool]:
        """The tip's tree with ``files`` added and, before ``rollup_before``, runs rolled up;
        and whether any were."""
        with tempfile.TemporaryDirectory(prefix="firewall-state-") as scratch:
            index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            if tip is not None:
                self._git("read-tree", tip, extra_env=index)
            changes: dict[str, str | None] = dict(files)
            rolled = {}
            if rollup_before is not None and tip is not None:
                rolled = self._rollup(tip, rollup_before)
                changes.update(rolled)
            for path, text in changes.items():
                if text is None:
                    self._git("update-index", "--force-remove", path, extra_env=index)
                    continue
                blob = self._git("hash-object", "-w", "--stdin", stdin=text)
                self._git(
                    "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", extra_env=index
                )
            return self._git("write-tree", extra_env=index), bool(rolled)

    def _rollup(self, tip: str, before: str) -> dict[str, str | None]:
        """Run files older than ``before`` folded into their week's rollup file."""
        names = self._git("ls-tree", "-r", "--name-only", tip, "--", "runs/").splitlines()
        old = [n for n in names if (day := _run_day(n)) is not None and day < before[:10]]
        if not old:
            return {}
        by_week: dict[str, list[HistoryRow]] = defaultdict(list)
        for text in self._blobs(tip, old):
            for row in parse_file(text):
                by_week[week_of(row.build_ts)].append(row)
        changes: dict[str, str | None] = dict.fromkeys(old)
        for week, rows in by_week.items():
            name = f"rollup/{week}.jsonl"
            existing = self._blobs(tip, [name]) if self._exists(tip, name) else [""]
            previous = list(parse_rollup(existing[0]))
            changes[name] = render_rollup(week, [*previous, *roll_up(rows)])
        return changes

    def _text(self, tip: str | None, name: str) -> str | None:
        if tip is None or not self._exists(tip, name):
            return None
        return self._blobs(tip, [name])[0]

    def _exists(self, tip: str, name: str) -> bool:
        return self._run("cat-file", "-e", f"{tip}:{name}").returncode == 0

    # --- git -------------------------------------------------------------------------

    @property
    def _g(self) -> Git:
        return Git(self.cwd, self.env)

    def _run(
        self, *args: str, stdin: str | None = None, extra_env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return self._g.run(*args, stdin=stdin, extra_env=extra_env)

    def _git(
        self, *args: str, stdin: str | None = None, extra_env: Mapping[str, str] | None = None
    ) -> str:
        return self._g.out(*args, stdin=stdin, extra_env=extra_env)


def _cutoff(rows: Sequence[HistoryRow], keep_days: int | None) -> str | None:
    if keep_days is None:
        return None
    newest = dt.datetime.fromisoformat(rows[0].build_ts.replace("Z", "+00:00"))
    return to_text(newest - dt.timedelta(days=keep_days))


def _run_day(name: str) -> str | None:
    parts = name.split("/")
    if len(parts) != 5 or parts[0] != "runs":
        return None
    return f"{parts[1]}-{parts[2]}-{parts[3]}"


def _file_day(name: str) -> str | None:
    """The last day a file's rows can be of: a run's day, a rollup week's Sunday; None for a
    file that is neither."""
    if name.startswith("runs/"):
        return _run_day(name)
    week = name.removeprefix("rollup/").removesuffix(".jsonl")
    try:
        year, number = week.split("-W")
        return dt.date.fromisocalendar(int(year), int(number), 7).isoformat()
    except ValueError:
        return None


def _refused(stderr: str) -> str | None:
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


def _lost_a_race(stderr: str) -> bool:
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
