"""The artefact, ``firewall-report.json``: everything a run measured and decided (contract §6)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from firewall._version import __version__
from firewall.diagnostics import CaseFlip, Hint, ValueCount
from firewall.policy import Check, Status
from firewall.runner.trial import TrialRecord
from firewall.spec import Source
from firewall.stats import Stats
from firewall.store.atomic import write_atomic
from firewall.store.jsonfile import read_versioned
from firewall.timeutil import Timestamp

SCHEMA_VERSION = 1


class Tool(BaseModel):
    name: str = "flakiness-firewall"
    version: str = __version__


class RunInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["run", "gate", "nightly"]
    base_seed: int
    started_at: Timestamp
    finished_at: Timestamp | None = None
    git_sha: str | None = None
    git_ref: str | None = None
    complete: bool = False
    shard: str | None = None


class Summary(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    pass_: int = Field(default=0, alias="pass")
    fail: int = 0
    quarantine: int = 0
    quarantined: int = 0
    error: int = 0
    exit_code: int = 0


class EvalReport(BaseModel):
    """One eval's decision with the numbers and trials behind it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    status: Status
    blocking: bool
    reason: str
    source: Source
    k: int
    threshold: float
    flakiness: float
    stats: Stats
    trials: list[TrialRecord] = []
    checks: list[Check] = []
    drift: dict[str, float] = {}
    distributions: dict[str, list[ValueCount]] = {}
    flips: list[CaseFlip] = []
    hints: list[Hint] = []
    tags: list[str] = []
    owner: str | None = None


class Artefact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    tool: Tool = Tool()
    run: RunInfo
    summary: Summary
    evals: list[EvalReport]

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"

    def write(self, path: Path) -> None:
        write_atomic(path, self.to_json())


def load(path: Path) -> Artefact:
    return read_versioned(path, Artefact, what="report", version=SCHEMA_VERSION)
