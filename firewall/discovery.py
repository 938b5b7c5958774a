"""Discovery: the evals of a run, from the config's ``[[evals]]`` and from ``@firewall.eval``.

Decorated evals are found by importing the modules under ``paths`` in a
child process, so that eval code (and whatever it imports) never runs inside
the orchestrator and a module that fails to import is reported, not fatal.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.machinery
import importlib.util
import json
import pkgutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from difflib import get_close_matches
from pathlib import Path

from firewall.adapters.inspect_eval import INSTALL
from firewall.config import parse_eval_options
from firewall.configfile import LoadedConfig
from firewall.errors import ConfigError, DiscoveryError, UsageError
from firewall.runner.python import worker_command
from firewall.spec import EvalSpec, Source


def discover(config: LoadedConfig, cwd: Path) -> list[EvalSpec]:
    """Every eval of the project, config entries first, then decorated ones."""
    settings = config.settings
    config_file = str(_relative(config.path, cwd)) if config.path else "<config>"
    specs = [
        EvalSpec.resolve(
            entry, settings, Source(file=config_file, line=config.eval_lines.get(entry.id))
        )
        for entry in settings.evals
    ]
    for spec in specs:
        problem = _target_problem(spec, cwd)
        if problem is not None:
            raise ConfigError(
                f"{spec.source}: eval {spec.id!r}: {spec.kind} = {spec.target!r}: {problem}"
            )
    specs = [
        spec.model_copy(update={"asynchronous": True})
        if spec.kind == "python" and is_coroutine(spec.target, cwd)
        else spec
        for spec in specs
    ]
    if settings.paths:
        specs.extend(_decorated(settings.paths, config, cwd))
    seen: dict[str, EvalSpec] = {}
    for spec in specs:
        if spec.id in seen:
            raise ConfigError(
                f"{spec.source}: eval id {spec.id!r} is already defined at {seen[spec.id].source}; "
                "ids must be unique"
            )
        seen[spec.id] = spec
    return specs


def _decorated(paths: Sequence[str], config: LoadedConfig, cwd: Path) -> list[EvalSpec]:
    missing = [path for path in paths if not (cwd / path).exists()]
    if missing:
        raise ConfigError(
            f"{_relative(config.path, cwd)}: {config.prefix}paths: "
            f"{', '.join(missing)} does not exist (relative to {cwd})"
        )
    root = cwd.resolve()
    for path in paths:
        where = (cwd / path).resolve()
        if where != root and root not in where.parents:
            # A decorated eval is `module:function`, imported with the project's root on the
            # import path (contract §3) and named by its file in the project: a file outside
            # has no module name there, for the worker, a replay or a report.
            beyond = f" (a link to {where})" if (cwd / path).is_symlink() else ""
            raise ConfigError(
                f"{_relative(config.path, cwd)}: {config.prefix}paths: {path}{beyond} is "
                f"outside the project ({root}): evals are imported from the project's root; "
                "move or copy them under it, or run the firewall from a directory that holds both"
            )
    proc = subprocess.run(
        worker_command("--discover", *paths),
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise DiscoveryError(
            f"discovering evals under {', '.join(paths)} failed: {proc.stderr.strip()[-800:]}"
        )
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    if found["errors"]:
        raise DiscoveryError("\n".join(found["errors"]))
    specs = []
    for item in found["evals"]:
        source = Source(file=item["file"], line=item["line"])
        entry = parse_eval_options(
            {**item["options"], "python": item["target"]}, source=str(source)
        )
        spec = EvalSpec.resolve(entry, config.settings, source)
        if item.get("asynchronous"):
            spec = spec.model_copy(update={"asynchronous": True})
        specs.append(spec)
    return specs


def select(specs: Sequence[EvalSpec], ids: Iterable[str], tags: Iterable[str]) -> list[EvalSpec]:
    """The evals named by id and carrying every given tag; an unknown id is a usage error."""
    ids, tags = list(ids), set(tags)
    known = {spec.id for spec in specs}
    for wanted in ids:
        if wanted not in known:
            raise UsageError(unknown_eval_message(wanted, known))
    chosen = [spec for spec in specs if not ids or spec.id in ids]
    return [spec for spec in chosen if tags.issubset(spec.tags)]


@dataclasses.dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based): the evals dealt to one of N CI jobs."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``I/N``, e.g. ``2/4``; a ``ValueError`` that says what is allowed otherwise."""
        try:
            index, count = (int(part) for part in text.split("/"))
        except ValueError:
            raise ValueError(f"expected I/N, e.g. 1/4; got {text!r}") from None
        if not 1 <= index <= count:
            raise ValueError(f"{text}: I must be between 1 and N")
        return cls(index, count)

    def pick(self, specs: Sequence[EvalSpec]) -> list[EvalSpec]:
        """This shard's evals, dealt round-robin over the ids in sorted order."""
        ordered = sorted(specs, key=lambda spec: spec.id)
        return ordered[self.index - 1 :: self.count]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def nothing_selected(defined: Sequence[EvalSpec], tags: Iterable[str], where: str) -> str:
    """Why a selection came out empty, with the tags and ids there are to choose from."""
    if not defined:
        return (
            f"no eval is defined: {where} has no [[evals]] and its `paths` hold no "
            "@firewall.eval function; `firewall list` shows what is found"
        )
    known_tags = sorted({tag for spec in defined for tag in spec.tags})
    missing = [tag for tag in tags if tag not in known_tags]
    if missing:
        close = get_close_matches(missing[0], known_tags, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        reason = f"no eval has the tag {missing[0]!r}{hint}"
    else:
        reason = f"no eval has all the tags {', '.join(repr(t) for t in tags)}"
    ids = sorted(spec.id for spec in defined)
    shown = ", ".join(ids[:12]) + (f" and {len(ids) - 12} more" if len(ids) > 12 else "")
    return f"{reason}; the tags are {', '.join(known_tags) or 'none'}; the evals are {shown}"


def unknown_eval_message(wanted: str, known: Iterable[str]) -> str:
    close = get_close_matches(wanted, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "; `firewall list` shows the known ids"
    return f"no eval with id {wanted!r}{hint}"


def _relative(path: Path | None, cwd: Path) -> Path | str:
    if path is None:
        return "<config>"
    try:
        return path.resolve().relative_to(cwd.resolve())
    except ValueError:
        return path


def unresolved(target: str, cwd: Path) -> str | None:
    """Why a ``module:function`` target cannot be found, or None (also when it cannot be
    told without running the module's code, which never runs in the orchestrator).

    The module is found as the worker's import would find it (the project first,
    then the interpreter's path) without importing anything, and its source is
    read for a top-level name: a typo costs exit 2 before any trial, not k
    errored trials blamed on an outage.
    """
    module, _, attribute = target.partition(":")
    name = attribute.split(".")[0]
    location = _module_source(module, (str(cwd), *sys.path))
    if isinstance(location, str):
        return location
    if location is None or not name:
        return None  # compiled, namespace or frozen: nothing to read
    read = _module_names(location)
    if isinstance(read, str):
        return f"{_relative(location, cwd)} cannot be read as Python ({read})"
    names, open_ended, _ = read
    if name in names or open_ended:
        return None
    close = get_close_matches(name, sorted(n for n in names if not n.startswith("_")), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{_relative(location, cwd)} defines no {name!r}{hint}"


def is_coroutine(target: str, cwd: Path) -> bool:
    """Whether a ``module:function`` target is a top-level ``async def``, as its source
    reads (nothing is imported). A wrong guess costs little either way: a pool worker
    hands back a function that is not a coroutine function, and an ``async def`` that
    is not seen as one runs in a worker of its own, one trial at a time."""
    module, _, attribute = target.partition(":")
    location = _module_source(module, (str(cwd), *sys.path))
    if not isinstance(location, Path) or "." in attribute:
        return False
    read = _module_names(location)
    return not isinstance(read, str) and attribute in read[2]


def _target_problem(spec: EvalSpec, cwd: Path) -> str | None:
    """Why the eval's module or task cannot be found; None for a command, run as it is."""
    if spec.kind == "python":
        return unresolved(spec.target, cwd)
    if spec.kind == "inspect":
        return unresolved_task(spec.target, cwd)
    return None


def unresolved_task(target: str, cwd: Path) -> str | None:
    """Why an Inspect task ``file.py@task`` cannot be run, or None (also when the file's
    source cannot tell).

    Read as Inspect reads it before it loads a file: the task is a top-level
    function with an ``@task`` decorator, named by the decorator's ``name=`` or
    else by the function. Nothing is imported, Inspect included.
    """
    if importlib.util.find_spec("inspect_ai") is None:
        return INSTALL
    file, _, name = target.rpartition("@")
    path = cwd / file
    if not path.is_file():
        return f"no file {file} (relative to {cwd})"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        return f"{file} cannot be read as Python ({exc})"
    tasks = _task_names(tree)
    if name in tasks:
        return None
    names, open_ended = _top_level_names(tree)
    if not tasks and (name in names or open_ended):
        return None  # bound some other way, or maybe: Inspect will say
    if not tasks:
        return f"{file} has no @task function (Inspect finds a task by its @task decorator)"
    close = get_close_matches(name, sorted(tasks), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; it has {', '.join(sorted(tasks))}"
    return f"{file} has no @task {name!r}{hint}"


def _task_names(tree: ast.Module) -> set[str]:
    """The tasks a file declares: its top-level ``@task`` functions, by their registry names."""
    names: set[str] = set()
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            function = call.func if call is not None else decorator
            if _decorator_name(function) != "task":
                continue
            named = [
                keyword.value.value
                for keyword in (call.keywords if call is not None else [])
                if keyword.arg == "name"
                and isinstance(keyword.value, ast.Constant)
                and isinstance(keyword.value.value, str)
            ]
            names.add(named[0] if named else node.name)
    return names


def _decorator_name(node: ast.expr) -> str | None:
    """The last part of a decorator's name: ``task`` of ``task`` and ``inspect_ai.task``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


@functools.lru_cache(maxsize=256)
def _module_names(location: Path) -> tuple[frozenset[str], bool, frozenset[str]] | str:
    """The top-level names of a module's source, whether it may bind others, and which of
    them are ``async def`` functions; parsed once however many evals it holds (a thousand
    evals in one module were a thousand parses). Why it cannot be read, else."""
    try:
        tree = ast.parse(location.read_text(encoding="utf-8"), filename=str(location))
    except (OSError, SyntaxError, ValueError) as exc:
        return str(exc)
    names, open_ended = _top_level_names(tree)
    coroutines = {node.name for node in tree.body if isinstance(node, ast.AsyncFunctionDef)}
    return frozenset(names), open_ended, frozenset(coroutines - _rebound(tree))


@functools.lru_cache(maxsize=256)
def _module_source(module: str, roots: tuple[str, ...]) -> Path | str | None:
    """The source file of ``module``; a message when it does not exist; None when it
    exists but is not Python source."""
    search: list[str] | None = list(roots)
    parts = module.split(".")
    for depth in range(len(parts)):
        name = ".".join(parts[: depth + 1])
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, search)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            siblings = [info.name for info in pkgutil.iter_modules(search)]
            close = get_close_matches(parts[depth], siblings, n=1)
            hint = f"; did you mean {'.'.join([*parts[:depth], close[0]])!r}?" if close else ""
            return f"no module {name!r} in the project or on the interpreter's path{hint}"
        search = list(spec.submodule_search_locations or [])
        if depth == len(parts) - 1:
            origin = spec.origin
            return Path(origin) if origin and origin.endswith(".py") else None
    return None


def _rebound(tree: ast.Module) -> set[str]:
    """Names a module binds more than once at its top level (a later binding may not be
    the ``async def``)."""
    seen: set[str] = set()
    twice: set[str] = set()
    for node in tree.body:
        bound: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        for name in bound:
            (twice if name in seen else seen).add(name)
    return twice


def _top_level_names(tree: ast.Module) -> tuple[set[str], bool]:
    """The names a module binds at its top level (into ``if`` and ``try`` blocks too), and
    whether it may bind others (``from x import *``, a module ``__getattr__``)."""
    names: set[str] = set()
    open_ended = False
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    open_ended = True
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    pending.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return names, open_ended or "__getattr__" in names
