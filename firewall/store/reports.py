"""The artefact file: written atomically, read back with its schema version checked."""

from __future__ import annotations

from pathlib import Path

from firewall.artefact import SCHEMA_VERSION, Artefact
from firewall.store.atomic import write_atomic
from firewall.store.jsonfile import read_versioned


def write_report(path: Path, artefact: Artefact) -> None:
    """Replace the report at ``path``; a ``WriteError`` naming it when that fails."""
    write_atomic(path, artefact.to_json(), what="report")


def load_report(path: Path) -> Artefact:
    return read_versioned(path, Artefact, what="report", version=SCHEMA_VERSION)
