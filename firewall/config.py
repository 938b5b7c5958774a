"""Load and validate the configuration: ``firewall.toml`` or ``[tool.firewall]``.

Everything a user can misspell is checked here, before any eval runs, and
every complaint names the file, the key and what is allowed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from firewall.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ID_PATTERN = r"^[A-Za-z0-9._/-]+$"
DEFAULT_SEED = 0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Budgets(_Strict):
    """Ceilings on what a probe may spend; each is checked only when set."""

    p95_latency_ms: float | None = Field(default=None, gt=0)
    mean_tokens: float | None = Field(default=None, gt=0)
    mean_cost_usd: float | None = Field(default=None, ge=0)


class Gate(_Strict):
    """The per-eval settings that may also be set globally."""

    k: int | None = Field(default=None, ge=3, le=10_000)
    threshold: float | None = Field(default=None, ge=0, le=1)
    flakiness: float | None = Field(default=None, ge=0, le=1)
    outlier_fence: float | None = Field(default=None, ge=0)
    timeout: float | None = Field(default=None, gt=0)
    max_errors: int | None = Field(default=None, ge=0)


class EvalEntry(Gate):
    """One ``[[evals]]`` table, or the options of one ``@firewall.eval``."""

    id: str = Field(pattern=ID_PATTERN)
    command: str | None = Field(default=None, min_length=1)
    python: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    result: Literal["json", "exit-code"] = "json"
    min_pass_rate: float | None = Field(default=None, ge=0, le=1)
    pass_score: float | None = Field(default=None, ge=0, le=1)
    confidence: float = Field(default=0.95, gt=0, lt=1)
    budgets: Budgets = Budgets()
    blocking: bool = True
    tags: list[str] = []
    owner: str | None = Field(
        default=None, pattern=r"^@?[A-Za-z0-9][A-Za-z0-9-]*(/[A-Za-z0-9._-]+)?$"
    )

    @model_validator(mode="after")
    def _one_kind(self) -> EvalEntry:
        if (self.command is None) == (self.python is None):
            raise ValueError("set exactly one of `command` or `python`")
        if self.result == "exit-code" and self.command is None:
            raise ValueError('`result = "exit-code"` applies to `command` evals only')
        return self


class Nightly(_Strict):
    k: int = Field(default=15, ge=3, le=10_000)
    release_after: int = Field(default=3, ge=1)
    review_days: int = Field(default=30, ge=1)


# GitHub's own limits on a label's name: not blank, at most 50 characters; a comma would
# split it in two wherever labels travel as a list in one string (the gh CLI, queries).
Label = Annotated[str, Field(min_length=1, max_length=50, pattern=r"^[^,]*[^,\s][^,]*$")]


class GitHub(_Strict):
    issues: bool = True
    labels: list[Label] = Field(default_factory=lambda: ["flaky-eval"], min_length=1)


class State(_Strict):
    """Where the history outlives the CI runner: a branch of a git remote of the repository."""

    remote: str = Field(default="origin", pattern=r"^([A-Za-z0-9][A-Za-z0-9._-]*)?$")  # "": off
    branch: str = Field(default="firewall-state", pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")

    @field_validator("branch")
    @classmethod
    def _ref_name(cls, value: str) -> str:
        # What `git check-ref-format --branch` refuses among the names the pattern lets by.
        if ".." in value or "//" in value or value.endswith((".", "/", ".lock")):
            raise ValueError("must be a valid git branch name, e.g. firewall-state")
        return value


class Settings(_Strict):
    """The whole validated configuration."""

    k: int = Field(default=7, ge=3, le=10_000)
    threshold: float = Field(default=0.80, ge=0, le=1)
    flakiness: float = Field(default=0.03, ge=0, le=1)
    outlier_fence: float = Field(default=3.0, ge=0)
    seed: Any = DEFAULT_SEED
    timeout: float = Field(default=300, gt=0)
    concurrency: int = Field(default=4, ge=1, le=512)
    max_errors: int = Field(default=0, ge=0)
    registry: str = "quarantine.json"
    history: str = ".firewall/history.jsonl"
    report: str = "firewall-report.json"
    paths: list[str] = []
    nightly: Nightly = Nightly()
    github: GitHub = GitHub()
    state: State = State()
    evals: list[EvalEntry] = []

    @field_validator("seed")
    @classmethod
    def _seed_kind(cls, value: Any) -> int | str:
        if value == "random" or (
            isinstance(value, int) and not isinstance(value, bool) and value >= 0
        ):
            return value  # type: ignore[no-any-return]
        raise ValueError('must be a non-negative integer or "random"')

    @model_validator(mode="after")
    def _unique_ids(self) -> Settings:
        seen: set[str] = set()
        for entry in self.evals:
            if entry.id in seen:
                raise ValueError(f"eval id {entry.id!r} is declared twice; ids must be unique")
            seen.add(entry.id)
        return self


class LoadedConfig(BaseModel):
    """Settings plus where they came from, for messages and source locations."""

    model_config = ConfigDict(frozen=True)

    settings: Settings
    path: Path | None
    prefix: str  # "tool.firewall." in pyproject.toml, "" in firewall.toml
    eval_lines: dict[str, int] = {}


def find_config(explicit: Path | None, cwd: Path) -> tuple[Path, str] | None:
    """Return the config file to read and the key prefix its table lives under."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"{explicit}: no such configuration file")
        return explicit, "tool.firewall." if explicit.name == "pyproject.toml" else ""
    if (cwd / "firewall.toml").is_file():
        return cwd / "firewall.toml", ""
    if (cwd / "pyproject.toml").is_file():
        return cwd / "pyproject.toml", "tool.firewall."
    return None


def load_config(explicit: Path | None = None, cwd: Path | None = None) -> LoadedConfig:
    """Read and validate the configuration; raise ConfigError naming file and key."""
    cwd = cwd or Path.cwd()
    found = find_config(explicit, cwd)
    if found is None:
        raise ConfigError(
            f"no configuration in {cwd}: create firewall.toml, add [tool.firewall] to "
            "pyproject.toml, or run `firewall init`"
        )
    path, prefix = found
    try:
        text = path.read_text(encoding="utf-8")
        document = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
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


def parse_settings(table: Any, *, source: str, prefix: str = "") -> Settings:
    try:
        return Settings.model_validate(table)
    except ValidationError as exc:
        raise ConfigError(explain(exc, source=source, prefix=prefix, document=table)) from None


def parse_eval_options(options: dict[str, Any], *, source: str) -> EvalEntry:
    """Validate the options of a decorated eval, naming its source location."""
    try:
        return EvalEntry.model_validate(options)
    except ValidationError as exc:
        raise ConfigError(explain(exc, source=source, prefix="@firewall.eval ")) from None


def explain(exc: ValidationError, *, source: str, prefix: str, document: Any = None) -> str:
    """Turn pydantic's errors into lines of `file: key: what is allowed`."""
    lines = []
    for error in exc.errors():
        loc = list(error["loc"])
        key = _key_path(loc, document)
        named = [part for part in loc if isinstance(part, str)]
        hint = _PATTERN_HINTS.get(named[-1]) if named else None
        if error["type"] == "string_pattern_mismatch" and hint:
            what = f"{hint} (got {error.get('input')!r})"
        elif error["type"] == "extra_forbidden":
            model = _model_at(loc[:-1])
            allowed = ", ".join(model.model_fields) if model else "see the documentation"
            what = f"unknown key; allowed here: {allowed}"
        else:
            message = error["msg"].removeprefix("Value error, ")
            got = error.get("input")
            shown = "" if isinstance(got, dict) or got is None else f" (got {got!r})"
            what = f"{message}{shown}"
        where = f"{prefix}{key}" if key else prefix.rstrip(". ") or "top level"
        lines.append(f"{source}: {where}: {what}")
    return "\n".join(lines)


_PATTERN_HINTS = {
    "id": "ids may use only letters, digits and . _ / -",
    "python": 'expected "module:function", e.g. "evals.safety:refusal_rate"',
    "owner": "expected a GitHub login or org/team",
    "labels": "a label needs a name that is not blank and has no comma",
    "remote": 'expected the name of a git remote, e.g. "origin" ("" keeps the history local)',
    "branch": 'expected a git branch name, e.g. "firewall-state"',
}


def _key_path(loc: list[Any], document: Any) -> str:
    parts: list[str] = []
    node = document
    for part in loc:
        if isinstance(part, int):
            label = f"[{part}]"
            if isinstance(node, list) and part < len(node):
                node = node[part]
                if isinstance(node, dict) and isinstance(node.get("id"), str):
                    label = f"[{part}] (id {node['id']!r})"
            parts.append(label)
        else:
            if part in ("function-after", "union", "literal"):
                continue
            node = node.get(part) if isinstance(node, dict) else None
            parts.append(f".{part}" if parts else str(part))
    return "".join(parts)


def _model_at(loc: list[Any]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = Settings
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return EvalEntry if part == "evals" else None
        annotation = field.annotation
        model = (
            annotation
            # On 3.10 `list[X]` passes isinstance(..., type), and issubclass() then raises.
            if get_origin(annotation) is None
            and isinstance(annotation, type)
            and issubclass(annotation, BaseModel)
            else None
        )
        if part == "evals":
            model = EvalEntry
    return model


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
