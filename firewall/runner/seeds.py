"""Trial seeds, derived so that any trial can be replayed from the artefact."""

from __future__ import annotations

import dataclasses
import hashlib
import secrets


def trial_seed(base_seed: int, eval_id: str, index: int) -> int:
    """The seed of trial ``index`` (0-based) of ``eval_id`` under ``base_seed``."""
    digest = hashlib.sha256(f"{base_seed}:{eval_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def fresh_base_seed() -> int:
    """A new base seed for `seed = "random"` and nightly runs."""
    return secrets.randbelow(2**31)


@dataclasses.dataclass(frozen=True)
class BaseSeed:
    """The base seed a run asked for: a fixed number, or a fresh one drawn per run."""

    fixed: int | None  # None: "random"

    @classmethod
    def parse(cls, value: int | str) -> BaseSeed:
        """``1234`` or ``"random"``; anything else is a ``ValueError`` that says what is allowed."""
        if value == "random":
            return cls(None)
        try:
            number = value if isinstance(value, int) else int(value)
        except ValueError:
            raise ValueError(
                f'expected a non-negative integer or "random", got {value!r}'
            ) from None
        if isinstance(number, bool) or number < 0:
            raise ValueError(f'expected a non-negative integer or "random", got {value!r}')
        return cls(number)

    def draw(self) -> int:
        """The seed this run uses, recorded in its artefact so that any trial can be replayed."""
        return fresh_base_seed() if self.fixed is None else self.fixed

    def __str__(self) -> str:
        return "random" if self.fixed is None else str(self.fixed)


RANDOM = BaseSeed(None)


def judge_seed(trial_seed: int, judgement: int) -> int:
    """The seed of judgement ``judgement`` (0-based) of the output of the trial seeded
    ``trial_seed``: derived as trial seeds are, from the trial's own seed, so that
    ``firewall replay ID --seed S`` judges the output as the run did."""
    digest = hashlib.sha256(f"{trial_seed}:judge:{judgement}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
