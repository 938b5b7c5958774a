"""The artefact file: written atomically, without secrets, read back with its schema version
checked."""

from __future__ import annotations

from pathlib import Path

from firewall.artefact import SCHEMA_VERSION, Artefact
from firewall.errors import ArtefactError
from firewall.files import Refused, read_capped
from firewall.secrets import Secrets
from firewall.store.atomic import write_atomic
from firewall.store.jsonfile import MAX_DOCUMENT_BYTES, loads, read_versioned


def write_report(path: Path, artefact: Artefact, *, secrets: Secrets | None = None) -> None:
    """Replace the report at ``path``; a ``WriteError`` naming it when that fails.

    ``secrets`` (``Secrets.from_env`` of the run's environment) are taken out of every
    string of the report, keys included: CI uploads it, and anyone who can read the run
    can download it.
    """
    if secrets:
        artefact = secrets.scrub_model(artefact)
    write_atomic(path, artefact.to_json(), what="report")


def load_report(path: Path) -> Artefact:
    try:
        return read_versioned(path, Artefact, what="report", version=SCHEMA_VERSION)
    except ArtefactError:
        if _is_probe_part(path):
            raise ArtefactError(
                f"{path}: this is a probe part (from `firewall probe --out`), not a report: "
                f"decide it with `firewall gate {path}`"
            ) from None
        raise


def _is_probe_part(path: Path) -> bool:
    try:
        data = loads(read_capped(path, MAX_DOCUMENT_BYTES))
    except (OSError, Refused, ValueError):
        return False
    return isinstance(data, dict) and data.get("kind") == "firewall-probe-part"
