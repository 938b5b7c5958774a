"""The history on a branch of the repository's own git remote, so that it outlives the runner.

A CI runner keeps nothing between jobs. The firewall therefore keeps its
history where every job can reach it: an orphan branch (``[state] branch``,
``firewall-state`` by default) of a git remote (``[state] remote``, ``origin``).
It writes the branch itself, with git's plumbing and the job's own git
credentials, so that GitHub, GitLab, Jenkins and a laptop behave alike; no
workflow step is needed and the work tree is never touched.

The branch holds one file per run, so that concurrent jobs never edit the
same file: a push that loses the race is rebuilt on the new tip and pushed
again. Runs older than two weeks are rolled up, one row per eval per week, so that what a job
fetches stays small as the repository ages. Readers take the branch's tip
only (``git fetch --depth 1``)::

    runs/2026/12/01/090512Z-3f2a9c1b7d4e.jsonl   one run: a header line, then a row per eval
    rollup/2026-W44.jsonl                          one row per eval for an older week

Each line of a run file is a history row without the fields its header
already says (run id, mode, time, commit, ref), and without empty ones.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from firewall.lifecycle import Progress
from firewall.store.git import IDENTITY, Git, StateError, last_line
from firewall.store.history import HistoryRow, LocalHistory
from firewall.store.progress import PROGRESS_PATH, parse_progress, render_progress
from firewall.timeutil import to_text

STATE_REF = "refs/firewall/state"  # where the fetched tip is kept in the local repository
FORMAT_VERSION = 1
PUSH_ATTEMPTS = 5
DECIMALS = 4
RAW_DAYS = 14  # runs kept whole: the trend window; older ones are rolled up by week
_RUN_FIELDS = ("run_id", "mode", "build_ts", "git_sha", "git_ref")
_EMPTY: tuple[object, ...] = (None, "", (), [], {})


@dataclasses.dataclass
class SharedHistory:
    """The history of the team: the state branch, with the local file as this machine's copy.

    Every run's rows go to the local file; a run that ``writes`` (CI on the default
    branch) also pushes them to the branch. Readers read the branch when it can be
    fetched, else the local file. A branch that cannot be reached or pushed to is
    said once, through ``notice``, and changes nothing else: not the decision, not
    the exit code.
    """

    local: LocalHistory
    state: GitState
    writes: Callable[[], bool]
    notice: Callable[[str], None]
    keep_days: int | None = RAW_DAYS  # runs older than this are rolled up when writing
    _unreachable: bool = dataclasses.field(default=False, repr=False)

    def describe(self) -> str:
        return f"{self.state.describe()} (local copy {self.local.describe()})"

    def append(self, rows: Sequence[HistoryRow]) -> None:
        self.local.append(rows)
        if not rows or self._unreachable or not self.writes():
            return
        try:
            self.state.push(rows, keep_days=self.keep_days)
        except StateError as exc:
            self._give_up(f"{exc}; this run's history stays in {self.local.describe()} only")

    def scan(self, eval_ids: Collection[str] | None = None) -> Iterator[HistoryRow]:
        shared = self._shared()
        if shared is None:
            yield from self.local.scan(eval_ids)
            return
        for row in shared:
            if eval_ids is None or row.eval_id in eval_ids:
                yield row

    def last_run(self) -> list[HistoryRow]:
        shared = self._shared()
        if shared is None:
            return self.local.last_run()
        runs = [row for row in shared if row.mode != "rollup"]
        if not runs:
            return []
        newest = max(runs, key=lambda row: row.build_ts).run_id
        return [row for row in runs if row.run_id == newest]

    def progress(self) -> dict[str, Progress] | None:
        """The nightly's progress per quarantined eval, or None when the branch has none."""
        if self._unreachable:
            return None
        try:
            return parse_progress(self.state.read_text(PROGRESS_PATH))
        except StateError as exc:
            self._give_up(f"{exc}; the reviewed registry stands as it is")
            return None

    def save_progress(self, progress: Mapping[str, Progress]) -> None:
        """Replace the progress file, when this run writes the shared state."""
        if self._unreachable or not self.writes():
            return
        try:
            self.state.push([], files={PROGRESS_PATH: render_progress(progress)})
        except StateError as exc:
            self._give_up(f"{exc}; tonight's streaks were not saved")

    def _shared(self) -> list[HistoryRow] | None:
        """The branch's rows; None when it is out of reach or holds none yet (a team that
        has no CI runs on its default branch: the local file is then the only history)."""
        if self._unreachable:
            return None
        try:
            return self.state.rows() or None
        except StateError as exc:
            self._give_up(f"{exc}; reading the history from {self.local.describe()} instead")
            return None

    def _give_up(self, message: str) -> None:
        self._unreachable = True
        self.notice(f"the history branch {self.state.describe()} is out of reach: {message}")


@dataclasses.dataclass
class GitState:
    """The state branch of one remote, fetched at most once per command."""

    cwd: Path
    remote: str
    branch: str
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    _rows: list[HistoryRow] | None = dataclasses.field(default=None, repr=False)
    _tip: str | None = dataclasses.field(default=None, repr=False)

    def describe(self) -> str:
        return f"{self.remote}/{self.branch}"

    def rows(self) -> list[HistoryRow]:
        """Every row on the branch's tip, oldest first (fetched on first use)."""
        if self._rows is None:
            self._tip = self._fetch()
            self._rows = sorted(self._read(self._tip), key=lambda row: row.build_ts)
        return self._rows

    def read_text(self, path: str) -> str | None:
        """A file of the branch's tip (``progress.json``), or None when there is none."""
        self.rows()
        if self._tip is None or not self._exists(self._tip, path):
            return None
        return self._blobs(self._tip, [path])[0]

    def push(
        self,
        rows: Sequence[HistoryRow],
        *,
        files: Mapping[str, str] | None = None,
        keep_days: int | None = RAW_DAYS,
    ) -> None:
        """Add one run's rows as a file of its own, replace ``files``, roll up old runs, push.

        A push that loses a race with another job is rebuilt on the new tip, up
        to ``PUSH_ATTEMPTS`` times: run files never collide, and a replaced file
        is the writer's whole new version. Raises ``StateError`` when it cannot push.
        """
        changes = dict(files or {})
        if rows:
            path, text = run_file(rows)
            changes[path] = text
        if not changes:
            return
        self.rows()
        what = f"{rows[0].mode} {rows[0].run_id}, {len(rows)} evals" if rows else ", ".join(changes)
        for attempt in range(PUSH_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0.05, 0.3) * attempt)  # let the winner finish
                self._tip = self._fetch()
            cutoff = _cutoff(rows, keep_days) if rows else None
            tree = self._tree(self._tip, changes, rollup_before=cutoff)
            commit = self._git(
                "commit-tree",
                tree,
                *(("-p", self._tip) if self._tip else ()),
                "-m",
                f"firewall: {what}",
                extra_env=IDENTITY,
            )
            pushed = self._run("push", "--quiet", self.remote, f"{commit}:refs/heads/{self.branch}")
            if pushed.returncode == 0:
                self._tip = commit
                self._remember(rows)
                return
            if not _lost_a_race(pushed.stderr):
                raise StateError(
                    f"git push to {self.describe()} failed: {last_line(pushed.stderr)}"
                )
        raise StateError(
            f"git push to {self.describe()} lost the race {PUSH_ATTEMPTS} times in a row"
        )

    def _remember(self, rows: Sequence[HistoryRow]) -> None:
        assert self._rows is not None
        self._rows.extend(rows)

    # --- reading ---------------------------------------------------------------------

    def _fetch(self) -> str | None:
        """The tip of the remote branch, fetched shallow; None when the branch does not exist."""
        return self._g.fetch_tip(self.remote, self.branch, STATE_REF)

    def _read(self, tip: str | None) -> list[HistoryRow]:
        if tip is None:
            return []
        names = self._git("ls-tree", "-r", "--name-only", tip).splitlines()
        wanted = [n for n in names if n.endswith(".jsonl") and n.startswith(("runs/", "rollup/"))]
        rows: list[HistoryRow] = []
        for name, text in zip(wanted, self._blobs(tip, wanted), strict=True):
            rows.extend(parse_file(text) if name.startswith("runs/") else parse_rollup(text))
        return rows

    def _blobs(self, tip: str, names: Sequence[str]) -> list[str]:
        """The files' contents in one `git cat-file --batch`, not one process per file."""
        if not names:
            return []
        request = "".join(f"{tip}:{name}\n" for name in names).encode()
        out = self._g.batch(request)
        texts, at = [], 0
        for _ in names:
            header_end = out.index(b"\n", at)
            size = int(out[at:header_end].split()[2])
            texts.append(out[header_end + 1 : header_end + 1 + size].decode("utf-8", "replace"))
            at = header_end + 1 + size + 1
        return texts

    # --- writing ---------------------------------------------------------------------

    def _tree(self, tip: str | None, files: Mapping[str, str], *, rollup_before: str | None) -> str:
        """The tip's tree with ``files`` added and, before ``rollup_before``, runs rolled up."""
        with tempfile.TemporaryDirectory(prefix="firewall-state-") as scratch:
            index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            if tip is not None:
                self._git("read-tree", tip, extra_env=index)
            changes: dict[str, str | None] = dict(files)
            if rollup_before is not None and tip is not None:
                changes.update(self._rollup(tip, rollup_before))
            for path, text in changes.items():
                if text is None:
                    self._git("update-index", "--force-remove", path, extra_env=index)
                    continue
                blob = self._git("hash-object", "-w", "--stdin", stdin=text)
                self._git(
                    "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", extra_env=index
                )
            return self._git("write-tree", extra_env=index)

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


# --- the files on the branch ---------------------------------------------------------


def run_file(rows: Sequence[HistoryRow]) -> tuple[str, str]:
    """The path and text of one run's file."""
    first = rows[0]
    header = {"schema_version": FORMAT_VERSION, **{f: getattr(first, f) for f in _RUN_FIELDS}}
    stamp = first.build_ts  # 2026-12-01T09:05:12Z
    path = (
        f"runs/{stamp[0:4]}/{stamp[5:7]}/{stamp[8:10]}/"
        f"{stamp[11:13]}{stamp[14:16]}{stamp[17:19]}Z-{first.run_id}.jsonl"
    )
    lines = [json.dumps(header, separators=(",", ":"))]
    lines += [_compact(row, leave_out=_RUN_FIELDS) for row in rows]
    return path, "\n".join(lines) + "\n"


def _compact(row: HistoryRow, *, leave_out: Sequence[str] = ()) -> str:
    """A row as one short line: no empty fields, numbers to 4 decimals.

    Four decimals are finer than any decision looks (a threshold, an IQR limit, a
    drop of 0.01), and random trailing digits are what compresses worst: at a
    thousand evals they were most of what a job had to fetch.
    """
    document: dict[str, object] = {
        key: round(value, DECIMALS) if isinstance(value, float) else value
        for key, value in json.loads(row.to_json()).items()
        if key not in leave_out and value not in _EMPTY
    }
    if row.drift:
        document["drift"] = {k: round(v, DECIMALS) for k, v in row.drift.items()}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def parse_file(text: str) -> Iterable[HistoryRow]:
    """The rows of one run file; lines that do not parse are skipped, as in the local file."""
    lines = text.splitlines()
    try:
        header = json.loads(lines[0]) if lines else None
    except ValueError:
        return
    if not isinstance(header, dict) or header.get("schema_version") != FORMAT_VERSION:
        return
    run = {f: header.get(f) for f in _RUN_FIELDS}
    for line in lines[1:]:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            row = HistoryRow.from_json({**data, **run})
            if row is not None:
                yield row


def week_of(build_ts: str) -> str:
    """The ISO week of a timestamp, e.g. ``2026-W49``."""
    year, week, _ = dt.date.fromisoformat(build_ts[:10]).isocalendar()
    return f"{year}-W{week:02d}"


def roll_up(rows: Iterable[HistoryRow]) -> list[HistoryRow]:
    """One row per eval per week: the means of its runs' medians, IQRs, means and pass rates.

    The rolled-up row keeps what trends and calibration read, and the status and k of
    the week's latest run; ``n`` counts the runs it stands for, so that a week folded a
    night at a time (``_merge``) comes to the same numbers as one folded at once.
    """
    groups: dict[tuple[str, str], list[HistoryRow]] = defaultdict(list)
    for row in rows:
        groups[(row.eval_id, week_of(row.build_ts))].append(row)
    rolled = []
    for (eval_id, week), group in sorted(groups.items()):
        group.sort(key=lambda r: r.build_ts)
        last = group[-1]
        rolled.append(
            HistoryRow(
                eval_id=eval_id,
                run_id=f"rollup-{week}",
                mode="rollup",
                status=last.status,
                k=last.k,
                build_ts=last.build_ts,
                median=_mean([r.median for r in group]),
                iqr=_mean([r.iqr for r in group]),
                mean=_mean([r.mean for r in group]),
                pass_rate=_mean([r.pass_rate for r in group]),
                n=len(group),
            )
        )
    return rolled


def render_rollup(week: str, rows: Sequence[HistoryRow]) -> str:
    """A week's rollup file: the header, then one row per eval (a later fold replaces it)."""
    latest: dict[str, HistoryRow] = {}
    for row in rows:
        kept = latest.get(row.eval_id)
        if kept is None or row.build_ts >= kept.build_ts:
            latest[row.eval_id] = _merge(kept, row) if kept else row
    header = json.dumps({"schema_version": FORMAT_VERSION, "week": week}, separators=(",", ":"))
    body = [_compact(row) for _, row in sorted(latest.items())]
    return "\n".join([header, *body]) + "\n"


def parse_rollup(text: str) -> Iterable[HistoryRow]:
    lines = text.splitlines()
    for line in lines[1:]:
        try:
            row = HistoryRow.from_json(json.loads(line))
        except ValueError:
            continue
        if row is not None:
            yield row


def _merge(earlier: HistoryRow, later: HistoryRow) -> HistoryRow:
    """Two rollups of one eval and week (a week is folded in a night at a time) as one.

    Means and pass rates merge exactly (weighted by the runs each stands for); the
    median and the IQR's 80th percentile merge as weighted means of the parts, an
    approximation that trends and calibration can live with.
    """

    def weighted(a: float | None, b: float | None) -> float | None:
        if a is None or b is None:
            return b if a is None else a
        return (a * earlier.n + b * later.n) / (earlier.n + later.n)

    return dataclasses.replace(
        later,
        n=earlier.n + later.n,
        median=weighted(earlier.median, later.median),
        iqr=weighted(earlier.iqr, later.iqr),
        mean=weighted(earlier.mean, later.mean),
        pass_rate=weighted(earlier.pass_rate, later.pass_rate),
    )


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


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


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
