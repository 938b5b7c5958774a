"""Flakiness Firewall: probe non-deterministic evals, quarantine the unstable, gate the rest.

This module is the public API that eval code imports. It is imported inside
the trial worker processes too, so it stays light: no pydantic, nothing of the
orchestrator. ``firewall.stats`` (plain Python; its implementation, with
pydantic for the ``Stats`` model, is ``firewall._stats``) is loaded on first use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from firewall._version import __version__

if TYPE_CHECKING:
    from firewall import stats as stats

__all__ = ["EVAL_ATTRIBUTE", "TrialResult", "__version__", "eval", "stats"]

EVAL_ATTRIBUTE = "__firewall_eval__"
"""The attribute on a decorated function that holds its eval options."""

F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass
class TrialResult:
    """What one trial of an eval measured; the Python twin of the trial result JSON."""

    score: float | None = None
    passed: bool | None = None
    violations: list[str] = dataclasses.field(default_factory=list)
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    fields: dict[str, Any] = dataclasses.field(default_factory=dict)
    items: dict[str, float] = dataclasses.field(default_factory=dict)
    model_id: str | None = None
    prompt_version: str | None = None
    error: str | None = None
    output: Any = None  # what an eval with a judge yields for its judge to score

    def to_json(self) -> dict[str, Any]:
        """The trial result JSON object, leaving out what was not set."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None and value != [] and value != {}:
                out[field.name] = value
        return out


@overload
def eval(fn: F, /) -> F: ...


@overload
def eval(*, id: str | None = None, **options: Any) -> Callable[[F], F]: ...


def eval(  # shadows the builtin on purpose: `firewall.eval` is the name users write
    fn: F | None = None, /, *, id: str | None = None, **options: Any
) -> F | Callable[[F], F]:
    """Declare a Python eval, discovered under the configured ``paths``.

    Use as ``@firewall.eval`` or ``@firewall.eval(threshold=0.85, k=9)``. The
    options are the per-eval keys of the configuration; the id defaults to the
    function name with ``_`` turned into ``-``; ``judge`` may be the judge function
    itself or its ``"module:function"``. The function is returned
    unchanged, so it stays callable as plain code.
    """

    def mark(func: F) -> F:
        eval_id = id if id is not None else func.__name__.replace("_", "-")
        judge = options.get("judge")
        if callable(judge):  # `judge=score_answer`: named as the config names it
            options["judge"] = f"{judge.__module__}:{judge.__qualname__}"
        setattr(func, EVAL_ATTRIBUTE, {"id": eval_id, **options})
        return func

    if fn is not None:
        return mark(fn)
    return mark


def __getattr__(name: str) -> Any:
    if name == "stats":
        import importlib

        return importlib.import_module("firewall.stats")
    raise AttributeError(f"module 'firewall' has no attribute {name!r}")
