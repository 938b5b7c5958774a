"""The history on a branch of the repository's own git remote, so that it outlives the runner.

A CI runner keeps nothing between jobs. The firewall therefore keeps its
history where every job can reach it: an orphan branch (``[state] branch``,
``firewall-state`` by default) of a git remote (``[state] remote``, ``origin``).
It writes the branch itself, with git's plumbing and the job's own git
credentials, so that GitHub, GitLab, Jenkins and a laptop behave alike; no
workflow step is needed and the work tree is never touched.

The tip holds what CI commands read, and no more: ``recent.jsonl``, each
eval's newest ``RECENT_RUNS`` runs (and up to ``ROLL_UP_EVERY - 1`` more; one
line per eval), and the newest run's own file. Older runs are rolled up, at each
eval's turn (one push in ten, a tenth of the evals at each push), one row per eval
per week, and each week is a ref of its own that no clone fetches
(``firewall.store.weeks``): only a reader that asks for older weeks than the
tip keeps (`firewall calibrate`, `status --days` beyond two weeks) fetches
them, by name. So a CI command's fetch costs the same in a repository's first
week as in its fifth year. Each push folds its run in and commits the new tip
without a parent, so that the branch's history (what a plain ``git clone``
fetches) is its tip; the weeks it changes are pushed with it, atomically. A
push that loses the race is rebuilt on the new tip and pushed again, so
concurrent jobs keep every row. Readers take the branch's tip only (``git
fetch --depth 1``), and of it only the files they need. The files' formats are
``firewall.store.statefiles``'s (run files), ``firewall.store.recent``'s and
``firewall.store.rollups``'s; ``firewall.store.statepush`` writes a push's tree and
pushes it, and reads a refusal; ``firewall.store.shared`` joins the branch with the
local history file. Each push also cuts a status commit from its tip, what `firewall
status` reads instead of the tip (``firewall.store.statusref``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import gc
import random
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from firewall.constants import RECENT_RUNS, ROLL_UP_EVERY
from firewall.errors import FirewallError
from firewall.store import statusref
from firewall.store import weeks as week_refs
from firewall.store.git import Git, StateError, last_line, push_auth
from firewall.store.history import HistoryRow, RunSummary
from firewall.store.recent import RECENT, recent_medians, recent_rows, recent_run_ids, runs_of
from firewall.store.recentfold import Fallen, fold_recent, turn_comes
from firewall.store.rollups import fold_week, parse_rollup, week_or_none
from firewall.store.statefiles import iter_lines, parse_file, run_file, run_summary
from firewall.store.statepush import lost_a_race, push_tip, refused, write_blob, write_tree
from firewall.store.statusref import STATUS, StatusRead, status_text
from firewall.store.weeks import last_day, path_of, week_of_path
from firewall.timeutil import to_text

STATE_REF = "refs/firewall/state"  # where the fetched tip is kept in the local repository
PUSH_WINDOW_S = 60.0  # a push that keeps losing races retries this long, not a fixed count
# Run files of an older firewall (which kept two weeks of them) folded in by one push: a
# big branch is taken over in a few pushes, none of which holds it all in memory.
MIGRATE_FILES = 30
# Rollup weeks an older firewall kept on the tip, moved to refs of their own by one push
# (a week with no ref yet moves as it is, unread): a year's weeks leave in a few pushes.
MIGRATE_WEEKS = 16


@dataclasses.dataclass
class GitState:
    """The state branch of one remote, fetched at most once per command.

    A reader takes ``recent.jsonl`` (its other evals' lines unparsed); a reader that asks
    for ``weeks`` also fetches the rolled-up weeks its window reaches into, where the
    recent file does not reach back far enough: a year of state costs a CI command what a
    week costs. A file is read once per command, whatever the number of reads; a push
    reads the recent file and the weeks its fold changes.
    """

    cwd: Path
    remote: str
    branch: str
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    notice: Callable[[str], None] | None = None  # told once of files that could not be read
    # The evals `firewall status` shows (the registry's): each push cuts the status commit
    # to them (firewall.store.statusref). None: no status commit is written.
    watched: Callable[[], Collection[str]] | None = None
    # A reader that wants the registry's evals alone (`firewall status`): it reads the
    # status commit where that answers, and fetches the tip only where it does not.
    triage: bool = False
    _tip: str | None = dataclasses.field(default=None, repr=False)
    _fetched: bool = dataclasses.field(default=False, repr=False)
    _parsed: dict[str, list[HistoryRow]] = dataclasses.field(default_factory=dict, repr=False)
    _skipped: list[str] = dataclasses.field(default_factory=list, repr=False)
    _recent: tuple[str, bytes] | None = dataclasses.field(default=None, repr=False)
    _listed: dict[str, list[tuple[str, str]]] = dataclasses.field(default_factory=dict, repr=False)
    _status: StatusRead | None = dataclasses.field(default=None, repr=False)
    _status_fetched: bool = dataclasses.field(default=False, repr=False)

    def describe(self) -> str:
        return f"{self.remote}/{self.branch}"

    def rows(
        self,
        since: str | None = None,
        eval_ids: Collection[str] | None = None,
        *,
        last: int | None = None,
        ref: str | None = None,
        weeks: bool = False,
    ) -> list[HistoryRow]:
        """The tip's rows built at ``since`` or later (all of them without), oldest first;
        with ``eval_ids``, only those evals'; with ``ref``, only runs on that git ref; with
        ``last``, only each eval's newest ``last``.

        The rows are each eval's newest runs, from ``recent.jsonl`` (and the run files of
        an older firewall it does not hold yet). With ``weeks``, older runs come too, as
        one row per eval per week: the rolled-up weeks of the window, fetched by name, and
        only for evals whose newest runs do not reach back to ``since`` (or number fewer
        than ``last``). A rolled-up week is of no ref: it never answers ``ref``.
        """
        status = self._triaged(eval_ids) if ref is None and not weeks else None
        if status is not None:
            skipped: list[str] = []
            found = recent_rows(status.text, eval_ids=eval_ids, since=since, skipped=skipped.append)
            self._said_of(STATUS, skipped)
            return _chosen(found, eval_ids, since=since, ref=None, last=last)
        tip = self.tip()
        if tip is None:
            return []
        day = since[:10] if since else ""
        listing = [
            (blob, name) for blob, name in self._listing(tip) if (_file_day(name) or "") >= day
        ]
        if not weeks or ref is not None:
            by_eval = self._runs_by_eval(tip, listing, eval_ids, since=since, ref=ref, last=last)
            return _chosen(by_eval, eval_ids, since=since, ref=ref, last=last)
        by_eval = self._runs_by_eval(tip, listing, eval_ids, since=None, ref=None, last=None)
        wanted = set(by_eval if eval_ids is None else eval_ids)
        short = {e for e in wanted if not _reaches(by_eval.get(e, ()), since, last)}
        if since is None or short or not wanted:
            files = [(blob, name) for blob, name in listing if name.startswith("rollup/")]
            files += self._weeks_of(by_eval, short, since)
            self._add_weeks(by_eval, files, None if eval_ids is None else short)
        return _chosen(by_eval, eval_ids, since=since, ref=ref, last=last)

    def _weeks_of(
        self, by_eval: Mapping[str, list[HistoryRow]], short: Collection[str], since: str | None
    ) -> list[tuple[str, str]]:
        """The rolled-up weeks the ``short`` evals' window reaches into, fetched: from the
        week of ``since`` (the first there is without) to the week of their oldest run in
        the recent file; as (object, path), the object ``<commit>:rollup/<week>.jsonl``."""
        names: list[str] | None = None
        if since is not None:
            # An eval's rolled-up runs are older than its runs in the recent file: no week
            # after its oldest one there holds any. An eval with none there may be anywhere.
            oldest = [min(row.build_ts for row in by_eval[e]) for e in short if by_eval.get(e)]
            if len(oldest) == len(short):
                upto = max(oldest)
            else:
                newest = [row.build_ts for kept in by_eval.values() for row in kept]
                upto = max([since, to_text(dt.datetime.now(dt.timezone.utc)), *newest])
            names = week_refs.weeks_between(since, upto)
        fetched = week_refs.fetch(self._g, self.remote, self.branch, names, auth=self._auth)
        day = since[:10] if since else ""
        return [
            (f"{commit}:{path_of(week)}", path_of(week))
            for week, commit in sorted(fetched.items())
            if (last_day(week) or "") >= day
        ]

    def _runs_by_eval(
        self,
        tip: str,
        listing: Sequence[tuple[str, str]],
        eval_ids: Collection[str] | None,
        *,
        since: str | None,
        ref: str | None,
        last: int | None,
    ) -> dict[str, list[HistoryRow]]:
        """Each eval's rows of ``recent.jsonl``, and of the run files in ``listing`` that it
        does not hold yet (an older firewall's)."""
        text = self._recent_text(tip)
        skipped: list[str] = []
        found = recent_rows(
            text, eval_ids=eval_ids, since=since, ref=ref, last=last, skipped=skipped.append
        )
        self._said_of(RECENT, skipped)
        by_eval: dict[str, list[HistoryRow]] = defaultdict(list, found)
        known = recent_run_ids(text)
        older = [
            (blob, name)
            for blob, name in listing
            if name.startswith("runs/") and _run_id(name) not in known
        ]
        for row in self._rows_of(older):
            by_eval[row.eval_id].append(row)
        return by_eval

    def _add_weeks(
        self,
        by_eval: dict[str, list[HistoryRow]],
        weeks: Sequence[tuple[str, str]],
        eval_ids: Collection[str] | None,
    ) -> None:
        """The rollup weeks' rows added to ``by_eval``: every eval's, or with ``eval_ids``
        only theirs (the other lines passed over unparsed)."""
        rows = self._rows_of(weeks) if eval_ids is None else self._week_rows(weeks, eval_ids)
        for row in rows:
            by_eval[row.eval_id].append(row)

    def medians(
        self, since: str, eval_ids: Collection[str], *, last: int
    ) -> dict[str, list[float | None]]:
        """Each eval's medians of ``rows(since, eval_ids, last=last)``, oldest first, read from
        ``recent.jsonl``'s columns; the rows are built only for evals it holds too few of."""
        tip = self.tip()
        if tip is None:
            return {}
        skipped: list[str] = []
        found = recent_medians(
            self._recent_text(tip), eval_ids, since=since, last=last, skipped=skipped.append
        )
        self._said_of(RECENT, skipped)
        short = {eval_id for eval_id in eval_ids if len(found.get(eval_id, ())) < last}
        if short:
            for eval_id in short:
                found[eval_id] = []
            for row in self.rows(since, short, last=last):
                found[row.eval_id].append(row.median)
        return {eval_id: points for eval_id, points in found.items() if points}

    def last_run(self) -> list[HistoryRow]:
        """The rows of the newest run file: the paths sort by day and time."""
        tip = self.tip()
        runs = [(blob, name) for blob, name in self._listing(tip) if name.startswith("runs/")]
        return self._rows_of([max(runs, key=lambda entry: entry[1])]) if runs else []

    def last_run_summary(self) -> RunSummary | None:
        """The newest run file's run and counts: its first line, where a run file says them
        (an older one's rows are counted)."""
        if (status := self._triaged(())) is not None:
            return status.last_run
        tip = self.tip()
        runs = [(blob, name) for blob, name in self._listing(tip) if name.startswith("runs/")]
        if not runs:
            return None
        blob, name = max(runs, key=lambda entry: entry[1])
        skipped: list[str] = []
        summary = run_summary(self._blobs_by_id([blob])[0], skipped=skipped.append)
        self._said_of(name, skipped)
        return summary

    def holds_history(self) -> bool:
        """Whether the tip holds any run or rollup (a new branch holds none yet)."""
        if (status := self._triaged(())) is not None:
            return status.holds_history()
        tip = self.tip()
        return tip is not None and bool(self._listing(tip))

    def read_text(self, path: str) -> str | None:
        """A file of the branch's tip (``progress.json``), or None when there is none."""
        if (status := self._triaged(())) is not None and path in status.files:
            return status.files[path]
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
        keep_runs: int = RECENT_RUNS,
        room: int = ROLL_UP_EVERY - 1,
    ) -> None:
        """Fold one run's rows into the tip (each eval keeps its newest ``keep_runs`` in
        ``recent.jsonl``, and up to ``room`` more; beyond, the older ones go to their week's
        rollup, together; the run's file replaces the newest run's), replace ``files``,
        change ``updates`` (each given the tip's text of its file), push a parentless
        commit in place of the tip; with ``watched``, the status commit cut from it goes in
        the same push (``firewall.store.statusref``).

        A push that loses a race with another job is rebuilt on the new tip and tried
        again, with a growing, jittered pause, for up to ``PUSH_WINDOW_S``: a count of
        tries is soon spent when many jobs push at once (a sharded matrix), and a
        window is what a job can afford. The fold and every update are done again on the
        new tip, so that two jobs of one matrix both keep their rows, and two jobs changing
        different evals of one file both keep theirs.
        Raises ``StateError`` when it cannot push, saying whether the remote refused
        it (a protected branch, a hook, a read-only token) or the race was lost.
        """
        fixed: dict[str, str | None] = dict(files or {})
        if not rows and not fixed and not updates:
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
            fallen: Fallen = {}
            with ThreadPoolExecutor(2) as pool:
                # The weeks this push will likely roll into are fetched while the run is
                # folded in, and git writes the tree while the weeks are folded.
                ahead = self._weeks_ahead(self._tip, rows, keep_runs, room)
                early = pool.submit(self._old_weeks, ahead)
                with _uncollected():
                    if rows:
                        folded, fallen = self._folded(self._tip, rows, keep_runs, room)
                        changes.update(folded)
                    targets, leaving = self._weeks_changed(self._tip, fallen)
                changes.update(leaving)
                writing = pool.submit(write_tree, self._g, self._tip, changes)
                old = {**early.result(), **self._old_weeks(targets - ahead)}
                archived = self._archived(self._tip, fallen, targets, old)
                tree = writing.result()
            commit, pushed = push_tip(
                self._g,
                self.remote,
                self.branch,
                self._tip,
                tree,
                archived,
                message=f"firewall: {what}",
                auth=self._auth,
                status=self._status_of(changes),
            )
            if pushed.returncode == 0:
                self._tip = commit
                return
            if refusal := refused(pushed.stderr):
                raise StateError(f"git push to {self.describe()} was refused: {refusal}")
            if not lost_a_race(pushed.stderr):
                raise StateError(
                    f"git push to {self.describe()} failed: {last_line(pushed.stderr)}"
                )
        raise StateError(
            f"git push to {self.describe()} lost the race {attempt} times in "
            f"{PUSH_WINDOW_S:g} s to other jobs pushing at once"
        )

    # --- reading ---------------------------------------------------------------------

    def _triaged(self, eval_ids: Collection[str] | None) -> StatusRead | None:
        """The status commit where it answers: this reader is `status`'s, the tip is not
        fetched yet (once it is, it answers everything), and the commit holds ``eval_ids``."""
        if not self.triage or self._fetched or eval_ids is None:
            return None
        status = self._status_commit()
        return status if status is not None and status.answers(eval_ids) else None

    def _status_commit(self) -> StatusRead | None:
        """The remote's status commit, fetched once (``firewall.store.statusref.fetch``)."""
        if not self._status_fetched:
            self._status_fetched = True
            self._status = statusref.fetch(self._g, self.remote, self.branch, auth=self._auth)
        return self._status

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
        """The tip's run and rollup files, as (blob, path): one ``ls-tree`` per tip, no
        contents."""
        if tip is None:
            return []
        if tip not in self._listed:
            listed = self._git("ls-tree", "-r", tip, "--", "runs/", "rollup/").splitlines()
            files = []
            for line in listed:
                info, _, name = line.partition("\t")
                if name.endswith(".jsonl") and _file_day(name) is not None:
                    files.append((info.split()[-1], name))
            self._listed[tip] = files
        return self._listed[tip]

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
                self._said_of(name, skipped)
        return [row for blob, _ in files for row in self._parsed[blob]]

    def _week_rows(
        self, weeks: Sequence[tuple[str, str]], eval_ids: Collection[str]
    ) -> list[HistoryRow]:
        """A few evals' rows of rollup weeks: the other evals' lines are passed over unparsed
        (`status` wants the quarantined evals' weeks, not a row of every eval)."""
        texts = self._blobs_by_id([blob for blob, _ in weeks])
        rows: list[HistoryRow] = []
        for (_, name), text in zip(weeks, texts, strict=True):
            skipped: list[str] = []
            rows += parse_rollup(text, skipped.append, eval_ids=eval_ids)
            self._said_of(name, skipped)
        return rows

    def _recent_text(self, tip: str) -> bytes:
        """The tip's ``recent.jsonl``, read once per command (empty when there is none), as
        bytes: a reader decodes the lines it wants, not ten megabytes at 5,000 evals."""
        if self._recent is None or self._recent[0] != tip:
            self._recent = (tip, self._raw([f"{tip}:{RECENT}"])[0] or b"")
        return self._recent[1]

    def _said_of(self, name: str, skipped: Sequence[str]) -> None:
        if skipped:
            more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
            self._skip(f"{name}: {skipped[0]}{more}")

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
        """The objects' texts ("" for one that is missing: a week's commit without its file)."""
        return [(raw or b"").decode("utf-8", "replace") for raw in self._raw(objects)]

    def _raw(self, objects: Sequence[str]) -> list[bytes | None]:
        """The objects' contents in one ``git cat-file --batch``; None for a missing one."""
        return self._g.objects(objects)

    # --- writing ---------------------------------------------------------------------

    def _folded(
        self, tip: str | None, rows: Sequence[HistoryRow], keep: int, room: int
    ) -> tuple[dict[str, str | None], Fallen]:
        """The tip's files a run's rows change (``recent.jsonl``, and ``runs/``: the newest
        run's file alone), and the rows that fall out of the recent file, by week.

        Run files ``recent.jsonl`` does not hold yet (an older firewall kept two weeks of
        them) are folded in too, ``MIGRATE_FILES`` a push, the newest first.
        """
        runs = [name for _, name in self._listing(tip) if name.startswith("runs/")]
        recent = self._recent_text(tip) if tip is not None else b""
        known = recent_run_ids(recent)
        news = sorted((n for n in runs if _run_id(n) not in known), reverse=True)
        news = news[:MIGRATE_FILES]
        texts = self._blobs(tip, news) if tip is not None else []
        earlier = [row for text in texts for row in parse_file(text)]
        path, text = run_file(rows)
        newest = max([*runs, path])
        changes: dict[str, str | None] = {
            name: None
            for name in runs
            if name != newest and (name in news or _run_id(name) in known)
        }
        if newest == path:
            changes[path] = text
        changes[RECENT], fallen = fold_recent(recent, [*earlier, *rows], keep=keep, room=room)
        return changes, fallen

    def _weeks_changed(
        self, tip: str | None, fallen: Fallen
    ) -> tuple[set[str], dict[str, str | None]]:
        """The weeks a push changes, and the tip's rollup files that leave it: the weeks the
        fallen rows fall into, and the weeks an older firewall left on the tip,
        ``MIGRATE_WEEKS`` a push."""
        on_tip = sorted(week for _, name in self._listing(tip) if (week := week_of_path(name)))
        targets = set(fallen) | set(on_tip[:MIGRATE_WEEKS])
        return targets, {path_of(week): None for week in targets if week in on_tip}

    def _weeks_ahead(
        self, tip: str | None, rows: Sequence[HistoryRow], keep: int, room: int
    ) -> set[str]:
        """The weeks a push's fallen runs will likely fall into, known before the fold: when
        it is some eval's turn to roll up, those of the recent file's runs but the newest
        ``keep - 1`` (one new run a line, the line cut back to ``keep``). A week it misses
        is fetched after the fold."""
        if tip is None or not rows:
            return set()
        header = next(iter_lines(self._recent_text(tip)), "")
        if not turn_comes(header, {row.eval_id for row in rows}, room):
            return set()
        runs = runs_of(header, None)
        stamps = sorted(str(run.get("build_ts", "")) for run in runs.values())
        return {week for stamp in stamps[: len(stamps) - keep + 1] if (week := week_or_none(stamp))}

    def _old_weeks(self, weeks: set[str]) -> dict[str, str]:
        """The remote's commits of ``weeks``, fetched (``firewall.store.weeks.fetch``)."""
        if not weeks:
            return {}
        return week_refs.fetch(self._g, self.remote, self.branch, weeks, auth=self._auth)

    def _archived(
        self, tip: str | None, fallen: Fallen, targets: set[str], old: Mapping[str, str]
    ) -> dict[str, tuple[str, str | None]]:
        """Per week a push changes (``targets``), its new commit and the commit it replaces
        (``old``; None for a new week's ref): each merged with its rollup so far, the
        fallen rows folded in. A week an older firewall left on the tip moves as it is,
        unread, when it has no ref yet; with one, the two are merged.
        """
        if not targets:
            return {}
        on_tip = {week: blob for blob, name in self._listing(tip) if (week := week_of_path(name))}
        blobs: dict[str, str] = {}
        for week in sorted(targets):
            if week not in fallen and week not in old:
                blobs[week] = on_tip[week]
                continue
            sources = [f"{tip}:{path_of(week)}"] if week in on_tip else []
            sources += [f"{old[week]}:{path_of(week)}"] if week in old else []
            texts = self._blobs_by_id(sources)
            blobs[week] = write_blob(self._g, fold_week(week, texts, fallen.get(week, ())))
        made = week_refs.commits(self._g, blobs, message="firewall: the rollup of")
        return {week: (made[week], old.get(week)) for week in targets}

    def _status_of(self, changes: Mapping[str, str | None]) -> str | None:
        """The ``status.jsonl`` of the tip a push makes: its recent file cut to the evals
        ``watched`` names, with its newest run's header. None without ``watched``, when it
        cannot say them, or while an older firewall's run files wait on the tip to be
        folded in (the recent file alone does not answer yet): then no status commit is
        pushed, and the old one, cut from an older tip, is read by no one
        (``statusref.fetch``)."""
        if self.watched is None:
            return None
        try:
            watched = set(self.watched())
        except FirewallError:  # an unreadable registry: its own reader says so
            return None
        tip = self._tip
        recent = changes[RECENT] if RECENT in changes else self._recent_text(tip) if tip else None
        kept = [
            (name, blob)
            for blob, name in self._listing(tip)
            if name.startswith("runs/") and name not in changes
        ]
        known = recent_run_ids(recent or "")
        if any(_run_id(name) not in known for name, _ in kept):
            return None
        written = [(n, t) for n, t in changes.items() if n.startswith("runs/") and t is not None]
        if written:
            last: str | None = max(written)[1].partition("\n")[0]
        else:
            raw = self._raw([max(kept)[1]])[0] if kept else None
            last = None if raw is None else raw.partition(b"\n")[0].decode("utf-8", "replace")
        return status_text(recent, watched, last)

    def _text(self, tip: str | None, name: str) -> str | None:
        """A file of the tip, or None when it has none: one ``cat-file``, which says which."""
        if tip is None:
            return None
        if name == RECENT:
            return self._recent_text(tip).decode("utf-8", "replace") or None
        raw = self._raw([f"{tip}:{name}"])[0]
        return None if raw is None else raw.decode("utf-8", "replace")

    # --- git -------------------------------------------------------------------------

    @property
    def _g(self) -> Git:
        return Git(self.cwd, self.env)

    def _git(
        self, *args: str, stdin: str | None = None, extra_env: Mapping[str, str] | None = None
    ) -> str:
        return self._g.out(*args, stdin=stdin, extra_env=extra_env)


@contextlib.contextmanager
def _uncollected() -> Iterator[None]:
    """The cyclic collector paused, for a fold: it makes no cycle (what it drops is freed
    as it goes), yet the rows it rolls up and keeps set off passes over the run's whole
    heap (0.15 s of a fold that rolled 5,000 evals up with a million objects alive).
    Turned on again only by whoever paused it."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _chosen(
    by_eval: Mapping[str, list[HistoryRow]],
    eval_ids: Collection[str] | None,
    *,
    since: str | None,
    ref: str | None,
    last: int | None,
) -> list[HistoryRow]:
    """The wanted evals' rows built at ``since`` or later, of runs on ``ref``, each eval's
    newest ``last``; all of them oldest first."""
    rows = []
    for eval_id, kept in by_eval.items():
        if eval_ids is not None and eval_id not in eval_ids:
            continue
        chosen = sorted(
            (
                row
                for row in kept
                if (since is None or row.build_ts >= since) and (ref is None or row.git_ref == ref)
            ),
            key=lambda row: row.build_ts,
        )
        rows += chosen[-last:] if last is not None else chosen
    return sorted(rows, key=lambda row: row.build_ts)


def _run_day(name: str) -> str | None:
    parts = name.split("/")
    if len(parts) != 5 or parts[0] != "runs":
        return None
    return f"{parts[1]}-{parts[2]}-{parts[3]}"


def _run_id(name: str) -> str:
    """The run a run file is of: its name ends ``-<run id>.jsonl``."""
    return name.rsplit("/", 1)[-1].removesuffix(".jsonl").partition("-")[2]


def _file_day(name: str) -> str | None:
    """The last day a file's rows can be of: a run's day, a rollup week's Sunday; None for a
    file that is neither."""
    if name.startswith("runs/"):
        return _run_day(name)
    week = week_of_path(name)
    return last_day(week) if week else None


def _reaches(rows: Iterable[HistoryRow], since: str | None, last: int | None) -> bool:
    """Whether an eval's newest runs answer a window alone: they reach back before ``since``,
    or hold ``last`` runs of it. Otherwise its older runs may be in rolled-up weeks."""
    if since is None:
        return False
    kept = [row.build_ts for row in rows]
    return any(ts < since for ts in kept) or (
        last is not None and sum(ts >= since for ts in kept) >= last
    )
