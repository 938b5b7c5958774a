"""Trials: run every (eval, seed) task with bounded concurrency, timeouts and no retries.

Each of ``concurrency`` slots is a thread that takes the next task, runs it
and hands back a ``TrialRecord``: a shell process for a command eval; for an
``async def`` Python eval, a request to the run's pool (``pool.py``), a few
worker processes that each hold many trials on one event loop; for any other
Python eval or an Inspect task, a request to the slot's own long-lived worker
process, one trial at a time. Threads suffice: the trials run in other
processes, so the slots only wait.

Synchronous evals keep a process per slot, not threads in a shared one, because
only a process can be killed: a hung call in a thread would hold its slot and
its worker for the rest of the run, and a sync eval may rely on having its
module to itself (``random.seed``, a client that is not thread-safe). An
interpreter per slot costs a boot and some memory; an eval that waits on a model
saves both by being ``async def``.

A run's processes end with it, and its scratch directory goes, on every exit
path, the firewall's own SIGKILL included: ``reaper.py`` says how, and what
each trial's end kills.

A trial does not inherit the firewall's own GitHub token (``secrets.TOKEN_NAMES``:
``GITHUB_TOKEN``, ``GH_TOKEN``, the action's input) unless the runner is told to
share it (``[github] share_token``): the firewall needs it to open issues, an eval
does not, and whatever an eval can read it can print.

Importing ``firewall.runner.trial`` or ``firewall.runner.seeds`` (the pytest plugin,
`firewall gate`) loads none of the machinery: the names below come from
``firewall.runner.runner`` when first asked for (PEP 562), so that what reads trial
records alone does not import the runner's processes, pool and workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from firewall.runner.runner import (
        Early,
        Interrupted,
        Runner,
        execute,
        generate,
        replay,
        to_record,
        trial_environment,
    )
    from firewall.runner.schedule import Schedule, Task

__all__ = [
    "Early",
    "Interrupted",
    "Runner",
    "Schedule",
    "Task",
    "execute",
    "generate",
    "replay",
    "to_record",
    "trial_environment",
]

_LAZY = {
    "Early": "firewall.runner.runner",
    "Interrupted": "firewall.runner.runner",
    "Runner": "firewall.runner.runner",
    "execute": "firewall.runner.runner",
    "generate": "firewall.runner.runner",
    "replay": "firewall.runner.runner",
    "to_record": "firewall.runner.runner",
    "trial_environment": "firewall.runner.runner",
    "Schedule": "firewall.runner.schedule",
    "Task": "firewall.runner.schedule",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # asked once
    return value
