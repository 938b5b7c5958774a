"""The context of one command, built once: settings, evals, the registry snapshot, the
history store, the CI environment, the commit under test and a clock.

Every stage of a run reads what it needs from here instead of loading it again,
so one `firewall run` reads ``quarantine.json`` once (and again only under the
lock, to change it) and scans the history once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from firewall import output
from firewall.config import LoadedConfig, Settings, load_config
from firewall.discovery import discover, nothing_selected, select
from firewall.errors import ConfigError, NothingSelected
from firewall.lifecycle import (
    PROGRESS_FIELDS,
    Entry,
    Progress,
    progress_of,
    reviewed_change,
    with_progress,
)
from firewall.output import in_actions
from firewall.pipeline.checkout import Checkout, in_ci
from firewall.spec import EvalSpec
from firewall.store.gitstate import GitState
from firewall.store.history import HistoryStore, LocalHistory
from firewall.store.registry import Registry
from firewall.store.shared import SharedHistory
from firewall.timeutil import now

Clock = Callable[[], dt.datetime]


@dataclasses.dataclass(frozen=True)
class GitInfo:
    """The commit and ref under test: the CI's word for them when there is one, else git's."""

    sha: str | None
    ref: str | None

    @classmethod
    def find(cls, cwd: Path, env: Mapping[str, str]) -> GitInfo:
        return cls(
            sha=env.get("GITHUB_SHA") or _git(cwd, "rev-parse", "HEAD"),
            ref=env.get("GITHUB_REF") or _git(cwd, "symbolic-ref", "-q", "HEAD"),
        )


@dataclasses.dataclass
class Context:
    """What every stage of one command reads; built by ``load``, or by hand in tests."""

    cwd: Path
    config: LoadedConfig
    specs: list[EvalSpec]
    history: HistoryStore
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    clock: Clock = now
    notices: list[str] = dataclasses.field(default_factory=list)
    _entries: dict[str, Entry] | None = dataclasses.field(default=None, repr=False)
    _trends: dict[str, str] | None = dataclasses.field(default=None, repr=False)

    @property
    def settings(self) -> Settings:
        return self.config.settings

    @property
    def registry(self) -> Registry:
        return Registry(self.cwd / self.settings.registry)

    @property
    def in_actions(self) -> bool:
        return in_actions(self.env)

    @functools.cached_property
    def git(self) -> GitInfo:
        return GitInfo.find(self.cwd, self.env)

    @functools.cached_property
    def checkout(self) -> Checkout:
        return Checkout.find(self.cwd, self.env, self.settings.state.remote)

    def notice(self, text: str) -> None:
        """Something a user should know that changes no decision: said once, on stderr.

        It may quote a git remote's own message; the sink makes sure that no line of it
        can be taken for a workflow command, as it does for eval text.
        """
        if text not in self.notices:
            self.notices.append(text)
            output.warn(text)

    @property
    def reviewed(self) -> bool:
        """In CI the registry is the reviewed truth: it changes only through commits.

        Runs there never write it (an instability is a candidate, recorded on its
        issue); the nightly keeps its progress on the state branch and writes only
        the changes a reviewer must see, for `firewall propose` to commit.
        """
        return in_ci(self.env)

    def entries(self) -> dict[str, Entry]:
        """The registry as this command found it (or last wrote it), read once; in CI with
        the nightly's progress (streaks, last probes, issue numbers) laid over it."""
        if self._entries is None:
            entries = self.registry.read()
            progress = self._progress()
            if progress:
                entries = {i: with_progress(e, progress.get(i)) for i, e in entries.items()}
            self._entries = entries
        return dict(self._entries)

    def save_reviewed(
        self,
        before: Mapping[str, Entry],
        after: Mapping[str, Entry],
        *,
        waiting: Mapping[str, Progress] | None = None,
    ) -> list[str]:
        """The nightly's record step in CI: progress to the state branch, and to the
        registry file only what a reviewer must see. ``waiting`` is the progress of
        releases whose pull request is not merged yet. Returns the evals whose reviewed
        entry changed (adopted, released, or edited)."""
        if isinstance(self.history, SharedHistory):
            progress = {i: progress_of(e) for i, e in after.items()}
            self.history.save_progress({**progress, **(waiting or {})})
        elif after:
            self.notice(
                f"no state branch to keep tonight's streaks in (the git remote "
                f"{self.settings.state.remote or '(none)'!r} of [state] is not set up here): "
                "every nightly starts counting anew, so no quarantine is ever released"
            )
        changed = sorted(
            eval_id
            for eval_id in set(before) | set(after)
            if reviewed_change(before.get(eval_id), after.get(eval_id))
        )
        if changed:
            reviewed = set(Entry.model_fields) - set(PROGRESS_FIELDS)
            with self.registry.edit() as entries:
                for eval_id in changed:
                    if eval_id not in after:
                        entries.pop(eval_id, None)
                    elif eval_id in entries:  # keep the file's own progress: no noise in the diff
                        update = after[eval_id].model_dump(include=reviewed)
                        entries[eval_id] = entries[eval_id].model_copy(update=update)
                    else:
                        entries[eval_id] = after[eval_id]
        self._entries = dict(after)
        return changed

    def remember_issues(self, numbers: Mapping[str, int], dropped: Mapping[str, int]) -> None:
        """Issue numbers learnt from GitHub (and the ones proved gone), kept where this
        command keeps its state: the registry outside CI, the nightly's progress in CI."""

        def apply(entries: dict[str, Entry]) -> None:
            for eval_id, number in dropped.items():
                if eval_id in entries and entries[eval_id].issue == number:
                    entries[eval_id] = entries[eval_id].model_copy(update={"issue": None})
            for eval_id, number in numbers.items():
                if eval_id in entries:
                    entries[eval_id] = entries[eval_id].model_copy(update={"issue": number})

        if not self.reviewed:
            with self.edit_registry() as entries:
                apply(entries)
            return
        current = self.entries()
        apply(current)
        self._entries = current
        if isinstance(self.history, SharedHistory):
            self.history.save_progress({i: progress_of(e) for i, e in current.items()})

    def team_entries(self) -> dict[str, Entry]:
        """The entries with the team's progress from the state branch, wherever this runs:
        what `firewall status` shows on a laptop as in CI."""
        entries = self.entries()
        if self.reviewed or not isinstance(self.history, SharedHistory):
            return entries  # in CI entries() has laid it over already
        progress = self.history.progress() or {}
        return {i: with_progress(e, progress.get(i)) for i, e in entries.items()}

    def _progress(self) -> dict[str, Progress] | None:
        if not self.reviewed or not isinstance(self.history, SharedHistory):
            return None
        return self.history.progress()

    @contextlib.contextmanager
    def edit_registry(self) -> Iterator[dict[str, Entry]]:
        """Change the registry under its lock; the snapshot follows what was written."""
        with self.registry.edit() as entries:
            yield entries
            self._entries = dict(entries)

    def trends(self, eval_ids: Iterable[str]) -> dict[str, str]:
        """Sparklines of recent medians of these evals and every quarantined one: one read
        of the trend window, however long the history."""
        from firewall.report.status import read_trends  # only a run that publishes needs them

        wanted = set(eval_ids) | set(self.entries())
        if self._trends is None or not wanted <= self._trends.keys():
            self._trends = dict.fromkeys(wanted, "") | read_trends(
                self.history, wanted, at=self.clock()
            )
        return {eval_id: self._trends[eval_id] for eval_id in wanted if self._trends[eval_id]}


def load(
    config_path: Path | None = None,
    ids: Sequence[str] = (),
    tags: Sequence[str] = (),
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    with_evals: bool = True,
    require: bool = False,
    clock: Clock = now,
) -> Context:
    """Read the config, check the paths it names, and discover the selected evals.

    ``with_evals=False`` skips discovery (which imports the evals' modules) for
    commands that need only the settings and the registry. ``require`` makes an
    empty selection a ``NothingSelected`` (exit 5): what `run` and `probe` ask.
    """
    cwd = cwd or Path.cwd()
    config = load_config(config_path, cwd)
    if config_path is None and config.path is not None and config.path.parent != cwd.resolve():
        cwd = config.path.parent  # found above: the project's root, as pytest's rootdir
    check_paths(config, cwd)
    defined = discover(config, cwd) if with_evals else []
    specs = select(defined, ids, tags)
    if require and not specs:
        where = config.path.name if config.path else "the config"
        raise NothingSelected(nothing_selected(defined, tags, where))
    local = LocalHistory(cwd / config.settings.history)
    ctx = Context(
        cwd=cwd,
        config=config,
        specs=specs,
        history=local,
        env=dict(os.environ if env is None else env),
        clock=clock,
    )
    state = config.settings.state
    if state.remote and _git(cwd, "remote", "get-url", state.remote) is not None:
        ctx.history = SharedHistory(
            local,
            GitState(cwd, state.remote, state.branch, env=ctx.env),
            writes=lambda: ctx.checkout.writes_shared_state,
            notice=ctx.notice,
        )
    return ctx


def check_paths(config: LoadedConfig, cwd: Path) -> None:
    """The files the firewall writes must be writable as files: say so before any eval runs."""
    settings = config.settings
    where = config.path.name if config.path else "<config>"
    for key in ("registry", "history", "report"):
        value = getattr(settings, key)
        path = cwd / value
        blocker = next((parent for parent in path.parents if parent.is_file()), None)
        if path.is_dir():
            problem = "is a directory"
        elif blocker is not None:
            shown = blocker.relative_to(cwd) if blocker.is_relative_to(cwd) else blocker
            problem = f"is inside {str(shown)!r}, which is a file"
        else:
            continue
        raise ConfigError(
            f"{where}: {config.prefix}{key} = {value!r} {problem}; "
            f"expected the path of a file (default {Settings.model_fields[key].default!r})"
        )


def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None
