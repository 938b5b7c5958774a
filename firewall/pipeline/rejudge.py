"""Re-judging: an eval with a judge whose probe ended unclear has its outputs judged again.

Contract §4, "A judge apart". After the probe, an eval with a judge that ended
unstable or near a line (``adaptive.conclude``: a QUARANTINE, or a stop ``near``
something) has every output it already has judged up to ``judge_repeats_max`` times,
with no new generation, before it is decided; the nightly re-judges every probed eval
with a judge it re-probes for its quarantine (``always``). A stable eval, clear
of every line, is judged ``judge_repeats`` times and costs nothing more.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from firewall import adaptive, judging
from firewall.policy import Status
from firewall.runner import judged, trial_environment
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec


def unclear(spec: EvalSpec, trials: Sequence[TrialRecord]) -> bool:
    """Whether the probe ended unstable or near a line, as its decision stands."""
    concluded = adaptive.conclude(spec, trials)
    if concluded is None:
        return False
    decision, stop = concluded
    return decision.status is Status.QUARANTINE or bool(stop.near)


def wanted(
    specs: Sequence[EvalSpec],
    results: Mapping[str, list[TrialRecord]],
    *,
    always: Collection[str] = (),
) -> list[tuple[EvalSpec, TrialRecord, int]]:
    """The outputs to judge again: each judged trial of an eval that wants more (an
    unclear one, or one of ``always``), and how many more judgements it takes to reach
    ``judge_repeats_max``."""
    asked = []
    for spec in specs:
        trials = results.get(spec.id)
        if spec.judge is None or not trials:
            continue
        ordered = sorted(trials, key=lambda trial: trial.index)
        is_unclear = spec.id in always or unclear(spec, ordered)
        if not judging.judgements_wanted(
            spec.judge, spec.judge_repeats_max, ordered, unclear=is_unclear
        ):
            continue
        for trial in judging.judged_trials(ordered):
            assert trial.judged is not None
            more = spec.judge_repeats_max - len(trial.judged.judgements)
            if more > 0:
                asked.append((spec, trial, more))
    return asked


def rejudge(
    specs: Sequence[EvalSpec],
    results: Mapping[str, list[TrialRecord]],
    *,
    cwd: Path,
    concurrency: int,
    share_token: bool = False,
    always: Collection[str] = (),
) -> dict[str, list[TrialRecord]]:
    """The results with the outputs of unclear evals judged again (``wanted``)."""
    asked = wanted(specs, results, always=always)
    if not asked:
        return dict(results)
    redone = judged.rejudge(
        asked,
        cwd=cwd,
        concurrency=concurrency,
        env=trial_environment(share_token=share_token),
    )
    fresh = {
        (spec.id, record.index): record for (spec, _, _), record in zip(asked, redone, strict=True)
    }
    return {
        eval_id: [fresh.get((eval_id, trial.index), trial) for trial in trials]
        for eval_id, trials in results.items()
    }
