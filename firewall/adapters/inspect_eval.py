"""Inspect AI tasks as evals: one epoch of the task per trial, with the trial's seed.

An eval ``inspect = "tasks/triage.py@triage"`` runs in the Python worker, as a
``python`` eval does, so that Inspect is imported once per worker and each trial
gets the worker's timeout, process cleanup and error reports. The worker's
protocol carries a target, a seed and a trial index only: the task, the model
and the task's arguments travel in the name of the target's function
(``worker_target``), which this module's ``__getattr__`` turns back into a trial
function when the worker first looks it up. Inspect is imported there, where the
worker imports an eval's module, and not in a trial.

A trial runs ``inspect_ai.eval`` on the task as ``inspect eval`` would (the task
file is loaded by Inspect, in its own directory), with ``epochs=1`` and the
trial's seed as the generation seed. It reports the task's headline metric
(the one the task declares, else the first metric of its first scorer) as the
score; each sample's score on that scorer as ``items``, so that the item-aware
rule and the flipping-case hint apply; the tokens the models used; and the
model as ``model_id``. Inspect's log goes to a directory in the run's scratch
(``FIREWALL_SCRATCH``) that goes with the trial: ``inspect eval`` would write it
into ``./logs`` of the project.

Two of Inspect's own limits meet users here, and the errors say so: a task whose
function takes an argument named ``model`` gets it from ``task_args``, since the
eval's ``model`` key is Inspect's model, as ``--model`` is; and Inspect's offline
``mockllm/model`` counts tokens with tiktoken, which downloads its encoding the
first time (``TOKENIZER_OFFLINE``).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalScore

_PREFIX = "task_"
_SCRATCH = "FIREWALL_SCRATCH"  # firewall.runner.reaper.MARKER: the run's scratch directory
INSTALL = "Inspect AI is not installed: pip install 'flakiness-firewall[inspect]'"
MODEL_ARGUMENT = (
    "the task's own argument `model` is not the eval's `model` key, which is Inspect's model "
    '(--model): pass it as task_args = { model = "..." }'
)
TOKENIZER_OFFLINE = (
    "Inspect could not download a tokenizer (mockllm counts tokens with tiktoken, which fetches "
    "its encoding on first use): run once with network access so that it is cached "
    "(TIKTOKEN_CACHE_DIR says where), or have the model's outputs carry their usage "
    "(ModelOutput.usage), as the firewall's tests do offline"
)
_MISSING_MODEL = re.compile(r"missing \d+ required .*argument.*'model'")
_TOKENIZER_FETCH = re.compile(r"tiktoken|openaipublic\.blob\.core\.windows\.net|/encodings/")


class Call(NamedTuple):
    """One Inspect eval's settings: what each of its trials runs."""

    task: str  # "path/to/tasks.py@task_name", from the working directory
    model: str | None  # None: Inspect's own choice (the task's model, INSPECT_EVAL_MODEL)
    task_args: dict[str, Any]


def worker_target(task: str, model: str | None, task_args: Mapping[str, Any]) -> str:
    """The worker's ``module:function`` target for an Inspect eval, its settings encoded."""
    document = json.dumps(
        {"task": task, "model": model, "task_args": dict(task_args)},
        sort_keys=True,
        separators=(",", ":"),
    )
    # URL-safe base64 has neither "." (the worker splits a function's name on dots) nor ":".
    token = base64.urlsafe_b64encode(document.encode()).decode().rstrip("=")
    return f"{__name__}:{_PREFIX}{token}"


def __getattr__(name: str) -> Callable[..., dict[str, Any]]:
    """The trial function a ``worker_target`` names."""
    if not name.startswith(_PREFIX):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    call = _decode(name.removeprefix(_PREFIX))
    try:
        import inspect_ai  # noqa: F401 - imported with the eval, not in its first trial
    except ImportError:
        raise ImportError(INSTALL) from None

    def run(seed: int) -> dict[str, Any]:
        return run_trial(call, seed)

    return run


def _decode(token: str) -> Call:
    try:
        document = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return Call(document["task"], document["model"], document["task_args"])
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise AttributeError(f"not a target made by worker_target: {exc}") from None


def run_trial(call: Call, seed: int) -> dict[str, Any]:
    """Run one epoch of the task with ``seed``; its trial result JSON."""
    from inspect_ai import eval as inspect_eval

    model: dict[str, Any] = {} if call.model is None else {"model": call.model}
    with tempfile.TemporaryDirectory(prefix="inspect-", dir=os.environ.get(_SCRATCH)) as logs:
        try:
            results = inspect_eval(
                call.task,
                task_args=call.task_args,
                epochs=1,
                seed=seed,
                display="none",
                log_dir=logs,
                **model,
            )
        except TypeError as exc:  # the task's function called with arguments it does not take
            if "model" in call.task_args or not _MISSING_MODEL.search(str(exc)):
                raise
            raise TypeError(f"{exc}: {MODEL_ARGUMENT}") from exc
        if len(results) != 1:
            raise RuntimeError(f"{call.task} ran as {len(results)} evals; expected one task")
        # Read before the directory goes: the log's samples are read from its file on demand.
        return trial_result(results[0])


def trial_result(log: EvalLog) -> dict[str, Any]:
    """The trial result JSON of one finished Inspect eval."""
    if log.status != "success":
        why = log.error.message if log.error is not None else "no error was recorded"
        if _TOKENIZER_FETCH.search(why):
            why = f"{TOKENIZER_OFFLINE}; Inspect said: {why}"
        raise RuntimeError(f"Inspect's eval ended with status {log.status!r}: {why}")
    headline = _headline(log)
    if headline is None:
        raise ValueError("the task reported no metric: does it have a scorer?")
    score, name, value = headline
    if not 0 <= value <= 1:  # NaN fails too
        raise ValueError(
            f"the task's metric {score.name}/{name} is {value}, outside [0, 1]; "
            "the firewall gates scores in [0, 1]"
        )
    result: dict[str, Any] = {"score": value, "model_id": log.eval.model}
    items = _items(log, score)
    if items:
        result["items"] = items
    usage = list(log.stats.model_usage.values())
    if usage:
        result["metrics"] = {"tokens": float(sum(u.total_tokens for u in usage))}
        costs = [u.total_cost for u in usage]
        if all(cost is not None for cost in costs):
            result["metrics"]["cost_usd"] = math.fsum(c for c in costs if c is not None)
    return result


def _headline(log: EvalLog) -> tuple[EvalScore, str, float] | None:
    """The score, name and value of the task's headline metric."""
    try:
        from inspect_ai.log import headline_metric
    except ImportError:  # an Inspect older than headline metrics: their convention, by hand
        scores = log.results.scores if log.results is not None else []
        if not scores or not scores[0].metrics:
            return None
        name, metric = next(iter(scores[0].metrics.items()))
        return scores[0], name, float(metric.value)
    resolved = headline_metric(log)
    if resolved is None:
        return None
    return resolved.score, resolved.name, float(resolved.metric.value)


def _items(log: EvalLog, score: EvalScore) -> dict[str, float]:
    """Each sample's score on the headline's scorer, as a number (Inspect's "C" is 1.0).

    Left out (an empty dict) unless every one lies in [0, 1]: a score on a 1-10
    scale is no item of an accuracy.
    """
    from inspect_ai.scorer import value_to_float

    to_float = value_to_float()
    scorer = getattr(score, "scorer", None) or score.name  # older Inspects: the name only
    items: dict[str, float] = {}
    for sample in log.samples or []:
        got = (sample.scores or {}).get(scorer)
        if got is None:
            continue
        value = got.value
        if isinstance(value, Mapping):  # a scorer of several values: this score's own
            own = value.get(score.name)
            if own is None:
                continue
            value = own
        items[str(sample.id)] = to_float(value)
    if not all(0 <= item <= 1 for item in items.values()):
        return {}
    return items
