"""A judged trial as the artefact keeps it: the output the eval yielded, each judgement.

Models only (``firewall.runner.judged`` runs the judge and makes the trial's record
from its judgements), so that ``trial.py`` can hold them without a cycle.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue, PrivateAttr

OUTPUT_KEPT_CHARS = 8_000
"""How much of an output the artefact keeps (its text, or its JSON as text): the judge
always sees all of it, and a re-judging in the same run does too."""


class Judgement(BaseModel):
    """One call of the judge on one output: its seed and what it answered."""

    model_config = ConfigDict(extra="forbid")

    seed: int
    score: float | None = None
    passed: bool | None = None
    items: dict[str, float] = {}
    violations: list[str] = []
    error: str | None = None
    duration_s: float = 0.0


class Judged(BaseModel):
    """The output of one trial and its judgements, in the order they were made."""

    model_config = ConfigDict(extra="forbid")

    judge: str  # "module:function"
    output: JsonValue = None  # cut to OUTPUT_KEPT_CHARS when ``output_chars`` says so
    output_chars: int | None = None  # the whole output's length, when the kept one is cut
    judgements: list[Judgement] = []
    _whole: Any = PrivateAttr(default=None)  # the output as the judge saw it

    @classmethod
    def of(cls, judge: str, output: Any) -> Judged:
        """The output kept for the artefact, cut if long; the whole kept beside it."""
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        if len(text) <= OUTPUT_KEPT_CHARS:
            judged = cls(judge=judge, output=output)
        else:
            judged = cls(judge=judge, output=text[:OUTPUT_KEPT_CHARS] + "…", output_chars=len(text))
        judged._whole = output
        return judged

    @property
    def whole(self) -> Any:
        """The output to judge again: the whole one while this run lasts, else what was kept."""
        return self._whole if self._whole is not None else self.output

    @property
    def scores(self) -> list[float]:
        """The scores of the judgements that answered."""
        return [j.score for j in self.judgements if j.error is None and j.score is not None]

    def lines(self) -> list[str]:
        """The output and each judgement, as `firewall replay` prints them."""
        shown = self.output if isinstance(self.output, str) else json.dumps(self.output)
        cut = f" (cut from {self.output_chars:,} characters)" if self.output_chars else ""
        said = [f"output{cut}:", *(f"  {line}" for line in shown.splitlines() or [""])]
        for number, judgement in enumerate(self.judgements):
            head = f"judgement {number} (seed {judgement.seed}) by {self.judge}: "
            if judgement.error is not None:
                said.append(head + f"ERROR {judgement.error}")
            else:
                said.append(head + f"score {judgement.score} passed {judgement.passed}")
        return said
