"""Reading back the JSON files the firewall writes: versioned, validated, errors naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from firewall.errors import ArtefactError

M = TypeVar("M", bound=BaseModel)


def read_versioned(
    path: Path, model: type[M], *, what: str, version: int, kind: str | None = None, hint: str = ""
) -> M:
    """Parse ``path`` as ``model``, refusing other kinds and unknown schema versions."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtefactError(f"{path}: no such {what}") from None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise ArtefactError(f"{path}: not a {what}: invalid JSON ({exc})") from None
    if not isinstance(data, dict) or (kind is not None and data.get("kind") != kind):
        raise ArtefactError(f"{path}: not a {what}{hint}")
    if data.get("schema_version") != version:
        raise ArtefactError(
            f"{path}: unknown {what} schema_version {data.get('schema_version')!r};"
            f" this firewall reads version {version}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ArtefactError(f"{path}: malformed {what} at {where}: {first['msg']}") from None
