"""How a GitHub Actions runner reads a step's output, ported for the tests.

A faithful port of actions/runner (``src/Runner.Common/ActionCommand.cs``,
``src/Runner.Worker/ActionCommandManager.cs``, ``src/Runner.Worker/Handlers/
OutputManager.cs``, ``src/Runner.Sdk/ProcessInvoker.cs``), so that a test can
ask the question that matters: which workflow commands would a job act on?

- Output is cut into lines as ``StreamReader.ReadLine`` cuts it: at CR, LF or
  CRLF, nothing else. stdout and stderr are read alike, into one command
  manager with one stop state.
- A line is tried first as ``::name k=v,...::data`` (``TryParseV2``): after
  .NET's ``TrimStart``, which drops leading white space, it must start with
  ``::``. Then as the legacy ``##[name k=v;...]data`` (``TryParse``), found
  with ``IndexOf`` anywhere in the line.
- Only registered command names count (case-insensitively); an unknown name is
  no command. Properties and data are unescaped as the runner does, one
  mapping after another.
- ``stop-commands`` stops all processing until a line whose command name is
  the token (``::TOKEN::`` at a line's start, or ``##[TOKEN]`` anywhere); a
  token that is a registered command, empty or ``pause-logging`` is refused.

The runner compares ``StartsWith`` and ``IndexOf`` by culture, which on Linux
may skip ignorable characters (a word joiner, a soft hyphen, NUL) inside a
match. That never makes a command this ordinal port misses: a match widened by
an ignorable character leaves the command name starting with ``:``, ``#``,
``[`` or the ignorable itself, and the name is looked up ordinally among
registered names made of letters and dashes.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

EXTENSIONS = frozenset(
    {
        "add-mask",
        "add-matcher",
        "add-path",
        "debug",
        "echo",
        "endgroup",
        "error",
        "group",
        "notice",
        "remove-matcher",
        "save-state",
        "set-env",
        "set-output",
        "warning",
    }
)
"""The command extensions a runner registers (``internal-set-repo-path`` only for its plugins)."""

STOP = "stop-commands"

# ActionCommand._escapeMappings (legacy), _escapePropertyMappings, _escapeDataMappings:
# unescaping replaces each replacement by its token, in this order.
LEGACY_ESCAPES = (("%3B", ";"), ("%0D", "\r"), ("%0A", "\n"), ("%5D", "]"), ("%25", "%"))
PROPERTY_ESCAPES = (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%"))
DATA_ESCAPES = (("%0D", "\r"), ("%0A", "\n"), ("%25", "%"))

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class StopTokenRefused(Exception):
    """``ValidateStopToken`` throws: the step fails with UnsupportedStopCommandTokenDisabled."""


@dataclass(frozen=True)
class Command:
    """A workflow command the runner acted on, and the line it read it from."""

    name: str
    properties: dict[str, str]
    data: str
    line: str


def lines(output: str) -> list[str]:
    """``output`` as ``StreamReader.ReadLine`` returns it: no empty line after a final break."""
    parts = _LINE_BREAK.split(output)
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def is_dotnet_white_space(char: str) -> bool:
    """``char.IsWhiteSpace``: U+0009..U+000D, U+0085, and the Zs, Zl and Zp categories."""
    return char in "\t\n\v\f\r\x85" or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def trim_start(text: str) -> str:
    """.NET's ``string.TrimStart()``."""
    index = 0
    while index < len(text) and is_dotnet_white_space(text[index]):
        index += 1
    return text[index:]


def fold(name: str) -> str:
    """A name as ``StringComparer.OrdinalIgnoreCase`` sees it: each character upper-cased."""
    return "".join(c.upper() if len(c.upper()) == 1 else c for c in name)


def unescape(text: str, mappings: Iterable[tuple[str, str]]) -> str:
    for replacement, token in mappings:
        text = text.replace(replacement, token)
    return text


def split_pair(text: str) -> list[str]:
    """``Split('=', count: 2, RemoveEmptyEntries)``: empty pieces before the key are dropped
    and not counted; the value is the rest of the text, ``=`` and all, unless empty."""
    key, sep, value = text.lstrip("=").partition("=")
    return [piece for piece in (key, value) if piece] if sep else [key] if key else []


def parse_v2(message: str, registered: set[str]) -> Command | None:
    """``ActionCommand.TryParseV2``: ``::name props::data`` at the start of the line."""
    if not message:
        return None
    trimmed = trim_start(message)
    if not trimmed.startswith("::"):
        return None
    end = trimmed.find("::", 2)
    if end < 0:
        return None
    info = trimmed[2:end]
    space = info.find(" ")
    name = info if space < 0 else info[:space]
    if fold(name) not in registered:
        return None
    properties: dict[str, str] = {}
    if space > 0:
        for item in (p for p in info[space + 1 :].strip().split(",") if p):
            pair = split_pair(item)
            if len(pair) == 2:
                properties[pair[0].lower()] = unescape(pair[1], PROPERTY_ESCAPES)
    data = unescape(trimmed[end + 2 :], DATA_ESCAPES)
    return Command(name, properties, data, message)


def parse_legacy(message: str, registered: set[str]) -> Command | None:
    """``ActionCommand.TryParse``: ``##[name props]data`` anywhere in the line."""
    if not message:
        return None
    prefix = message.find("##[")
    if prefix < 0:
        return None
    bracket = message.find("]", prefix)
    if bracket < 0:
        return None
    info = message[prefix + 3 : bracket]
    space = info.find(" ")
    name = info if space < 0 else info[:space]
    if fold(name) not in registered:
        return None
    properties: dict[str, str] = {}
    if space > 0:
        for item in (p for p in info[space + 1 :].split(";") if p):
            pair = split_pair(item)
            if len(pair) == 2:
                properties[pair[0].lower()] = unescape(pair[1], LEGACY_ESCAPES)
    return Command(name, properties, unescape(message[bracket + 1 :], LEGACY_ESCAPES), message)


@dataclass
class Runner:
    """One step's ``ActionCommandManager``: feed it lines in the order the runner reads them."""

    registered: set[str] = field(default_factory=lambda: {fold(n) for n in EXTENSIONS | {STOP}})
    stop_token: str | None = None
    acted: list[Command] = field(default_factory=list)
    """Every command processed, ``stop-commands`` and its resume line included."""

    def read(self, output: str) -> list[Command]:
        """The commands acted on in ``output`` (one stream, or both as they interleaved)."""
        before = len(self.acted)
        for line in lines(output):
            self.process(line)
        return self.acted[before:]

    def process(self, line: str) -> Command | None:
        """``TryProcessCommand`` on one line; the command acted on, if any."""
        if not line or ("##[" not in line and "::" not in line):  # OutputManager's own check
            return None
        command = parse_v2(line, self.registered) or parse_legacy(line, self.registered)
        if command is None:
            return None
        if self.stop_token is not None:
            if fold(command.name) != fold(self.stop_token):
                return None  # stopped: the line is only logged
            self.registered.discard(fold(self.stop_token))
            self.stop_token = None
        elif fold(command.name) == fold(STOP):
            token = command.data
            if not token or fold(token) in self.registered or fold(token) == fold("pause-logging"):
                raise StopTokenRefused(token)
            self.stop_token = token
            self.registered.add(fold(token))
        self.acted.append(command)
        return command


def commands(output: str) -> list[Command]:
    """The commands a fresh runner acts on in ``output``."""
    return Runner().read(output)
