"""The values the diagnostics hand out: field drift, flipping cases, cause hints, a diagnosis.

Models only, no logic beyond a view of their own data, so every part of the
package (and the report that stores them) can import them without a cycle.
"""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict, JsonValue


class ValueCount(BaseModel):
    """One value of an output field and how many trials returned it."""

    model_config = ConfigDict(frozen=True)

    value: JsonValue
    display: str
    count: int
    missing: bool = False  # the field was absent, which is not the same as a JSON null


class FieldDrift(BaseModel):
    """How much one output field disagreed with its most common value across the trials."""

    model_config = ConfigDict(frozen=True)

    name: str
    drift: float
    trials: int
    distribution: list[ValueCount]


class CaseFlip(BaseModel):
    """A case (item) that passed in some trials and failed in others."""

    model_config = ConfigDict(frozen=True)

    case: str
    pass_rate: float
    passes: int
    trials: int


class Cause(str, enum.Enum):
    """The kinds of likely cause, in their tie-break order."""

    MODEL_CHANGED = "model-changed"
    PROMPT_CHANGED = "prompt-changed"
    CONCURRENCY = "concurrency"
    LATENCY = "latency"
    ERRORS = "errors"
    WARM_UP = "warm-up"
    FEW_CASES = "few-cases"
    BIMODAL = "bimodal"
    JUDGE = "judge"
    SAMPLING = "sampling"


class Hint(BaseModel):
    """A likely cause of the scatter and the numbers that point to it."""

    model_config = ConfigDict(frozen=True)

    kind: Cause
    cause: str
    evidence: str
    weight: float


class Diagnosis(BaseModel):
    """Everything the diagnostics found about one eval's probe."""

    model_config = ConfigDict(frozen=True)

    trials: int
    measured: int
    cases: int
    drift: list[FieldDrift]
    flips: list[CaseFlip]
    hints: list[Hint]
    budgets: dict[str, float | None]

    def drift_rates(self) -> dict[str, float]:
        """Field name -> drift rate, sorted by name, as the history row keeps it."""
        return {entry.name: entry.drift for entry in sorted(self.drift, key=lambda d: d.name)}
