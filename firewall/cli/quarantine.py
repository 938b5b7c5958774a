"""`firewall quarantine add|release|list`: edit the registry by hand."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option
from firewall.pipeline import context, manual
from firewall.text import columns


@click.group()
def quarantine() -> None:
    """Add, release and list quarantine entries by hand."""


@quarantine.command()
@click.argument("eval_id")
@click.option("--reason", required=True, help="Why, for the reviewer and the triage view.")
@click.option("--owner", help="GitHub login or team responsible for the fix.")
@click.option("--no-issues", is_flag=True, help="Open no GitHub issue for it.")
@config_option
def add(
    eval_id: str, reason: str, owner: str | None, no_issues: bool, config_path: Path | None
) -> None:
    """Quarantine EVAL_ID: runs skip it until it is released.

    EVAL_ID is an eval the config defines, a case of a suite it defines
    (SUITE/case), or a pytest test by its node id (tests/test_pay.py::test_refund),
    which `pytest --firewall` then honours.
    """
    ctx = context.load(config_path)
    entry = manual.add(ctx, eval_id, reason=reason, owner=owner, issues=not no_issues)
    review = f" (review by {entry.review_by:%Y-%m-%d})" if entry.review_by else ""
    output.echo(f"quarantined {_named(eval_id)} in {ctx.settings.registry}{review}")


@quarantine.command()
@click.argument("eval_id")
@click.option("--reason", help="Why it is released, for the record and the issue.")
@click.option("--no-issues", is_flag=True, help="Leave its GitHub issue alone.")
@config_option
def release(eval_id: str, reason: str | None, no_issues: bool, config_path: Path | None) -> None:
    """Release EVAL_ID from quarantine: the next run gates it again; its issue is closed."""
    ctx = context.load(config_path, with_evals=False)
    manual.release(ctx, eval_id, reason=reason, issues=not no_issues)
    output.echo(f"released {_named(eval_id)}" + (f": {reason}" if reason else ""))


@quarantine.command(name="list")
@config_option
def list_entries(config_path: Path | None) -> None:
    """List the quarantine entries (the full triage view is `firewall status`)."""
    ctx = context.load(config_path, with_evals=False)
    entries = ctx.entries()
    if not entries:
        output.echo(f"no eval is quarantined ({ctx.settings.registry})")
        return
    at = ctx.clock()
    release_after = ctx.settings.nightly.release_after
    rows = [("EVAL", "SOURCE", "SINCE", "STREAK", "OWNER", "REVIEW", "REASON")]
    for eval_id, entry in sorted(entries.items()):
        rows.append(
            (
                eval_id,
                entry.source,
                f"{entry.since:%Y-%m-%d}",
                f"{entry.stable_streak}/{release_after}",
                f"@{entry.owner}" if entry.owner else "-",
                "OVERDUE"
                if entry.overdue(at)
                else f"{entry.review_by:%Y-%m-%d}"
                if entry.review_by
                else "-",
                entry.reason,
            )
        )
    for line in columns(rows, ragged_last=True):
        output.echo(line)


def _named(typed: str) -> str:
    """What was typed, and the registry's key for it when that differs (a node id)."""
    key = manual.registry_id(typed)
    return typed if key == typed else f"{typed} as {key}"
