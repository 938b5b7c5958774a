"""Probe parts: the trials of one shard of a probe, written for a later `firewall gate`.

`firewall probe --shard I/N --out part-I.json` runs the trials of shard I and
writes them as a ``Probed`` part; `firewall gate part-*.json` reads the parts
back, each eval in one part only, and decides as `firewall run` would.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from firewall.errors import ArtefactError
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec
from firewall.store.atomic import write_atomic
from firewall.store.jsonfile import read_versioned
from firewall.timeutil import Timestamp

PART_SCHEMA_VERSION = 1


class Probed(BaseModel):
    """The trials of one probe stage: what `firewall probe` writes and `firewall gate` reads."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = PART_SCHEMA_VERSION
    kind: Literal["firewall-probe-part"] = "firewall-probe-part"
    base_seed: int
    started_at: Timestamp
    finished_at: Timestamp
    complete: bool
    shard: str | None = None
    git_sha: str | None = None
    git_ref: str | None = None
    specs: list[EvalSpec]
    trials: dict[str, list[TrialRecord]]
    skipped: list[str] = []

    def write(self, path: Path) -> None:
        write_atomic(path, self.model_dump_json(indent=1) + "\n")


def load_parts(paths: Sequence[Path]) -> list[Probed]:
    """The probe parts at ``paths``, refusing an eval probed in more than one of them."""
    parts = [load_part(path) for path in paths]
    seen: dict[str, Path] = {}
    for path, part in zip(paths, parts, strict=True):
        for eval_id in part.trials:
            if eval_id in seen:
                raise ArtefactError(
                    f"{path}: eval {eval_id!r} was already probed in {seen[eval_id]}; "
                    "give each eval to one shard only"
                )
            seen[eval_id] = path
    return parts


def load_part(path: Path) -> Probed:
    return read_versioned(
        path,
        Probed,
        what="probe part",
        version=PART_SCHEMA_VERSION,
        kind="firewall-probe-part",
        hint=" (write one with `firewall probe --out`)",
    )
