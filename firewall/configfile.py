"""Find and read the configuration file: ``firewall.toml`` or ``[tool.firewall]``.

The file I/O of the configuration lives here; ``config.py`` holds the models and
their validation, which the pure core reads without touching a file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from firewall.config import Settings, parse_settings
from firewall.errors import ConfigError
from firewall.files import Refused, os_reason, read_capped

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

MAX_CONFIG_BYTES = 16 << 20  # a configuration file larger than this is not one


class LoadedConfig(BaseModel):
    """Settings plus where they came from, for messages and source locations."""

    model_config = ConfigDict(frozen=True)

    settings: Settings
    path: Path | None
    prefix: str  # "tool.firewall." in pyproject.toml, "" in firewall.toml
    eval_lines: dict[str, int] = {}


def find_config(explicit: Path | None, cwd: Path) -> tuple[Path, str] | None:
    """Return the config file to read and the key prefix its table lives under.

    Without ``--config``, as pytest finds its rootdir: from ``cwd`` up to the
    repository's root (the directory holding ``.git``; ``cwd`` alone outside a
    repository), the first ``firewall.toml``, or ``pyproject.toml`` with a
    ``[tool.firewall]`` table. The run then works from that directory.
    """
    if explicit is not None:
        try:
            explicit.stat()
        except (FileNotFoundError, NotADirectoryError):
            raise ConfigError(f"{explicit}: no such configuration file") from None
        except OSError as exc:  # a name too long, a loop of links, a directory it may not see
            raise ConfigError(
                f"{explicit}: cannot read the configuration ({os_reason(exc)})"
            ) from None
        return explicit, "tool.firewall." if explicit.name == "pyproject.toml" else ""
    for directory in _up_to_root(cwd):
        if (directory / "firewall.toml").is_file():
            return directory / "firewall.toml", ""
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file() and has_firewall_table(pyproject):
            return pyproject, "tool.firewall."
    if (cwd / "pyproject.toml").is_file():
        return cwd / "pyproject.toml", "tool.firewall."  # read, to say what it lacks
    return None


def repository_root(cwd: Path) -> Path | None:
    """The nearest directory at or above ``cwd`` that holds ``.git``, or None."""
    here = cwd.resolve()
    return next((d for d in (here, *here.parents) if (d / ".git").exists()), None)


def _up_to_root(cwd: Path) -> list[Path]:
    here = cwd.resolve()
    root = repository_root(here)
    if root is None:
        return [here]
    return [d for d in (here, *here.parents) if d == root or root in d.parents]


def has_firewall_table(pyproject: Path) -> bool:
    """Whether a pyproject.toml holds a [tool.firewall] table (an unreadable one: yes, so
    that reading it names what is wrong with it)."""
    try:
        document = tomllib.loads(read_capped(pyproject, MAX_CONFIG_BYTES).decode("utf-8"))
    except (OSError, Refused, ValueError, RecursionError):  # TOMLDecodeError is a ValueError
        return True  # read it, so that the error names what is wrong with it
    tool = document.get("tool")
    return isinstance(tool, dict) and "firewall" in tool


def load_config(explicit: Path | None = None, cwd: Path | None = None) -> LoadedConfig:
    """Read and validate the configuration; raise ConfigError naming file and key."""
    cwd = cwd or Path.cwd()
    found = find_config(explicit, cwd)
    if found is None:
        root = repository_root(cwd)
        where = (
            f"{cwd} or above it up to the repository root {root}"
            if root and root != cwd.resolve()
            else str(cwd)
        )
        raise ConfigError(
            f"no configuration in {where}: create firewall.toml, add [tool.firewall] to "
            "pyproject.toml, or run `firewall init` (it writes to the repository root)"
        )
    path, prefix = found
    try:
        text = read_capped(path, MAX_CONFIG_BYTES).decode("utf-8")
        document = tomllib.loads(text)
    except Refused as exc:
        raise ConfigError(f"{path}: the configuration {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {os_reason(exc)}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deep to read") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    table: Any = document
    if prefix:
        tool = document.get("tool")
        table = tool.get("firewall") if isinstance(tool, dict) else None
        if table is None:
            raise ConfigError(
                f"{path}: has no [tool.firewall] table; add one or create firewall.toml"
            )
    settings = parse_settings(table, source=str(_display(path, cwd)), prefix=prefix)
    return LoadedConfig(
        settings=settings, path=path, prefix=prefix, eval_lines=_eval_lines(text, settings)
    )


def load_config_or_defaults(explicit: Path | None = None, cwd: Path | None = None) -> LoadedConfig:
    """``load_config``, except that a project with no configuration of its own runs on the
    defaults (``path`` None), as the pytest plugin's probe does.

    No configuration means no ``firewall.toml`` and no ``pyproject.toml`` with a
    ``[tool.firewall]`` table (one that holds only pytest's settings is not the
    firewall's). A configuration that is there and broken, and a ``--config``
    that names no file, are still the errors they are.
    """
    cwd = cwd or Path.cwd()
    if explicit is None:
        found = find_config(None, cwd)
        if found is None or (found[1] and not has_firewall_table(found[0])):
            return LoadedConfig(settings=Settings(), path=None, prefix="")
    return load_config(explicit, cwd)


def _eval_lines(text: str, settings: Settings) -> dict[str, int]:
    """Best-effort line numbers of each `id = "..."` so reports can point at them."""
    lines: dict[str, int] = {}
    wanted = {entry.id for entry in settings.evals}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped.startswith("id"):
            continue
        key, _, value = stripped.partition("=")
        if key.strip() != "id":
            continue
        value = value.split("#", 1)[0].strip().strip("'\"")
        if value in wanted and value not in lines:
            lines[value] = number
    return lines


def _display(path: Path, cwd: Path) -> Path:
    try:
        return path.resolve().relative_to(cwd.resolve())
    except ValueError:
        return path
