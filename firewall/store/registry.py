"""The quarantine registry, ``quarantine.json``: which evals are out of the gate, and why.

It lives in the user's repository and is reviewed in pull requests, so it is
written with sorted keys, 2-space indent and a trailing newline. Every change
is a read-modify-write under a file lock with an atomic replace, and a file
that does not parse or has an unknown version is reported and never touched.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from firewall.errors import RegistryError
from firewall.lifecycle import Entry
from firewall.store.atomic import locked, write_atomic

SCHEMA_VERSION = 1


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
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise RegistryError(f"{self.path}: cannot read the quarantine registry: {exc}") from exc
        return parse_registry(text, source=str(self.path))

    @contextlib.contextmanager
    def edit(self) -> Iterator[dict[str, Entry]]:
        """Yield the entries to change in place; they are written back when the block ends."""
        with locked(self.path, "quarantine registry"):
            entries = self.read()
            before = render(entries)
            yield entries
            after = render(entries)
            if after != before:
                write_atomic(self.path, after)


def parse_registry(text: str, *, source: str) -> dict[str, Entry]:
    """The entries of a registry document; ``source`` names it in every error."""
    try:
        data = json.loads(text)
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
    try:
        return dict(RegistryFile.model_validate(data).evals)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise RegistryError(
            f"{source}: the quarantine registry is malformed: {problems}; it was left untouched"
        ) from None


def render(entries: dict[str, Entry]) -> str:
    document = RegistryFile(schema_version=SCHEMA_VERSION, evals=entries)
    return json.dumps(document.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
