"""The team's history: the state branch, with the local file as this machine's copy."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

from firewall.lifecycle import Candidate, Progress
from firewall.store.git import StateError
from firewall.store.gitstate import RAW_DAYS, GitState
from firewall.store.history import HistoryRow, LocalHistory
from firewall.store.progress import CANDIDATES, PROGRESS, Model, StateFile
from firewall.timeutil import to_text


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

    def recent(
        self, eval_ids: Collection[str] | None = None, *, since: dt.datetime
    ) -> list[HistoryRow]:
        """The window's rows; the branch keeps two weeks of runs whole and older weeks
        rolled up, so what it holds (and a job fetches) stays small as it ages."""
        shared = self._shared()
        if shared is None:
            return self.local.recent(eval_ids, since=since)
        start = to_text(since)
        return [
            row
            for row in shared
            if row.build_ts >= start and (eval_ids is None or row.eval_id in eval_ids)
        ]

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
        return PROGRESS.parse(self._read(PROGRESS.path, "the reviewed registry stands as it is"))

    def candidates(self) -> dict[str, Candidate]:
        """The candidates pull requests recorded on the branch, and not yet settled."""
        text = self._read(CANDIDATES.path, "the candidates on the branch wait for the next run")
        return CANDIDATES.parse(text) or {}

    def change_progress(
        self, changes: Mapping[str, Callable[[Progress | None], Progress | None]], why: str
    ) -> bool:
        """Change some evals' progress on the tip the push lands on; False (said once) when
        the branch cannot be written. ``why`` says what is lost then."""
        return self._update(PROGRESS, changes, why)

    def change_candidates(
        self, changes: Mapping[str, Callable[[Candidate | None], Candidate | None]], why: str
    ) -> bool:
        """Record, replace or settle candidates on the tip the push lands on; False (said
        once) when the branch cannot be written."""
        return self._update(CANDIDATES, changes, why)

    def _update(
        self,
        file: StateFile[Model],
        changes: Mapping[str, Callable[[Model | None], Model | None]],
        why: str,
    ) -> bool:
        if not changes:
            return True
        if self._unreachable:
            return False
        try:
            self.state.push([], updates={file.path: file.merge(changes)})
        except StateError as exc:
            self._give_up(f"{exc}; {why}")
            return False
        return True

    def _read(self, path: str, why: str) -> str | None:
        if self._unreachable:
            return None
        try:
            return self.state.read_text(path)
        except StateError as exc:
            self._give_up(f"{exc}; {why}")
            return None

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
