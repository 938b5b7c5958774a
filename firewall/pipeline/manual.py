"""`firewall quarantine add|release`: the registry edited by hand, and the issue that follows;
`firewall history compact`: the history file kept from growing without bound."""

from __future__ import annotations

import datetime as dt
from difflib import get_close_matches

from firewall.config import parse_owner
from firewall.discovery import unknown_eval_message
from firewall.errors import UsageError
from firewall.lifecycle import Entry
from firewall.pipeline import effects
from firewall.pipeline.context import Context
from firewall.store.history import LocalHistory
from firewall.testids import from_nodeid
from firewall.timeutil import to_text


def add(ctx: Context, eval_id: str, *, reason: str, owner: str | None, issues: bool) -> Entry:
    """Quarantine an eval by hand; its issue is opened (or commented on).

    The eval is one the config defines, a case of a suite it defines (``SUITE/case``),
    or a pytest test named by its node id (``tests/test_pay.py::test_refund``), which
    the pytest plugin then honours: the registry keeps it under its eval id.
    """
    typed, eval_id = eval_id, registry_id(eval_id)
    spec = next((s for s in ctx.specs if s.id == eval_id), None)
    if spec is None and "::" not in typed and not _suite_case(ctx, eval_id):
        raise UsageError(
            unknown_eval_message(eval_id, [s.id for s in ctx.specs])
            + "; a pytest test is named by its node id, e.g. tests/test_pay.py::test_refund"
        )
    if owner:  # "" is no owner given, as from `--owner "$OWNER"` with OWNER unset
        try:
            owner = parse_owner(owner)
        except ValueError as exc:
            raise UsageError(f"--owner: {exc} (got {owner!r})") from None
    at = ctx.clock()
    with ctx.edit_registry() as entries:
        if eval_id in entries:
            raise UsageError(
                f"{eval_id} is already quarantined since "
                f"{entries[eval_id].since:%Y-%m-%d}: {entries[eval_id].reason}"
            )
        entry = entries[eval_id] = Entry(
            since=at,
            source="manual",
            reason=reason,
            git_sha=ctx.git.sha,
            review_by=at + dt.timedelta(days=ctx.settings.nightly.review_days),
            owner=owner or (spec.owner if spec is not None else None),
        )
    effects.publish_add(ctx, eval_id, issues=issues)
    return entry


def release(ctx: Context, eval_id: str, *, reason: str | None, issues: bool) -> Entry:
    """Release an eval by hand (a pytest test by its node id too); its issue is commented
    on and closed."""
    eval_id = registry_id(eval_id)
    with ctx.edit_registry() as entries:
        if eval_id not in entries:
            if not entries:
                raise UsageError(f"{eval_id} is not quarantined: {ctx.registry.path.name} is empty")
            close = get_close_matches(eval_id, list(entries), n=1)
            hint = (
                f"did you mean {close[0]!r}?" if close else "`firewall quarantine list` shows them"
            )
            raise UsageError(f"no quarantined eval with id {eval_id!r}; {hint}")
        released = entries.pop(eval_id)
    effects.publish_release(ctx, eval_id, released, reason, issues=issues)
    return released


def registry_id(name: str) -> str:
    """The registry's key for what a person typed: a pytest node id becomes its eval id."""
    if "::" not in name:
        return name
    try:
        return from_nodeid(name)
    except ValueError as exc:
        raise UsageError(f"{name!r} is not a pytest node id: {exc}") from None


def _suite_case(ctx: Context, eval_id: str) -> bool:
    """Whether an id the config does not define is a case of a suite it does
    (``SUITE/case``; a suite's id may hold ``/`` too)."""
    suites = {spec.id for spec in ctx.specs if spec.result == "junit"}
    suite, _, case = eval_id.rpartition("/")
    while suite:
        if suite in suites and case:
            return True
        suite, _, _ = suite.rpartition("/")
    return False


def compact_history(ctx: Context, *, keep_days: int) -> tuple[int, int]:
    """Drop the local history's rows older than ``keep_days``, atomically and under the
    lock; how many rows were kept and how many dropped."""
    store = LocalHistory(ctx.cwd / ctx.settings.history)
    return store.compact(keep_after=to_text(ctx.clock() - dt.timedelta(days=keep_days)))
