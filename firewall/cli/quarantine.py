"""`firewall quarantine add|release|list`: edit the registry by hand."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click

from firewall import output
from firewall.cli.common import Project, config_option, load_project
from firewall.config import load_config
from firewall.discovery import unknown_eval_message
from firewall.errors import UsageError
from firewall.pipeline.effects import sync_after_add, sync_after_release
from firewall.pipeline.gitinfo import git_info
from firewall.store.registry import Entry, Registry
from firewall.timeutil import now


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
    """Quarantine EVAL_ID: runs skip it until it is released."""
    project = load_project(config_path)
    spec = next((s for s in project.specs if s.id == eval_id), None)
    if spec is None:
        raise UsageError(unknown_eval_message(eval_id, [s.id for s in project.specs]))
    settings = project.config.settings
    at = now()
    with Registry(project.cwd / settings.registry).edit() as entries:
        if eval_id in entries:
            raise UsageError(
                f"{eval_id} is already quarantined since "
                f"{entries[eval_id].since:%Y-%m-%d}: {entries[eval_id].reason}"
            )
        entries[eval_id] = Entry(
            since=at,
            source="manual",
            reason=reason,
            git_sha=git_info(project.cwd)["git_sha"],
            review_by=at + dt.timedelta(days=settings.nightly.review_days),
            owner=(owner or spec.owner or "").lstrip("@") or None,
        )
    output.echo(
        f"quarantined {eval_id} in {settings.registry} (review by "
        f"{at + dt.timedelta(days=settings.nightly.review_days):%Y-%m-%d})"
    )
    sync_after_add(project, eval_id, no_issues=no_issues)


@quarantine.command()
@click.argument("eval_id")
@click.option("--reason", help="Why it is released, for the record and the issue.")
@click.option("--no-issues", is_flag=True, help="Leave its GitHub issue alone.")
@config_option
def release(eval_id: str, reason: str | None, no_issues: bool, config_path: Path | None) -> None:
    """Release EVAL_ID from quarantine: the next run gates it again; its issue is closed."""
    project = Project(config=load_config(config_path, Path.cwd()), specs=[], cwd=Path.cwd())
    registry = Registry(project.cwd / project.config.settings.registry)
    with registry.edit() as entries:
        if eval_id not in entries:
            if not entries:
                raise UsageError(f"{eval_id} is not quarantined: {registry.path.name} is empty")
            raise UsageError(
                unknown_eval_message(eval_id, entries).replace(
                    "no eval with id", "no quarantined eval with id"
                )
            )
        released = entries.pop(eval_id)
    output.echo(f"released {eval_id}" + (f": {reason}" if reason else ""))
    sync_after_release(project, eval_id, released, reason, no_issues=no_issues)


@quarantine.command(name="list")
@config_option
def list_entries(config_path: Path | None) -> None:
    """List the quarantine entries (the full triage view is `firewall status`)."""
    config = load_config(config_path, Path.cwd())
    entries = Registry(Path.cwd() / config.settings.registry).read()
    if not entries:
        output.echo(f"no eval is quarantined ({config.settings.registry})")
        return
    at = now()
    for eval_id, entry in sorted(entries.items()):
        overdue = "  REVIEW OVERDUE" if entry.overdue(at) else ""
        owner = f"  @{entry.owner}" if entry.owner else ""
        output.echo_untrusted(
            f"{eval_id}  {entry.source}  since {entry.since:%Y-%m-%d}  "
            f"streak {entry.stable_streak}/{config.settings.nightly.release_after}"
            f"{owner}{overdue}  {entry.reason}"
        )
