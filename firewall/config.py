"""The configuration's models and their validation: ``firewall.toml`` or ``[tool.firewall]``.

Everything a user can misspell is checked here, before any eval runs, and
every complaint names the file, the key and what is allowed.
"""

from __future__ import annotations

import json
import re
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from firewall.constants import DEFAULT_MAX_K, MAX_K, MIN_K
from firewall.errors import ConfigError

ID_PATTERN = r"^[A-Za-z0-9._/-]+$"
INSPECT_PATTERN = r"^[^@]+\.py@[^@\s]+$"  # an Inspect task: "path/to/file.py@task"
DEFAULT_SEED = 0
MAX_TIMEOUT = 7 * 24 * 3600.0  # a week: past what the OS's timers take is no timeout at all
MAX_FENCE = 100.0  # a fence further out than 100 IQRs is the rule turned off: say 0
MIN_CONFIDENCE, MAX_CONFIDENCE = 0.5, 0.9999  # what a Wilson bound is computed at
ENV_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
TARGET_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"  # a Python "module:function"
DEFAULT_JUDGE_REPEATS_MAX = 3  # judgements per output an unclear probe is re-judged up to
MAX_JUDGE_REPEATS = 100
RATE_PATTERN = r"^\d+(\.\d+)?/(s|sec|second|min|minute|h|hour)$"
_PER = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
}


def per_second(rate: str) -> float:
    """``"120/min"`` as trials per second (2.0); the pattern has been checked."""
    count, _, unit = rate.partition("/")
    return float(count) / _PER[unit]


# An eval's owner is assigned its issues: a GitHub login, which GitHub makes of letters,
# digits and single hyphens (none first or last), or a team, which is named but not assigned.
MAX_LOGIN = 39
MAX_TEAM = 100
_OWNER = re.compile(r"@?([A-Za-z0-9](?:-?[A-Za-z0-9])*)(?:/([A-Za-z0-9][A-Za-z0-9_.-]*))?")
OWNER_EXPECTED = (
    "expected a GitHub login (alice or @alice: letters, digits and single hyphens, "
    f"at most {MAX_LOGIN} characters) or a team (@org/team)"
)


def parse_owner(value: str) -> str:
    """An eval's owner as the registry keeps it, without the ``@``; ValueError if it is none.

    The one check of every path an owner comes by: the configuration, the
    decorator, ``quarantine add --owner`` and the registry file.
    """
    match = _OWNER.fullmatch(value)
    if match is None or len(match[1]) > MAX_LOGIN or len(match[2] or "") > MAX_TEAM:
        raise ValueError(OWNER_EXPECTED)
    return value.removeprefix("@")


def _seed_kind(value: Any) -> Any:
    # Before pydantic's own checks, so that the message says both kinds a seed may be.
    if value == "random" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise ValueError('must be a non-negative integer or "random"')


Seed = Annotated[int | Literal["random"], BeforeValidator(_seed_kind)]
"""A base seed as the configuration gives it: a non-negative integer, or ``"random"``
(a fresh one drawn per run, ``firewall.runner.seeds.BaseSeed``)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Budgets(_Strict):
    """Ceilings on what a probe may spend; each is checked only when set."""

    p95_latency_ms: float | None = Field(default=None, gt=0)
    mean_tokens: float | None = Field(default=None, gt=0)
    mean_cost_usd: float | None = Field(default=None, ge=0)


class Regression(_Strict):
    """``regression = { max_drop = D }``: compare the eval with the default branch (§4)."""

    max_drop: float = Field(ge=0, le=1)  # the drop of the median that is tolerated


# A tag is shown, filtered on and used as a rate limit's name: one line of printable text.
Tag = Annotated[str, Field(pattern=r"^[^\x00-\x1f\x7f]*$")]


class Gate(_Strict):
    """The per-eval settings that may also be set globally."""

    k: int | None = Field(default=None, ge=MIN_K, le=MAX_K)
    threshold: float | None = Field(default=None, ge=0, le=1)
    flakiness: float | None = Field(default=None, ge=0, le=1)
    outlier_fence: float | None = Field(default=None, ge=0, le=MAX_FENCE)
    timeout: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT)
    import_timeout: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT)
    rate: str | None = Field(default=None, pattern=RATE_PATTERN)  # e.g. "120/min"
    max_errors: int | None = Field(default=None, ge=0)
    min_scored: int | None = Field(default=None, ge=1)
    adaptive: bool | None = None
    max_k: int | None = Field(default=None, ge=MIN_K, le=MAX_K)

    @field_validator("max_k")
    @classmethod
    def _max_k_reaches_k(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None:
            _check_max_k(value, info.data.get("k"))
        return value


class EvalEntry(Gate):
    """One ``[[evals]]`` table, or the options of one ``@firewall.eval``."""

    id: str = Field(pattern=ID_PATTERN)
    command: str | None = Field(default=None, min_length=1)
    python: str | None = Field(default=None, pattern=TARGET_PATTERN)
    inspect: str | None = Field(default=None, pattern=INSPECT_PATTERN)  # an Inspect AI task
    # The Inspect task's model, as `inspect eval --model` takes it ("none": a task that needs none).
    model: str | None = Field(default=None, pattern=r"^([\w.-]+/\S+|none)$")
    task_args: dict[str, Any] = {}  # passed to the Inspect task's function
    result: Literal["json", "exit-code", "junit"] = "json"
    junit_xml: str | None = Field(default=None, min_length=1)  # where a suite's XML lands
    min_pass_rate: float | None = Field(default=None, ge=0, le=1)
    pass_score: float | None = Field(default=None, ge=0, le=1)
    confidence: float = Field(default=0.95, ge=MIN_CONFIDENCE, le=MAX_CONFIDENCE)
    budgets: Budgets = Budgets()
    blocking: bool = True
    # An async Python eval whose trials must not share a process (module-level state):
    # each runs alone, as a synchronous eval's trials do.
    isolate: bool = False
    tags: list[Tag] = []
    owner: str | None = None
    regression: Regression | None = None
    # What counts for the eval's fingerprint beyond what its worker reads (§4, affected runs):
    # globs of project files, and names of environment variables whose values count.
    inputs: list[Annotated[str, Field(min_length=1)]] = []
    env: list[Annotated[str, Field(pattern=ENV_PATTERN)]] = []
    # A judge apart (contract §4): the eval yields an `output`, "module:function" scores it,
    # each output `judge_repeats` times, up to `judge_repeats_max` when the probe is unclear.
    judge: str | None = Field(default=None, pattern=TARGET_PATTERN)
    judge_repeats: int = Field(default=1, ge=1, le=MAX_JUDGE_REPEATS)
    judge_repeats_max: int = Field(default=DEFAULT_JUDGE_REPEATS_MAX, ge=1, le=MAX_JUDGE_REPEATS)

    @field_validator("owner")
    @classmethod
    def _owner(cls, value: str | None) -> str | None:
        if value is not None:
            parse_owner(value)
        return value

    @field_validator("inputs")
    @classmethod
    def _inside_the_project(cls, value: list[str]) -> list[str]:
        for glob in value:
            if glob.startswith("/") or ".." in glob.split("/"):
                raise ValueError(
                    "expected globs of files relative to the project root, e.g. "
                    f'"prompts/triage/**" (no leading / and no ..: {glob!r} is not one)'
                )
        return value

    @field_validator("task_args")
    @classmethod
    def _task_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError(
                "task arguments are strings, numbers, booleans, arrays and tables "
                "(no dates or times, no nan or inf)"
            ) from None
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> EvalEntry:
        if [self.command, self.python, self.inspect].count(None) != 2:
            raise ValueError("set exactly one of `command` or `python` or `inspect`")
        if self.inspect is None and (self.model is not None or self.task_args):
            raise ValueError("`model` and `task_args` apply to `inspect` evals only")
        if self.result in ("exit-code", "junit") and self.command is None:
            raise ValueError(f'`result = "{self.result}"` applies to `command` evals only')
        if self.junit_xml is not None and self.result != "junit":
            raise ValueError('`junit_xml` applies to `result = "junit"` suites only')
        if self.junit_xml is not None and "{trial}" not in self.junit_xml:
            raise ValueError(
                "`junit_xml` needs {trial} in it (e.g. build/junit-{trial}.xml): trials in "
                "flight together must not write one file"
            )
        if self.judge is None and (
            "judge_repeats" in self.model_fields_set or "judge_repeats_max" in self.model_fields_set
        ):
            raise ValueError(
                "`judge_repeats` and `judge_repeats_max` apply to evals with a `judge`"
            )
        if self.judge is not None and (self.result != "json" or self.inspect is not None):
            kind = "`inspect`" if self.inspect is not None else f'`result = "{self.result}"`'
            raise ValueError(f"`judge` needs an eval that yields an output: not with {kind}")
        if "judge_repeats_max" in self.model_fields_set and (
            self.judge_repeats_max < self.judge_repeats
        ):
            raise ValueError(
                f"`judge_repeats_max` ({self.judge_repeats_max}) must be at least "
                f"`judge_repeats` ({self.judge_repeats})"
            )
        return self


class Nightly(_Strict):
    k: int = Field(default=15, ge=MIN_K, le=MAX_K)
    release_after: int = Field(default=3, ge=1)
    review_days: int = Field(default=30, ge=1)


# GitHub's own limits on a label's name: not blank, at most 50 characters; a comma would
# split it in two wherever labels travel as a list in one string (the gh CLI, queries),
# and a line break or another control character would start a line of its own in a
# report, a log, or a workflow command's text.
_PRINTABLE = r"[^,\x00-\x1f\x7f]"
Label = Annotated[
    str,
    Field(min_length=1, max_length=50, pattern=rf"^{_PRINTABLE}*[^,\s\x00-\x1f\x7f]{_PRINTABLE}*$"),
]


class GitHub(_Strict):
    issues: bool = True
    comment: bool = True  # one comment on each pull request, edited on every run
    labels: list[Label] = Field(default_factory=lambda: ["flaky-eval"], min_length=1)
    budget: float = 30.0  # seconds all GitHub calls of one run may take together
    # Whether evals inherit the firewall's GitHub token (GITHUB_TOKEN, GH_TOKEN, the
    # action's input): off, since whatever an eval can read it can print.
    share_token: bool = False

    @field_validator("budget")
    @classmethod
    def _budget(cls, value: float) -> float:
        if not 0 < value <= 3600:  # NaN fails too
            raise ValueError(
                "expected the seconds all GitHub calls of one run may take together, "
                "above 0 and at most 3600 (an hour), e.g. 30"
            )
        return value


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


class Affected(_Strict):
    """``[affected]``: a pull request probes only what its change can affect (§4)."""

    enabled: bool = True
    max_age_days: int = Field(default=7, ge=1, le=365)  # the oldest default-branch probe carried


class Limit(_Strict):
    """A provider's rate limit over every eval with ``tag``: one budget they share."""

    tag: Tag = Field(min_length=1)
    rate: str = Field(pattern=RATE_PATTERN)


class Settings(_Strict):
    """The whole validated configuration."""

    k: int = Field(default=7, ge=MIN_K, le=MAX_K)
    threshold: float = Field(default=0.80, ge=0, le=1)
    flakiness: float = Field(default=0.03, ge=0, le=1)
    outlier_fence: float = Field(default=3.0, ge=0, le=MAX_FENCE)
    seed: Seed = DEFAULT_SEED
    timeout: float = Field(default=300, gt=0, le=MAX_TIMEOUT)
    import_timeout: float = Field(default=120, gt=0, le=MAX_TIMEOUT)  # a Python eval's module
    concurrency: int = Field(default=4, ge=1, le=512)
    max_errors: int = Field(default=0, ge=0)
    min_scored: int = Field(default=3, ge=1)
    adaptive: bool = True
    max_k: int = Field(default=DEFAULT_MAX_K, ge=MIN_K, le=MAX_K)
    registry: str = "quarantine.json"
    history: str = ".firewall/history.jsonl"
    report: str = "firewall-report.json"
    paths: list[str] = []
    nightly: Nightly = Nightly()
    github: GitHub = GitHub()
    state: State = State()
    affected: Affected = Affected()
    evals: list[EvalEntry] = []
    limits: list[Limit] = []  # [[limits]]: trials started per second, shared by a tag

    @field_validator("max_k")
    @classmethod
    def _max_k_reaches_k(cls, value: int, info: ValidationInfo) -> int:
        _check_max_k(value, info.data.get("k"))
        return value

    @model_validator(mode="after")
    def _unique_ids(self) -> Settings:
        seen: set[str] = set()
        for entry in self.evals:
            if entry.id in seen:
                raise ValueError(f"eval id {entry.id!r} is declared twice; ids must be unique")
            seen.add(entry.id)
        return self


def _check_max_k(max_k: int, k: int | None) -> None:
    # `k` is declared before `max_k`, so it is validated first (None: unset, or invalid).
    if k is not None and max_k < k:
        raise ValueError(_max_k_below(k))


def _max_k_below(k: int, where: str = "") -> str:
    return f"must be >= k ({k}{where}): the most trials one eval may get"


def effective_max_k(entry: EvalEntry, settings: Settings) -> int:
    """The most trials adaptivity may give the eval: its own max_k, else the global one.

    A max_k left at its default never stands below the eval's own k (an eval
    with k = 40 keeps its 40); one set explicitly below it is an error,
    reported by ``max_k_conflict``.
    """
    k = settings.k if entry.k is None else entry.k
    if entry.max_k is not None:
        return entry.max_k
    if "max_k" in settings.model_fields_set:
        return settings.max_k
    return max(settings.max_k, k)


def max_k_conflict(entry: EvalEntry, settings: Settings) -> tuple[str, str] | None:
    """The eval's key to name and what is wrong with it, when its max_k is below its k.

    Only where the two come from different tables; within one table the
    models' own validators refuse it.
    """
    k = settings.k if entry.k is None else entry.k
    max_k = effective_max_k(entry, settings)
    if max_k >= k:
        return None
    if entry.max_k is not None:  # its own max_k, below the global k
        return "max_k", f"{_max_k_below(k, ', the global setting')} (got {max_k})"
    return (
        "k",
        f"must be <= max_k ({max_k}, the global setting), or set this eval's max_k (got {k})",
    )


def parse_settings(table: Any, *, source: str, prefix: str = "") -> Settings:
    try:
        settings = Settings.model_validate(table)
    except ValidationError as exc:
        raise ConfigError(explain(exc, source=source, prefix=prefix, document=table)) from None
    # An eval's k and max_k may come from two tables: checked once both are known.
    problems = []
    for index, entry in enumerate(settings.evals):
        conflict = max_k_conflict(entry, settings)
        if conflict is not None:
            key, what = conflict
            where = _key_path(["evals", index, key], table)
            problems.append(f"{source}: {prefix}{where}: {what}")
    if problems:
        raise ConfigError("\n".join(problems))
    return settings


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
        elif error["type"] == "model_type":
            what = f"expected a table (got {error.get('input')!r})"
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
    "rate": 'expected trials per second, minute or hour, e.g. "120/min" or "2/s"',
    "id": "ids may use only letters, digits and . _ / -",
    "python": 'expected "module:function", e.g. "evals.safety:refusal_rate"',
    "inspect": 'expected "path/to/file.py@task", e.g. "tasks/triage.py@triage"',
    "model": 'expected an Inspect model, "provider/model", e.g. "openai/gpt-4o" (or "none")',
    "labels": "a label needs a name that is not blank and has no comma, line break or "
    "control character",
    "tags": "a tag is one line: no line break or control character",
    "tag": "a tag is one line: no line break or control character",
    "remote": 'expected the name of a git remote, e.g. "origin" ("" keeps the history local)',
    "branch": 'expected a git branch name, e.g. "firewall-state"',
    "env": 'expected names of environment variables, e.g. "MODEL"',
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
        model = _model_in(field.annotation)
        if part == "evals":
            model = EvalEntry
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds: ``Budgets``, or ``Regression`` out of ``Regression | None``."""
    if get_origin(annotation) in (Union, UnionType):
        models = [_model_in(arg) for arg in get_args(annotation)]
        return next((model for model in models if model is not None), None)
    # On 3.10 `list[X]` passes isinstance(..., type), and issubclass() then raises.
    if get_origin(annotation) is None and isinstance(annotation, type):
        return annotation if issubclass(annotation, BaseModel) else None
    return None
