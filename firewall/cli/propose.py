"""`firewall propose`: the nightly's registry changes as one rolling pull request."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.cli.common import config_option, dry_run_option_saying
from firewall.errors import ProposalRefused
from firewall.pipeline import context
from firewall.pipeline.propose import propose, pull_requests_for


@click.command(name="propose")
@config_option
@click.option(
    "--base",
    metavar="BRANCH",
    help="The branch to propose into (default: the repository's default branch).",
)
@dry_run_option_saying("Say what would be pushed and proposed; push and open nothing.")
def propose_command(config_path: Path | None, base: str | None, dry_run: bool) -> None:
    """Propose the changes `firewall nightly` made to the registry as one pull request.

    \b
    Compares this checkout's quarantine.json with the default branch's and
    carries what a reviewer must see (evals to quarantine, to release, edited
    entries) to the branch firewall/quarantine, one commit on top of the
    default branch, then opens its pull request or updates the open one.
    Nothing is pushed when nothing changed since the last night; the branch
    is deleted when nothing is left to propose. Needs `contents: write` and
    `pull-requests: write`, and the repository setting "Allow GitHub Actions
    to create and approve pull requests" (or a GitHub App or personal token,
    which also makes the pull request's own checks run). Exits 2 when GitHub
    refuses to open the pull request or git cannot push, 0 otherwise.
    """
    ctx = context.load(config_path, with_evals=False)
    try:
        result = propose(
            ctx, base=base, pulls=pull_requests_for(ctx, dry_run=dry_run), dry_run=dry_run
        )
    except ProposalRefused as exc:
        if ctx.in_actions:
            from firewall.github.actions.annotations import annotation

            output.annotate([annotation("error", str(exc), title="Flakiness Firewall")])
        raise
    if not result.changes:
        output.echo(
            f"nothing to propose: {ctx.settings.registry} matches {result.base}"
            + (f"; deleted the branch {result.branch}" if result.deleted else "")
        )
        return
    for change in result.changes:
        output.echo(f"{change.kind:8} {change.eval_id}")
    if result.declined is not None:
        closed = result.declined
        on = f" on {closed.closed_at:%Y-%m-%d}" if closed.closed_at else ""
        output.echo(
            f"the proposal #{closed.number} was closed unmerged{on}; not proposed again until "
            "the registry change differs; reopen it to take it up again, or make the change "
            f"you want in {ctx.settings.registry} on {result.base} by hand: {closed.url}"
        )
    elif dry_run:
        output.echo(f"dry run: would push {result.branch} and propose it into {result.base}")
    elif not result.pushed:
        output.echo(f"unchanged since {result.branch} was last pushed: nothing to update")
    elif result.number is not None:
        output.echo(f"proposed in pull request #{result.number}: {result.url}")
    else:
        output.echo(
            f"pushed {result.branch}; no GITHUB_TOKEN and GITHUB_REPOSITORY to open its pull "
            f"request: open one from {result.branch} into {result.base}"
        )
