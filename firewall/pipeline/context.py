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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from firewall import output
from firewall.config import Settings
from firewall.configfile import LoadedConfig, load_config, load_config_or_defaults
from firewall.discovery import discover, nothing_selected, select
from firewall.errors import ConfigError, NothingSelected
from firewall.lifecycle import Entry
from firewall.output import in_actions
from firewall.pipeline import keeper
from firewall.pipeline.checkout import Checkout, in_ci
from firewall.pipeline.keeper import Keeper
from firewall.secrets import Secrets
from firewall.spec import EvalSpec
from firewall.store.git import GitInfo, ask
from firewall.store.gitstate import GitState
from firewall.store.history import HistoryStore, LocalHistory
from firewall.store.registry import Registry
from firewall.store.shared import SharedHistory
from firewall.timeutil import now

Clock = Callable[[], dt.datetime]


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
    _keeper: Keeper | None = dataclasses.field(default=None, repr=False)
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
    def secrets(self) -> Secrets:
        """The values no text the firewall posts or writes may carry (contract §7)."""
        return Secrets.from_env(self.env)

    @functools.cached_property
    def checkout(self) -> Checkout:
        return Checkout.find(self.cwd, self.env, self.settings.state.remote)

    def notice(self, text: str) -> None:
        """Something a user should know that changes no decision: said once, on stderr, and
        in a GitHub job as a warning annotation, where a job's page shows it.

        It may quote a git remote's own message; the sink and the annotation's escaping
        make sure that no line of it can be taken for a workflow command, as for eval text.
        """
        if text in self.notices:
            return
        self.notices.append(text)
        if self.in_actions:
            from firewall.github.actions.annotations import problem_annotations

            output.annotate(problem_annotations([text]))
        else:
            output.warn(text)

    @property
    def keeper(self) -> Keeper:
        """Where this command keeps its state (laptop, CI, dry run): chosen once, by ``load``."""
        if self._keeper is None:
            self._keeper = self.choose_keeper()
        return self._keeper

    def choose_keeper(self, *, dry_run: bool = False) -> Keeper:
        shared = self.history if isinstance(self.history, SharedHistory) else None
        return keeper.choose(
            registry=self.registry,
            settings=self.settings,
            notice=self.notice,
            shared=shared,
            ci=in_ci(self.env),
            checkout=lambda: self.checkout,
            dry_run=dry_run,
        )

    def dry_run(self, wanted: bool) -> None:
        """Keep nothing, when a command's options ask it and ``load`` was not told."""
        if wanted and self.keeper.keeps:
            self._keeper = self.choose_keeper(dry_run=True)

    def entries(self) -> dict[str, Entry]:
        """The registry as this command's keeper sees it, read once."""
        return self.keeper.entries()

    @contextlib.contextmanager
    def edit_registry(self) -> Iterator[dict[str, Entry]]:
        """A person's edit of the registry file, under its lock, whatever the mode."""
        with self.keeper.edit() as entries:
            yield entries

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
    dry_run: bool = False,
    or_defaults: bool = False,
    clock: Clock = now,
) -> Context:
    """Read the config, check the paths it names, discover the selected evals, and choose
    where this command keeps its state (``Context.keeper``).

    ``with_evals=False`` skips discovery (which imports the evals' modules) for
    commands that need only the settings and the registry. ``require`` makes an
    empty selection a ``NothingSelected`` (exit 5): what `run` and `probe` ask.
    ``dry_run`` keeps nothing anywhere. ``or_defaults`` runs a project without a
    configuration on the defaults (``config.path`` None) instead of refusing it: what
    `gate` asks, since a probe part carries the specs it was probed with.
    """
    cwd = cwd or Path.cwd()
    config = (load_config_or_defaults if or_defaults else load_config)(config_path, cwd)
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
    if state.remote and ask(cwd, "remote", "get-url", state.remote) is not None:
        ctx.history = SharedHistory(
            local,
            GitState(
                cwd,
                state.remote,
                state.branch,
                env=ctx.env,
                watched=lambda: ctx.keeper.entries(),  # what `status` shows, cut for it
            ),
            writes=lambda: ctx.checkout.writes_shared_state,
            notice=ctx.notice,
        )
    ctx._keeper = ctx.choose_keeper(dry_run=dry_run)
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
