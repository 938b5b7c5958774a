"""The sink: every byte the firewall prints goes through here.

Results go to stdout: the table for people, or a document for scripts (JSON,
JUnit XML, HTML) and nothing else. Everything said to the runner or to people
on the side goes to stderr: the firewall's own annotations, warnings, notes,
errors and progress. A GitHub runner reads workflow commands on both streams,
so annotations work from stderr, and ``--format json`` stays one JSON
document on stdout inside a job as outside.

The one rule: no line the firewall prints is a workflow command unless the
firewall's own emitter (``annotate``) wrote it. Whatever else is printed may
quote an eval, a config, the registry or an argument, so ``inert`` defuses the
two forms the runner reads (actions/runner ``ActionCommand.cs``): ``::`` at the
start of a line after leading white space, and ``##[`` anywhere in a line. It
runs on every line, in and out of GitHub (a step may run the firewall in a
container that does not see ``GITHUB_ACTIONS``), and changes nothing a person
sees. Documents are made inert first in their own syntax, losslessly
(``inert_json``, ``inert_markup``), so that ``inert`` finds nothing left to do
in them and a parser reads back exactly what was meant.
What the text says is the renderers' business (``firewall.report``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence

import click

WORD_JOINER = "\u2060"
"""What ``inert`` inserts: invisible, not white space to .NET's ``TrimStart``, no line break."""

# What may stand before '::' at the start of a line: every character .NET's
# char.IsWhiteSpace accepts (TrimStart drops them) and Python's str.isspace too
# (U+001C..U+001F), so that the pattern errs on the side of defusing. CR and LF
# are not here: they end the line.
_BLANKS = "\t\v\f\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# A line starts at the start of the text or after CR or LF, as the runner cuts lines.
_LINE_COMMAND = re.compile(f"(?<![^\\r\\n])([{_BLANKS}]*)::")
_JSON_LEGACY = re.compile(r"#(?=#\[)")


def in_actions(env: Mapping[str, str] | None = None) -> bool:
    """True inside a GitHub Actions job, whose runner parses every line a step prints."""
    return (os.environ if env is None else env).get("GITHUB_ACTIONS") == "true"


def inert(text: str) -> str:
    """``text`` with no line a GitHub runner would take for a workflow command.

    A word joiner goes between the two ``#`` of every ``##[`` and before a ``::``
    that starts a line. A runner that compares by culture may skip the joiner,
    but then the command name it reads starts with ``[`` or ``:``, and no
    command has such a name. Applying it twice changes nothing more.
    """
    defused = text.replace("##[", f"#{WORD_JOINER}#[")
    return _LINE_COMMAND.sub(f"\\1{WORD_JOINER}::", defused)


def inert_json(document: str) -> str:
    """A JSON document that ``json.loads`` reads back unchanged and no runner reads a command in.

    No line of JSON can start with ``::`` (a line break in a string is ``\\n``,
    and a ``:`` outside one is followed by a value), but ``##[`` inside a string
    is still a command to the runner: its first ``#`` becomes ``\\u0023``,
    which is legal only inside a string, where every ``#`` of valid JSON is.
    """
    return _JSON_LEGACY.sub(r"\\u0023", document)


def inert_markup(document: str) -> str:
    """An XML or HTML document, read back unchanged by a parser, with no command for a runner.

    Character references stand in for the ``#`` of ``##[`` and the ``:`` of a
    ``::`` at a line's start. They are read as the character in text and in
    attribute values, which is where eval text goes; a renderer that put it in a
    comment, CDATA, a script or a style sheet would need another escape.
    """
    defused = document.replace("##[", "&#35;#[")
    return _LINE_COMMAND.sub(r"\1&#58;:", defused)


def echo(text: str = "") -> None:
    """Text for people on stdout: tables, closing lines, renderings."""
    click.echo(inert(text))


def echo_json(document: str) -> None:
    """A JSON document on stdout, the only thing on it: what a script reads."""
    echo(inert_json(document))


def annotate(lines: Sequence[str]) -> None:
    """The firewall's own workflow commands (from firewall.github.actions.annotations), on stderr.

    The only text printed as it is: each line is one command whose data and
    properties are already escaped, so nothing in it starts another line.
    """
    for line in lines:
        if not line.startswith("::") or "\r" in line or "\n" in line:
            raise ValueError(f"not one workflow command line: {line!r}")
        click.echo(line, err=True)


def note(text: str) -> None:
    """A side remark for people (e.g. what a dry run would do): stderr, so stdout stays data."""
    click.echo(inert(text), err=True)


def warn(text: str) -> None:
    note(f"firewall: warning: {text}")


def error(text: str) -> None:
    note(f"firewall: error: {text}")


def stderr_columns() -> int:
    """How many columns the terminal on stderr has: ``COLUMNS`` when set (as for
    ``shutil.get_terminal_size``), else the terminal's own size, else 80.

    Asked of stderr, not stdout: the progress line is drawn there, and stdout may
    be a file (``--format json > out.json``) while stderr is the terminal.
    """
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):  # no file number, or not a terminal
        return shutil.get_terminal_size((80, 24)).columns


class TrialCounter:
    """A one-line trial counter on stderr, shown only when stderr is a terminal.

    The pipeline calls ``start`` with the number of trials it planned (a shard's
    own, not the suite's), ``step`` once per finished trial, and ``finish`` before
    anything else is printed.

    Each step rewrites the line in place with ``\\r``, which returns only to the
    start of the terminal's last row: a line as wide as the terminal or wider
    wraps, and every update would leave a row of debris above. So the line is cut
    to one column less than the terminal's width, measured at every step (the
    window may be resized), and padded to it to cover the longer line before.
    """

    def __init__(
        self, *, enabled: bool | None = None, columns: Callable[[], int] = stderr_columns
    ) -> None:
        self.total = 0
        self.done = 0
        self.errors = 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.columns = columns

    def start(self, total: int) -> None:
        self.total, self.done, self.errors = total, 0, 0

    def replan(self, total: int) -> None:
        """Adaptive K changed how many trials the probe will take (fewer or more)."""
        self.total = total

    def step(self, eval_id: str, errored: bool) -> None:
        self.done += 1
        self.errors += errored
        if self.enabled:
            digits = len(str(self.total))
            line = f"[{self.done:>{digits}}/{self.total}] {self.errors} errored  last: {eval_id}"
            width = self.width()
            click.echo("\r" + inert(line[:width].ljust(width)), err=True, nl=False)

    def width(self) -> int:
        """The line's width: one column short of the terminal's, so it never wraps."""
        return max(self.columns() - 1, 1)

    def finish(self) -> None:
        """Clear the line (once), so that what follows starts on a clean one."""
        if self.enabled and self.done:
            click.echo("\r" + " " * self.width() + "\r", err=True, nl=False)
        self.done = 0


@contextlib.contextmanager
def progress(*, enabled: bool | None = None) -> Iterator[TrialCounter]:
    """A trial counter for the pipeline, cleared from the terminal when the block ends."""
    counter = TrialCounter(enabled=enabled)
    try:
        yield counter
    finally:
        counter.finish()
