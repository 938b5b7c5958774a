"""EvalSpec: one eval with every setting resolved, the unit the rest of the run works on;
and the warnings about settings that make its gate impossible or meaningless."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from firewall._stats import wilson_interval
from firewall.config import (
    Budgets,
    EvalEntry,
    Regression,
    Settings,
    effective_max_k,
    max_k_conflict,
    parse_owner,
    per_second,
)
from firewall.constants import DEFAULT_MAX_K, MAX_K
from firewall.errors import ConfigError
from firewall.text import fmt


class Source(BaseModel):
    """Where an eval is defined, for reports and annotations."""

    model_config = ConfigDict(frozen=True)

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


class EvalSpec(BaseModel):
    """An eval with its effective settings: the eval's own, else the global ones."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: Literal["command", "python", "inspect"]
    target: str  # the shell command, "module:function", or an Inspect task's "file.py@task"
    result: Literal["json", "exit-code", "junit"] = "json"
    junit_xml: str | None = None  # a suite's XML, when not written to {result}
    suite: str | None = None  # a case of that suite (id SUITE/case), decided as a plain test
    # How a suite's case (or a pytest test) is known: by its runner's name for it, by its
    # pytest node id (the same test's id through the pytest plugin), or by its place in the
    # report alone, which a registry entry is not followed to (firewall.pipeline.suites).
    identity: Literal["name", "nodeid", "position"] = "name"
    k: int
    threshold: float
    flakiness: float
    outlier_fence: float
    timeout: float
    import_timeout: float = 120.0  # importing a Python eval's module, apart from `timeout`
    # A provider's rate limit: trials started per second, over every eval of one bucket
    # (the eval's own `rate`, or a [[limits]] tag it carries). None: no limit.
    rate: float | None = None
    rate_bucket: str | None = None
    max_errors: int
    min_scored: int = Field(default=3, ge=1)
    adaptive: bool = True
    max_k: int = DEFAULT_MAX_K  # at least k; see _max_k_default
    regression: Regression | None = None
    min_pass_rate: float | None = None
    pass_score: float
    confidence: float = 0.95
    budgets: Budgets = Budgets()
    blocking: bool = True
    # A Python eval that is an `async def` (as its source or its import says): its trials
    # share a few pool workers' event loops, unless `isolate` keeps each alone.
    asynchronous: bool = False
    isolate: bool = False
    tags: tuple[str, ...] = ()
    owner: str | None = None
    inspect_model: str | None = None  # an Inspect task's model; None: Inspect's own choice
    task_args: dict[str, Any] = {}  # the arguments of an Inspect task's function
    # Declared for the eval's fingerprint (firewall.fingerprint): globs of project files and
    # names of environment variables whose values count.
    inputs: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    # A judge apart (firewall.judging): "module:function" scores each trial's output,
    # judge_repeats times, up to judge_repeats_max when the probe ends unclear.
    judge: str | None = None
    judge_repeats: int = 1
    judge_repeats_max: int = 1
    source: Source

    @model_validator(mode="before")
    @classmethod
    def _max_k_default(cls, data: Any) -> Any:
        # A spec built without max_k (in code, in tests) adapts up to the default, or to its
        # own k when that is more, as a config that leaves max_k unset does.
        if isinstance(data, dict) and "max_k" not in data and isinstance(data.get("k"), int):
            return {**data, "max_k": max(DEFAULT_MAX_K, data["k"])}
        return data

    @classmethod
    def resolve(cls, entry: EvalEntry, settings: Settings, source: Source) -> EvalSpec:
        conflict = max_k_conflict(entry, settings)
        if conflict is not None:
            # Config entries were checked when the config was read; this is a decorated eval.
            key, what = conflict
            raise ConfigError(f"{source}: @firewall.eval {key}: {what}")
        threshold = settings.threshold if entry.threshold is None else entry.threshold
        kind, target = _kind_and_target(entry)
        return cls(
            id=entry.id,
            kind=kind,
            target=target,
            result=entry.result,
            junit_xml=entry.junit_xml,
            k=settings.k if entry.k is None else entry.k,
            threshold=threshold,
            flakiness=settings.flakiness if entry.flakiness is None else entry.flakiness,
            outlier_fence=settings.outlier_fence
            if entry.outlier_fence is None
            else entry.outlier_fence,
            timeout=settings.timeout if entry.timeout is None else entry.timeout,
            import_timeout=(
                settings.import_timeout if entry.import_timeout is None else entry.import_timeout
            ),
            max_errors=settings.max_errors if entry.max_errors is None else entry.max_errors,
            min_scored=settings.min_scored if entry.min_scored is None else entry.min_scored,
            adaptive=settings.adaptive if entry.adaptive is None else entry.adaptive,
            max_k=effective_max_k(entry, settings),
            regression=entry.regression,
            min_pass_rate=entry.min_pass_rate,
            pass_score=threshold if entry.pass_score is None else entry.pass_score,
            confidence=entry.confidence,
            budgets=entry.budgets,
            blocking=entry.blocking,
            isolate=entry.isolate,
            tags=tuple(entry.tags),
            **_rate(entry, settings),
            owner=parse_owner(entry.owner) if entry.owner else None,
            inspect_model=entry.model,
            task_args=entry.task_args,
            inputs=tuple(entry.inputs),
            env=tuple(entry.env),
            **_judging(entry),
            source=source,
        )


def _kind_and_target(entry: EvalEntry) -> tuple[Literal["command", "python", "inspect"], str]:
    if entry.command is not None:
        return "command", entry.command
    if entry.inspect is not None:
        return "inspect", entry.inspect
    return "python", str(entry.python)


def warnings_for(spec: EvalSpec) -> list[str]:
    notes = []
    if spec.min_pass_rate is not None:
        best = wilson_interval(spec.k, spec.k, spec.confidence)[0]
        if best < spec.min_pass_rate:
            needed = smallest_k(spec.min_pass_rate, spec.confidence)
            advice = f"; k >= {needed} can meet it" if needed else "; no k can meet it"
            notes.append(
                f"min_pass_rate {fmt(spec.min_pass_rate)} cannot be met with k={spec.k}: the "
                f"Wilson lower bound is at most {fmt(best)} even at {spec.k}/{spec.k}{advice}"
            )
    if spec.max_errors >= spec.k:
        notes.append(
            f"max_errors {spec.max_errors} >= k={spec.k}: an eval whose every trial "
            "errors is still ERROR, so this tolerance is never the deciding rule"
        )
    if spec.min_scored > spec.k:
        notes.append(
            f"min_scored {spec.min_scored} > k={spec.k}: even with no error a probe scores "
            "too few trials, so every decision is ERROR"
        )
    elif spec.max_errors < spec.k and spec.k - spec.min_scored < spec.max_errors:
        notes.append(
            f"min_scored {spec.min_scored} with k={spec.k} tolerates only "
            f"{spec.k - spec.min_scored} errored trials, fewer than max_errors {spec.max_errors}"
        )
    return notes


RELIABLE = 0.8  # the chance a gate should have of doing its job
COLLAPSE_RATE = 0.10  # the collapse the instability rule is sized against


def power_notes(spec: EvalSpec) -> list[str]:
    """What the gate can do at this k, for `firewall list`.

    A pass-rate gate: the chance that an eval clearly better than the bar (three
    quarters of the way from the bar to 1: 0.95 for a bar of 0.8) passes a run, and
    the k that would make that reliable. The instability rules: the chance that a
    probe of k trials sees a 10% collapse at all, 1 - 0.9^k.
    """
    notes = []
    if spec.min_pass_rate is not None:
        true_rate = spec.min_pass_rate + 0.75 * (1 - spec.min_pass_rate)
        chance = pass_chance(spec.k, true_rate, spec.min_pass_rate, spec.confidence)
        needed = next(
            (
                k
                for k in range(spec.k, MAX_POWER_K + 1)
                if pass_chance(k, true_rate, spec.min_pass_rate, spec.confidence) >= RELIABLE
            ),
            None,
        )
        advice = (
            f"; k >= {needed} passes it in {RELIABLE:.0%}"
            if needed is not None and needed > spec.k
            else ""
        )
        notes.append(
            f"a true pass rate of {fmt(true_rate)} passes {chance:.0%} of runs at "
            f"k={spec.k}{advice}"
        )
    else:
        seen = 1 - (1 - COLLAPSE_RATE) ** spec.k
        needed = math.ceil(math.log(1 - RELIABLE) / math.log(1 - COLLAPSE_RATE))
        advice = f"; k >= {needed} for {RELIABLE:.0%}" if needed > spec.k else ""
        notes.append(
            f"a {COLLAPSE_RATE:.0%} collapse shows in {seen:.0%} of probes at k={spec.k}{advice}"
        )
    return notes


MAX_POWER_K = 500


def pass_chance(k: int, true_rate: float, bar: float, confidence: float) -> float:
    """P(the Wilson lower bound of Binomial(k, true_rate) passes reaches ``bar``)."""
    needed = next((s for s in range(k + 1) if wilson_interval(s, k, confidence)[0] >= bar), None)
    if needed is None:
        return 0.0
    if true_rate <= 0 or true_rate >= 1:
        return 1.0 if true_rate >= 1 else 0.0
    log_p, log_q = math.log(true_rate), math.log1p(-true_rate)
    # In logs: math.comb(k, s) outgrows a float for k above about 1030.
    return math.fsum(
        math.exp(
            math.lgamma(k + 1)
            - math.lgamma(s + 1)
            - math.lgamma(k - s + 1)
            + s * log_p
            + (k - s) * log_q
        )
        for s in range(needed, k + 1)
    )


def smallest_k(min_pass_rate: float, confidence: float) -> int | None:
    """The fewest trials whose perfect record reaches ``min_pass_rate`` at ``confidence``."""
    low, high = 1, MAX_K
    if wilson_interval(high, high, confidence)[0] < min_pass_rate:
        return None
    while low < high:
        middle = (low + high) // 2
        if wilson_interval(middle, middle, confidence)[0] >= min_pass_rate:
            high = middle
        else:
            low = middle + 1
    return low


def _judging(entry: EvalEntry) -> dict[str, Any]:
    """The judge's settings; a ``judge_repeats`` above the default ceiling raises it."""
    if entry.judge is None:
        return {}
    most = entry.judge_repeats_max
    if "judge_repeats_max" not in entry.model_fields_set:
        most = max(most, entry.judge_repeats)
    return {"judge": entry.judge, "judge_repeats": entry.judge_repeats, "judge_repeats_max": most}


def _rate(entry: EvalEntry, settings: Settings) -> dict[str, Any]:
    """The eval's own rate (its bucket its own), else the first [[limits]] of its tags."""
    if entry.rate is not None:
        return {"rate": per_second(entry.rate), "rate_bucket": f"eval:{entry.id}"}
    for limit in settings.limits:
        if limit.tag in entry.tags:
            return {"rate": per_second(limit.rate), "rate_bucket": f"tag:{limit.tag}"}
    return {}
