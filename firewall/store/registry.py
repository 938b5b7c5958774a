"""The quarantine registry, ``quarantine.json``: which evals are out of the gate, and why.

It lives in the user's repository and is reviewed in pull requests, so it is
written with sorted keys, 2-space indent and a trailing newline. Every change
is a read-modify-write under a file lock with an atomic replace. A file that
is not UTF-8, does not parse, has an unknown version or holds a value a strict
JSON reader would not (NaN, a number where a time belongs, an owner that is no
GitHub login) is reported, naming the eval and the key, and never touched; so
is a file made read-only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from firewall.config import ID_PATTERN, parse_owner
from firewall.errors import RegistryError
from firewall.files import Refused, os_reason, read_capped, size_text
from firewall.lifecycle import Entry
from firewall.store.atomic import locked, write_atomic
from firewall.store.jsonfile import NON_FINITE, NotUtf8, decode_utf8, loads, non_finite
from firewall.text import one_line

SCHEMA_VERSION = 1
MAX_BYTES = 64 << 20  # some 200,000 entries: a registry larger than this is not one
_EVAL_ID = re.compile(ID_PATTERN.removeprefix("^").removesuffix("$"))


class RegistryFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int
    evals: dict[str, Entry] = {}


class Registry:
    """Read and edit one quarantine registry file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, Entry]:
        """The entries by eval id; empty when the file does not exist yet."""
        try:
            raw = read_capped(self.path, MAX_BYTES)
        except FileNotFoundError:
            return {}
        except Refused as exc:
            raise RegistryError(
                f"{self.path}: the quarantine registry {exc} (a JSON file of at most "
                f"{size_text(MAX_BYTES)}); restore it (e.g. `git checkout -- {self.path}`)"
            ) from None
        except OSError as exc:
            raise RegistryError(
                f"{self.path}: cannot read the quarantine registry ({os_reason(exc)}); "
                "it must be a readable JSON file"
            ) from None
        return parse_registry(raw, source=str(self.path))

    @contextlib.contextmanager
    def edit(self) -> Iterator[dict[str, Entry]]:
        """Yield the entries to change in place; they are written back when the block ends.

        A write that fails (a full disk, a read-only directory) is a ``WriteError``
        naming the file, which is left as it was; a lock that cannot be had, a
        ``LockError``.
        """
        with locked(self.path, "quarantine registry"):
            entries = self.read()
            before = render(entries)
            yield entries
            after = render(entries)
            if after != before:
                _refuse_read_only(self.path)
                write_atomic(self.path, after, what="quarantine registry")


def _refuse_read_only(path: Path) -> None:
    # os.replace would swap a read-only file for a new one without a word: the mode
    # says "leave it alone", so it is honoured (root's os.access says yes to anything).
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return
    if not mode & 0o222:
        raise RegistryError(
            f"{path}: the quarantine registry is read-only (mode {mode:04o}); make it "
            f"writable (`chmod u+w {path}`) to change it; it was left untouched"
        )
    if not os.access(path, os.W_OK):  # another user's, or immutable: chmod does not help
        raise RegistryError(
            f"{path}: the quarantine registry is not writable by this user (mode {mode:04o}; "
            "another user's file, or immutable: `lsattr` shows an `i`, `chattr -i` clears it); "
            "make it writable to change it; it was left untouched"
        )


def parse_registry(content: str | bytes, *, source: str) -> dict[str, Entry]:
    """The entries of a registry document; ``source`` names it in every error."""
    try:
        text = content if isinstance(content, str) else decode_utf8(content)
        data = loads(text)
    except NotUtf8 as exc:
        raise RegistryError(
            f"{source}: the quarantine registry {exc}; it was left untouched"
        ) from None
    except ValueError as exc:
        raise RegistryError(
            f"{source}: the quarantine registry is not valid JSON ({exc}); "
            f"fix or restore it (e.g. `git checkout -- {source}`); it was left untouched"
        ) from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise RegistryError(
            f"{source}: unknown schema_version {version!r} (this firewall reads version "
            f"{SCHEMA_VERSION}); upgrade flakiness-firewall or restore the file; "
            "it was left untouched"
        )
    entries, problems = _validated(data, text)
    if problems:
        raise RegistryError(
            f"{source}: the quarantine registry is malformed: {'; '.join(problems)}; "
            "it was left untouched"
        )
    return entries


def _validated(data: dict[str, Any], text: str) -> tuple[dict[str, Entry], list[str]]:
    """The entries, and every problem found with them, each naming its eval and key."""
    evals = data.get("evals")
    fields = evals if isinstance(evals, dict) else {}
    problems = [
        f"eval id {eval_id!r}: ids may use only letters, digits and . _ / -"
        for eval_id in fields
        if not _EVAL_ID.fullmatch(eval_id)
    ]
    problems += [
        f"eval {eval_id!r}: owner: {problem} (got {json.dumps(values['owner'])})"
        for eval_id, values in fields.items()
        if isinstance(values, dict) and (problem := _owner_problem(values.get("owner")))
    ]
    refused = non_finite(data)
    problems += [f"{_where(loc)}: {NON_FINITE}" for loc in refused]
    try:
        # Strict: "since": 5 is no time, "k": 7.5 no trial count, "issue": "42" no number.
        # JSON has no time type, so strings stand for times only when validating the text.
        entries = dict(RegistryFile.model_validate_json(text, strict=True).evals)
    except ValidationError as exc:
        problems += [
            f"{_where(e['loc'])}: {_message(e)}" for e in exc.errors() if e["loc"] not in refused
        ]
        return {}, problems
    if problems:
        return {}, problems
    return {
        eval_id: entry.model_copy(update={"owner": parse_owner(entry.owner)})  # no "@"
        if entry.owner
        else entry
        for eval_id, entry in entries.items()
    }, []


def _owner_problem(owner: object) -> str | None:
    if not isinstance(owner, str):
        return None  # no owner, or not a string: the model's validation says so
    try:
        parse_owner(owner)
    except ValueError as exc:
        return str(exc)
    return None


def _where(loc: Sequence[str | int]) -> str:
    # Keys are the file's text: one_line keeps a key with a line break on the message's line.
    if len(loc) >= 2 and loc[0] == "evals":
        keys = one_line(".".join(str(part) for part in loc[2:]))
        return f"eval {loc[1]!r}" + (f": {keys}" if keys else "")
    return one_line(".".join(str(part) for part in loc)) or "top level"


def _message(error: ErrorDetails) -> str:
    message = error["msg"].removeprefix("Value error, ")
    got = error.get("input")
    # json_invalid's input is the whole document: the message says where the problem is.
    if isinstance(got, (dict, list)) or error["type"] in ("missing", "json_invalid"):
        return message
    return f"{message} (got {json.dumps(got)})"


def render(entries: dict[str, Entry]) -> str:
    document = RegistryFile(schema_version=SCHEMA_VERSION, evals=entries)
    # allow_nan=False: NaN and Infinity are Python's, not JSON's; jq and JavaScript refuse them.
    text = json.dumps(document.model_dump(mode="json"), indent=2, sort_keys=True, allow_nan=False)
    return text + "\n"
