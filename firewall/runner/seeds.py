"""Trial seeds, derived so that any trial can be replayed from the artefact."""

from __future__ import annotations

import hashlib
import secrets


def trial_seed(base_seed: int, eval_id: str, index: int) -> int:
    """The seed of trial ``index`` (0-based) of ``eval_id`` under ``base_seed``."""
    digest = hashlib.sha256(f"{base_seed}:{eval_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def fresh_base_seed() -> int:
    """A new base seed for `seed = "random"` and nightly runs."""
    return secrets.randbelow(2**31)
