"""The artefact, ``firewall-report.json``: everything a run measured and decided (contract §6).

These are the typed values a decided run is made of. They sit below the core
that reads them (the lifecycle turns an ``EvalReport`` into a registry entry)
and below the store that writes them; ``firewall.store.reports`` reads and
writes the file.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from firewall._stats import Stats
from firewall._version import __version__
from firewall.adaptive import Stop
from firewall.diagnostics import CaseFlip, Hint, ValueCount
from firewall.errors import ExitCode
from firewall.policy import Check, Status
from firewall.runner.trial import TrialRecord
from firewall.spec import Source
from firewall.timeutil import Timestamp

SCHEMA_VERSION = 1


class Tool(BaseModel):
    name: str = "flakiness-firewall"
    version: str = __version__


class Saved(BaseModel):
    """What an affected-only run did not spend: the carried evals' last probes' cost."""

    model_config = ConfigDict(extra="forbid")

    evals: int = 0
    trials: int = 0
    seconds: float = 0.0
    cost_usd: float | None = None  # None: no carried probe reported a cost_usd metric


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
    partial: list[str] = []  # a gate's `--allow-partial`: what its parts lacked
    stale: list[str] = []  # a gate's `--allow-stale`: its parts of another commit
    saved: Saved | None = None  # an affected-only run: what carrying evals saved


class Summary(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    pass_: int = Field(default=0, alias="pass")
    fail: int = 0
    quarantine: int = 0
    quarantined: int = 0
    error: int = 0
    exit_code: ExitCode = ExitCode.OK
    trials: int = 0  # trials run, over every decided eval
    planned: int = 0  # what k planned for those evals: adaptive K saved or added the difference

    @property
    def result(self) -> str:
        """pass, fail or error: the run's overall result, as the ``status`` step output."""
        return self.exit_code.result


class Carried(BaseModel):
    """Where a carried eval's status and numbers come from: its latest default-branch probe
    with the fingerprint the eval has now (contract §4, affected-only pull requests)."""

    model_config = ConfigDict(extra="forbid")

    branch: str
    git_sha: str | None = None
    probed_at: Timestamp


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
    stop: Stop | None = None  # how many trials the decision took, and why it stopped there
    # Everything that can change the eval's outcome, hashed (firewall.fingerprint), and the
    # named parts it was made from; None where its inputs cannot be known.
    fingerprint: str | None = None
    inputs: dict[str, str] = {}
    carried: Carried | None = None  # not probed: the default branch's decision, shown
    affected: str | None = None  # an affected-only run: why this eval was probed


class Artefact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    tool: Tool = Tool()
    run: RunInfo
    summary: Summary
    evals: list[EvalReport]

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


def severity(report: EvalReport) -> tuple[int, float, str]:
    """A sort key, worst first: blocking fail, blocking error, non-blocking fail and
    error, quarantine, quarantined, pass; within a group, the furthest below its bar."""
    failed = report.status in (Status.FAIL, Status.ERROR)
    if failed and report.blocking:
        group = 0 if report.status is Status.FAIL else 1
    elif failed:
        group = 2 if report.status is Status.FAIL else 3
    else:
        group = {Status.QUARANTINE: 4, Status.QUARANTINED: 5}.get(report.status, 6)
    return group, -_badness(report), report.id


def _badness(report: EvalReport) -> float:
    stats = report.stats
    if report.status is Status.ERROR:
        return float(stats.errors)
    if report.status in (Status.QUARANTINE, Status.QUARANTINED):
        return stats.iqr if stats.iqr is not None else math.inf
    if stats.median is None:  # nothing scored: as far below the bar as it gets
        return math.inf
    return report.threshold - stats.median
