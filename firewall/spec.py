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
        threshold = _pick(entry.threshold, settings.threshold)
        return cls(
            id=entry.id,
            kind="command" if entry.command is not None else "python",
            target=entry.command if entry.command is not None else str(entry.python),
            result=entry.result,
            k=_pick(entry.k, settings.k),
            threshold=threshold,
            flakiness=_pick(entry.flakiness, settings.flakiness),
            outlier_fence=_pick(entry.outlier_fence, settings.outlier_fence),
            timeout=_pick(entry.timeout, settings.timeout),
            max_errors=_pick(entry.max_errors, settings.max_errors),
            min_pass_rate=entry.min_pass_rate,
            pass_score=_pick(entry.pass_score, threshold),
            confidence=entry.confidence,
            budgets=entry.budgets,
            blocking=entry.blocking,
            tags=tuple(entry.tags),
            owner=entry.owner.lstrip("@") if entry.owner else None,
            source=source,
        )


def _pick(own: float | int | None, default: float | int) -> float | int:
    return default if own is None else own
