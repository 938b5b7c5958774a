"""`firewall init`: scaffold the config, an example eval and the two workflows."""

from __future__ import annotations

from pathlib import Path

import click

from firewall import output
from firewall.configfile import repository_root
from firewall.scaffold import ACTION_REF, scaffold


@click.command()
@click.option(
    "--action",
    default=ACTION_REF,
    show_default=True,
    help="What the workflows put after `uses:` (a fork, a tag, a commit).",
)
def init(action: str) -> None:
    """Scaffold firewall.toml, evals/example_eval.py and two GitHub workflows at the
    repository's root (here, outside a git repository).

    Existing files are never overwritten: each one is reported and left as
    it is. Afterwards: `firewall list`, then `firewall run`.
    """
    here = Path.cwd()
    root = repository_root(here) or here
    if root != here.resolve():
        output.echo(f"writing to the repository root {root}: GitHub reads workflows only there")
    for planned in scaffold(root, action=action):
        verb = "created" if planned.created else "skipped"
        note = f" ({planned.note})" if planned.note else ""
        output.echo(f"{verb:8} {planned.path.relative_to(root)}{note}")
    output.echo(
        "next: `firewall list` to see the evals, `firewall run` to probe and gate them; "
        "add firewall-report.json to .gitignore and commit quarantine.json when it appears"
    )
