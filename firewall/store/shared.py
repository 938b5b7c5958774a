"""The team's history: the state branch, with the local file as this machine's copy."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TypeVar

from firewall.constants import RECENT_RUNS
from firewall.lifecycle import Candidate, Progress
from firewall.store.git import StateError
from firewall.store.gitstate import GitState
from firewall.store.history import HistoryRow, LocalHistory, RunSummary
from firewall.store.progress import CANDIDATES, PROGRESS, Model, StateFile
from firewall.timeutil import to_text

Result = TypeVar("Result")


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
    keep_runs: int = RECENT_RUNS  # each eval's newest runs kept whole; older ones rolled up
    _unreachable: bool = dataclasses.field(default=False, repr=False)
    _said: set[str] = dataclasses.field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        if self.state.notice is None:  # lines of the branch that cannot be read are said here
            self.state.notice = self.notice

    def describe(self) -> str:
        return f"{self.state.describe()} (local copy {self.local.describe()})"

    def triage(self) -> None:
        """Read as `firewall status` does, the registry's evals alone: from the branch's
        status commit where it answers, a few kilobytes (``firewall.store.statusref``)."""
        self.state.triage = True

    def append(self, rows: Sequence[HistoryRow]) -> None:
        self.local.append(rows)
        if not rows or self._unreachable or not self.writes():
            return
        try:
            self.state.push(rows, keep_runs=self.keep_runs)
        except StateError as exc:
            self._give_up(f"{exc}; this run's history stays in {self.local.describe()} only")

    def scan(self, eval_ids: Collection[str] | None = None) -> Iterator[HistoryRow]:
        """Every row of the branch, its rolled-up weeks fetched (calibration reads the whole
        year; CI commands do not)."""
        if not self._on_branch():
            yield from self.local.scan(eval_ids)
            return
        yield from self._shared(lambda: self.state.rows(eval_ids=eval_ids, weeks=True)) or ()

    def recent(
        self,
        eval_ids: Collection[str] | None = None,
        *,
        since: dt.datetime,
        last: int | None = None,
        ref: str | None = None,
        weeks: bool = False,
    ) -> list[HistoryRow]:
        """The window's rows (``HistoryStore.recent``): from the branch's recent file, and,
        with ``weeks``, the rolled-up weeks of the window where it cannot answer, fetched
        for this; so a year of state costs a CI command what a week does."""
        if not self._on_branch():
            return self.local.recent(eval_ids, since=since, last=last, ref=ref)
        return (
            self._shared(
                lambda: self.state.rows(to_text(since), eval_ids, last=last, ref=ref, weeks=weeks)
            )
            or []
        )

    def medians(
        self, eval_ids: Collection[str], *, since: dt.datetime, last: int
    ) -> dict[str, list[float | None]]:
        """``HistoryStore.medians``: from the branch's recent file's columns, no row built."""
        if not self._on_branch():
            return self.local.medians(eval_ids, since=since, last=last)
        read = self._shared(lambda: self.state.medians(to_text(since), eval_ids, last=last))
        return read or {}

    def last_run(self) -> list[HistoryRow]:
        """The newest run file's rows."""
        if not self._on_branch():
            return self.local.last_run()
        return self._shared(self.state.last_run) or []

    def last_run_summary(self) -> RunSummary | None:
        """The newest run file's run and counts, from its first line."""
        if not self._on_branch():
            return self.local.last_run_summary()
        return self._shared(self.state.last_run_summary)

    def progress(self) -> dict[str, Progress] | None:
        """The nightly's progress per quarantined eval, or None when the branch has none."""
        text = self._read(PROGRESS.path, "the reviewed registry stands as it is")
        return self._parsed(PROGRESS, text, "the reviewed registry stands as it is")

    def candidates(self) -> dict[str, Candidate]:
        """The candidates pull requests recorded on the branch, and not yet settled."""
        why = "the candidates on the branch wait for the next run"
        return self._parsed(CANDIDATES, self._read(CANDIDATES.path, why), why) or {}

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

    def _parsed(
        self, file: StateFile[Model], text: str | None, why: str
    ) -> dict[str, Model] | None:
        """The file's entries; one it cannot read (garbage, deep nesting, NaN) is as if empty,
        said once, and written anew by the next change."""
        parsed = file.parse(text)
        if text is not None and parsed is None and file.path not in self._said:
            self._said.add(file.path)
            self.notice(
                f"{file.path} on the history branch {self.state.describe()} cannot be read "
                f"and counts as empty; {why}"
            )
        return parsed

    def _on_branch(self) -> bool:
        """Whether the branch is the history: reachable and holding rows (a team with no CI
        runs on its default branch yet has only the local file)."""
        return self._shared(self.state.holds_history) is True

    def _shared(self, read: Callable[[], Result]) -> Result | None:
        """What ``read`` reads of the branch; None (said once) when it is out of reach."""
        if self._unreachable:
            return None
        try:
            return read()
        except StateError as exc:
            self._give_up(f"{exc}; reading the history from {self.local.describe()} instead")
            return None

    def _give_up(self, message: str) -> None:
        self._unreachable = True
        self.notice(f"the history branch {self.state.describe()} is out of reach: {message}")
