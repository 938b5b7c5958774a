"""The sink: every byte the firewall prints goes through here.

Results go to stdout, progress and remarks to stderr. Nothing else in the
package prints, so tests capture one place, and text that quotes evals is
shown so that a GitHub runner cannot take any line of it for a workflow
command. What the text says is the renderers' business (``firewall.report``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence

import click


def in_actions(env: Mapping[str, str] | None = None) -> bool:
    """True inside a GitHub Actions job, whose runner parses every line a step prints."""
    return (os.environ if env is None else env).get("GITHUB_ACTIONS") == "true"


def echo(text: str = "") -> None:
    click.echo(text)


def echo_untrusted(text: str) -> None:
    """Text that carries what evals printed: in a GitHub job, inside a stop-commands block.

    Reasons quote stderr tails and error messages; no line of them may ever be
    taken by the runner as a workflow command.
    """
    click.echo(stop_commands(text) if in_actions() else text)


def annotate(lines: Sequence[str]) -> None:
    """GitHub workflow commands, already escaped by firewall.github.annotations."""
    for line in lines:
        click.echo(line)


def note(text: str) -> None:
    """A side remark for people (e.g. what a dry run would do): stderr, so stdout stays data."""
    click.echo(text, err=True)


def warn(text: str) -> None:
    click.echo(f"firewall: warning: {text}", err=True)


def error(text: str) -> None:
    click.echo(f"firewall: error: {text}", err=True)


def stop_commands(text: str, *, tokens: Callable[[], str] = lambda: secrets.token_hex(16)) -> str:
    """``text`` between ``::stop-commands::TOKEN`` and ``::TOKEN::``, for echoing eval output.

    While commands are stopped the runner takes no line as a command, so the
    output can be shown verbatim; the token is random and absent from the text,
    so the text cannot resume processing itself. ``tokens`` draws one (tests pass their own).
    """
    token = tokens()
    while token in text:  # 128 random bits: never in practice, but then certainly not
        token = tokens()
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"::stop-commands::{token}\n{body}::{token}::"


class Progress:
    """A one-line trial counter on stderr, shown only when stderr is a terminal.

    The pipeline calls ``start`` with the number of trials it planned (a shard's
    own, not the suite's), ``step`` once per finished trial, and ``finish`` before
    anything else is printed.
    """

    WIDTH = 100

    def __init__(self, *, enabled: bool | None = None) -> None:
        self.total = 0
        self.done = 0
        self.errors = 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled

    def start(self, total: int) -> None:
        self.total, self.done, self.errors = total, 0, 0

    def replan(self, total: int) -> None:
        """Adaptive K changed how many trials the probe will take (fewer or more)."""
        self.total = total

    def step(self, eval_id: str, errored: bool) -> None:
        self.done += 1
        self.errors += errored
        if self.enabled:
            width = len(str(self.total))
            line = f"\r[{self.done:>{width}}/{self.total}] {self.errors} errored  last: {eval_id}"
            click.echo(line[: self.WIDTH].ljust(self.WIDTH), err=True, nl=False)

    def finish(self) -> None:
        """Clear the line (once), so that what follows starts on a clean one."""
        if self.enabled and self.done:
            click.echo("\r" + " " * self.WIDTH + "\r", err=True, nl=False)
        self.done = 0


@contextlib.contextmanager
def progress(*, enabled: bool | None = None) -> Iterator[Progress]:
    """A trial counter for the pipeline, cleared from the terminal when the block ends."""
    counter = Progress(enabled=enabled)
    try:
        yield counter
    finally:
        counter.finish()
