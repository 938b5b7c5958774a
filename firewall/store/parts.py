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

from firewall.discovery import Shard
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


def load_parts(paths: Sequence[Path], *, allow_partial: bool = False) -> list[Probed]:
    """The probe parts at ``paths``, refusing an eval probed in more than one of them,
    and a set with a shard missing or of mixed base seeds unless ``allow_partial``."""
    parts = [load_part(path) for path in paths]
    problems = gaps(paths, parts)
    if problems and not allow_partial:
        raise ArtefactError(
            f"{'; '.join(problems)}: these parts are not one whole probe; pass every part "
            "of one probe, or `--allow-partial` to decide the ones you have"
        )
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


def gaps(paths: Sequence[Path], parts: Sequence[Probed]) -> list[str]:
    """What a set of parts lacks to be one whole probe: shards not among them, base
    seeds that differ. A shard whose artefact did not download must not pass for green."""
    problems = []
    counts: dict[int, set[int]] = {}
    for part in parts:
        if part.shard:
            shard = Shard.parse(part.shard)
            counts.setdefault(shard.count, set()).add(shard.index)
    if len(counts) > 1:
        problems.append(
            f"the parts split the evals {' and '.join(f'{n} ways' for n in sorted(counts))}"
        )
    for total, seen in sorted(counts.items()):
        missing = [f"{i}/{total}" for i in range(1, total + 1) if i not in seen]
        if missing:
            problems.append(f"shard {', '.join(missing)} is missing")
    seeds = {part.base_seed for part in parts}
    if len(seeds) > 1:
        each = ", ".join(
            f"{part.base_seed} in {path}" for path, part in zip(paths, parts, strict=True)
        )
        problems.append(f"the parts ran with different base seeds ({each})")
    return problems
