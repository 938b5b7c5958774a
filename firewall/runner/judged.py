"""Evals with a judge: the output generated once, then judged, and judged again if need be.

An eval that names a judge (``judge = "module:function"``) yields an ``output`` and
no score; its judge is called as ``judge(output, seed=..., trial=...)`` in the same
worker machinery as any Python eval, with seeds of its own (``seeds.judge_seed``),
and answers as an eval does (a score, a bool, a dict, ``TrialResult``). The trial's
result is made of its judgements: the mean of their scores, their items averaged,
their violations together; the eval's own metrics, fields and attribution stay. A
judge that cannot answer makes the trial an error, never a low score.

``judge`` runs in the trial's own task, right after the generation, so that an eval
judged once per output (``judge_repeats = 1``, the default) costs one call more
than the generation, as an eval that called its judge itself did. An async eval's
judge is called in the async pool, beside the generation (``caller``): an
``async def`` judge runs there, among the run's other calls in flight, and the
slot's own worker never boots; a plain ``def`` judge, a call the pool loses, or an
output too long for one pipe write is called in the slot's worker, as any other. ``rejudge`` judges
outputs a probe already has again, with no new generation (``firewall.pipeline.rejudge``
says when).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from firewall.runner.judgement import Judged, Judgement
from firewall.runner.outcome import Outcome
from firewall.runner.pool import Alone, AsyncPool
from firewall.runner.python import PythonWorker
from firewall.runner.reaper import Reaper
from firewall.runner.schedule import Task
from firewall.runner.seeds import judge_seed
from firewall.runner.trial import TrialRecord, error_record, record_from_payload
from firewall.spec import EvalSpec

__all__ = ["Call", "caller", "combined", "judge", "judgements", "rejudge", "rejudged"]

Call = Callable[[Any, int], Outcome]
"""One call of the judge: (the output, the judgement's seed) -> what it answered."""

_SCORED = ("score", "passed")


def caller(
    spec: EvalSpec,
    trial: int,
    worker: PythonWorker,
    register: Callable[[int | None], None] = lambda pid: None,
    *,
    pool: AsyncPool | None = None,
) -> Call:
    """The judge of ``spec`` called for the output of trial ``trial``: in the ``pool``
    when given (an async eval's), unless the pool hands the call back, else in ``worker``."""
    assert spec.judge is not None
    judge_target = spec.judge

    def call(output: Any, seed: int) -> Outcome:
        handed_back: Alone | None = None
        if pool is not None:
            pooled = pool.call(
                judge_target,
                seed,
                trial,
                spec.timeout,
                register,
                import_timeout=spec.import_timeout,
                output=output,
            )
            if isinstance(pooled, Outcome):
                return pooled
            handed_back = pooled  # a plain def judge, a long output, or a lost worker
        outcome = worker.call(
            judge_target,
            seed,
            trial,
            spec.timeout,
            register,
            import_timeout=spec.import_timeout,
            output=output,
        )
        if pool is not None and handed_back is Alone.TRIAL and outcome.worker_lost:
            pool.isolate(judge_target)  # it kills the worker it runs in: the slot's from now on
        return outcome

    return call


def judge(task: Task, outcome: Outcome, call: Call) -> Outcome:
    """The generation's outcome with its output judged ``judge_repeats`` times: its
    payload becomes the trial's result, and ``outcome.judged`` keeps the judgements."""
    spec = task.spec
    assert spec.judge is not None
    if outcome.error is not None:
        return outcome
    payload = outcome.payload
    if not isinstance(payload, dict) or payload.get("output") is None:
        outcome.error = (
            f"the eval names a judge ({spec.judge}) but its result has no `output` to judge"
        )
        return outcome
    rest = {key: value for key, value in payload.items() if key != "output"}
    given = [key for key in _SCORED if rest.get(key) is not None]
    if given:
        outcome.error = (
            f"an eval with a judge yields its `output` and no `{given[0]}`: its judge "
            f"({spec.judge}) scores the output"
        )
        return outcome
    judged = Judged.of(spec.judge, payload["output"])
    judged.judgements = judgements(task, judged.whole, 0, spec.judge_repeats, call)
    outcome.payload, outcome.error = combined(rest, judged)
    outcome.judged = judged
    return outcome


def judgements(task: Task, output: Any, start: int, count: int, call: Call) -> list[Judgement]:
    """Judgements ``start`` to ``start + count - 1`` of one output, each with its own seed."""
    made = []
    for number in range(start, start + count):
        seed = judge_seed(task.seed, number)
        made.append(_judgement(call(output, seed), seed, task))
    return made


def _judgement(outcome: Outcome, seed: int, task: Task) -> Judgement:
    took = round(outcome.call_s or 0.0, 6)
    if outcome.error is not None:
        return Judgement(seed=seed, error=outcome.error, duration_s=took)
    record = record_from_payload(
        outcome.payload,
        index=task.index,
        seed=seed,
        pass_score=task.spec.pass_score,
        duration_s=took,
        in_flight=1,
    )
    if record.error is not None:
        return Judgement(
            seed=seed,
            error=record.error.replace("eval reported", "judge reported"),
            duration_s=took,
        )
    return Judgement(
        seed=seed,
        score=record.score,
        passed=record.passed,
        items=record.items,
        violations=record.violations,
        duration_s=took,
    )


def combined(rest: Mapping[str, Any], judged: Judged) -> tuple[dict[str, Any] | None, str | None]:
    """The trial result its judgements make, with the eval's own keys (``rest``); or the
    error of the first judgement that could not answer."""
    made = judged.judgements
    for number, judgement in enumerate(made):
        if judgement.error is not None:
            return None, (
                f"judge {judged.judge}, judgement {number} (seed {judgement.seed}): "
                f"{judgement.error}"
            )
    scores = [j.score for j in made if j.score is not None]
    payload: dict[str, Any] = {**rest, "score": sum(scores) / len(scores)}
    verdicts = [j.passed for j in made if j.passed is not None]
    passes = sum(verdicts)
    if len(verdicts) == len(made) and 2 * passes != len(verdicts):  # a tie: by the mean score
        payload["passed"] = 2 * passes > len(verdicts)
    keys = made[0].items.keys()
    if keys and all(j.items.keys() == keys for j in made):
        payload["items"] = {key: sum(j.items[key] for j in made) / len(made) for key in keys}
    violations = list(dict.fromkeys(v for j in made for v in j.violations))
    if violations:
        payload["violations"] = violations
    return payload, None


def rejudged(record: TrialRecord, more: Sequence[Judgement], spec: EvalSpec) -> TrialRecord:
    """A judged trial's record with ``more`` judgements of its output."""
    assert record.judged is not None
    judged = record.judged.model_copy(update={"judgements": [*record.judged.judgements, *more]})
    rest = {
        "metrics": record.metrics,
        "fields": record.fields,
        "model_id": record.model_id,
        "prompt_version": record.prompt_version,
    }
    payload, error = combined({k: v for k, v in rest.items() if v}, judged)
    index, seed, took, in_flight = record.index, record.seed, record.duration_s, record.in_flight
    if error is not None:
        remade = error_record(
            index=index, seed=seed, error=error, duration_s=took, in_flight=in_flight
        )
    else:
        remade = record_from_payload(
            payload,
            index=index,
            seed=seed,
            pass_score=spec.pass_score,
            duration_s=took,
            in_flight=in_flight,
        )
    kept = {"import_s": record.import_s, "boot_s": record.boot_s, "blocked_s": record.blocked_s}
    return remade.model_copy(update={"judged": judged, **kept})


Wanted = Sequence[tuple[EvalSpec, TrialRecord, int]]
"""Re-judging asked for: each trial's record and how many more judgements of its output."""


def rejudge(
    wanted: Wanted, *, cwd: Path, concurrency: int, env: Mapping[str, str] | None = None
) -> list[TrialRecord]:
    """Judge outputs again, with no new generation: each trial's record with its new
    judgements, in the order asked. ``env``: the trials' environment (the runner's
    ``trial_environment``), None for the firewall's own."""
    if not wanted:
        return []
    with Reaper(env) as reaper:
        local = threading.local()
        workers: list[PythonWorker] = []
        lock = threading.Lock()

        def own_worker() -> PythonWorker:
            worker: PythonWorker | None = getattr(local, "worker", None)
            if worker is None:
                worker = local.worker = PythonWorker(cwd, reaper.environment)
                with lock:
                    workers.append(worker)
            return worker

        def one(item: tuple[EvalSpec, TrialRecord, int]) -> TrialRecord:
            spec, record, count = item
            assert record.judged is not None
            task = Task(spec, record.index, record.seed, spec.k)
            call = caller(spec, record.index, own_worker())
            start = len(record.judged.judgements)
            return rejudged(record, judgements(task, record.judged.whole, start, count, call), spec)

        try:
            with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(wanted)))) as threads:
                return list(threads.map(one, wanted))
        finally:
            for worker in workers:
                worker.close()
