"""EvalSpec: one eval with every setting resolved, the unit the rest of the run works on."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from firewall.config import Budgets, EvalEntry, Settings


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
    kind: Literal["command", "python"]
    target: str  # the shell command, or "module:function"
    result: Literal["json", "exit-code"] = "json"
    k: int
    threshold: float
    flakiness: float
    outlier_fence: float
    timeout: float
    max_errors: int
    min_pass_rate: float | None = None
    pass_score: float
    confidence: float = 0.95
    budgets: Budgets = Budgets()
    blocking: bool = True
    tags: tuple[str, ...] = ()
    owner: str | None = None
    source: Source

    @classmethod
    def resolve(cls, entry: EvalEntry, settings: Settings, source: Source) -> EvalSpec:
        threshold = settings.threshold if entry.threshold is None else entry.threshold
        return cls(
            id=entry.id,
            kind="command" if entry.command is not None else "python",
            target=entry.command if entry.command is not None else str(entry.python),
            result=entry.result,
            k=settings.k if entry.k is None else entry.k,
            threshold=threshold,
            flakiness=settings.flakiness if entry.flakiness is None else entry.flakiness,
            outlier_fence=settings.outlier_fence
            if entry.outlier_fence is None
            else entry.outlier_fence,
            timeout=settings.timeout if entry.timeout is None else entry.timeout,
            max_errors=settings.max_errors if entry.max_errors is None else entry.max_errors,
            min_pass_rate=entry.min_pass_rate,
            pass_score=threshold if entry.pass_score is None else entry.pass_score,
            confidence=entry.confidence,
            budgets=entry.budgets,
            blocking=entry.blocking,
            tags=tuple(entry.tags),
            owner=entry.owner.lstrip("@") if entry.owner else None,
            source=source,
        )
