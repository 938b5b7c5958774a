"""Python evals of the triage model: one declared in pyproject.toml, two with @firewall.eval.

Python evals run in a long-lived worker process, so they pay for importing
the model once, not once per trial as a command does.
"""

from __future__ import annotations

import asyncio

import firewall
from examples.evals import support_model as model


def sampled_triage(seed: int) -> float:
    """triage-sampled (declared in pyproject.toml): the triage model at the drafter's temperature.

    At temperature 1.2 the right category comes out in only about seven calls
    of ten, so two trials differ by a few tickets and the IQR of the accuracy
    is over twice the flakiness of 0.03. The firewall quarantines the eval
    rather than gate on a number that luck decides. Returning a bare float is
    the smallest trial result there is.
    """
    return model.triage(seed, temperature=model.SAMPLING).accuracy


@firewall.eval(threshold=0.85, tags=["capability"], blocking=False)
def triage_prompt_v2(seed: int) -> firewall.TrialResult:
    """triage-prompt-v2: a candidate prompt that files refund requests under billing.

    The mistake is the same in every trial, so the eval is stable and its
    median is below the bar: a real regression, and a FAIL. It is marked
    non-blocking, as a capability eval for work in progress would be.
    """
    run = model.triage(seed, temperature=model.GREEDY, prompt_version="triage-v2")
    return trial_result(run)


@firewall.eval(threshold=0.85, tags=["triage"])
async def triage_async(seed: int) -> firewall.TrialResult:
    """triage-async: the shipped triage model behind an async client, as an LLM app calls it.

    An ``async def`` eval: its trials are tasks on the event loop of a pool
    worker, so all of them wait on the model at once in one process, however
    high ``concurrency`` is set. They share that process, so each keeps its
    state local: the model draws from a ``random.Random(seed)`` of its own,
    never from the module-level ``random``.
    """
    await asyncio.sleep(0.02)  # the provider's round trip: the loop serves other trials meanwhile
    run = model.triage(seed, temperature=model.GREEDY)
    return trial_result(run)


def trial_result(run: model.TriageRun) -> firewall.TrialResult:
    """A triage run as a trial result: the accuracy, each ticket as an item, the calls' means."""
    return firewall.TrialResult(
        score=run.accuracy,
        items=run.items,
        metrics=model.mean_metrics(run.usages),
        model_id=model.MODEL_ID,
        prompt_version=run.prompt_version,
    )
