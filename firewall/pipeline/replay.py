"""`firewall replay`: one trial of one eval, or of one suite's case, run again."""

from __future__ import annotations

import dataclasses

from firewall.discovery import unknown_eval_message
from firewall.errors import UsageError
from firewall.pipeline import suites
from firewall.pipeline.context import Context
from firewall.runner import Task
from firewall.runner import replay as run_one
from firewall.runner.outcome import Outcome
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec


@dataclasses.dataclass(frozen=True)
class TrialReplay:
    """One trial of an eval, run again: what it reported and printed, and its record."""

    spec: EvalSpec
    trial: int
    seed: int
    outcome: Outcome
    record: TrialRecord

    @property
    def reproduced(self) -> bool:
        """Whether the trial produced a valid result, as replay's exit code says."""
        return not self.record.errored


def replay(ctx: Context, eval_id: str, *, seed: int, trial: int) -> TrialReplay | suites.CaseReplay:
    """Run trial ``trial`` of ``eval_id`` with ``seed``: an eval the configuration defines,
    or a suite's case (``SUITE/case``), which runs the suite asking for that case alone."""
    spec = next((spec for spec in ctx.specs if spec.id == eval_id), None)
    share_token = ctx.settings.github.share_token
    if spec is None:
        found = suites.find_case(ctx.specs, eval_id)
        if found is None:
            raise UsageError(unknown_eval_message(eval_id, [s.id for s in ctx.specs]))
        suite, case = found
        return suites.replay_case(
            suite, case, seed=seed, trial=trial, cwd=ctx.cwd, share_token=share_token
        )
    if spec.judge is not None:  # its output judged as often as an unclear probe's is
        spec = spec.model_copy(update={"judge_repeats": spec.judge_repeats_max})
    outcome, record = run_one(Task(spec, trial, seed, spec.k), cwd=ctx.cwd, share_token=share_token)
    return TrialReplay(spec, trial, seed, outcome, record)
