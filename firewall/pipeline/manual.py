"""`firewall quarantine add|release`: the registry edited by hand, and the issue that follows."""

from __future__ import annotations

import datetime as dt
from difflib import get_close_matches

from firewall.config import parse_owner
from firewall.discovery import unknown_eval_message
from firewall.errors import UsageError
from firewall.lifecycle import Entry
from firewall.pipeline import effects
from firewall.pipeline.context import Context


def add(ctx: Context, eval_id: str, *, reason: str, owner: str | None, issues: bool) -> Entry:
    """Quarantine a defined eval by hand; its issue is opened (or commented on)."""
    spec = next((s for s in ctx.specs if s.id == eval_id), None)
    if spec is None:
        raise UsageError(unknown_eval_message(eval_id, [s.id for s in ctx.specs]))
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
            owner=owner or spec.owner,
        )
    effects.publish_add(ctx, eval_id, issues=issues)
    return entry


def release(ctx: Context, eval_id: str, *, reason: str | None, issues: bool) -> Entry:
    """Release an eval by hand; its issue is commented on and closed."""
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
