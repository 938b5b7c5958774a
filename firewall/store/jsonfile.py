"""Reading back the JSON files the firewall writes: versioned, validated, errors naming the file.

The reading is as strict as the readers downstream of the firewall (jq,
JavaScript): the text must be UTF-8 (RFC 8259 §8.1), and NaN or an infinity,
which Python's ``json`` lets through, is refused like any other invalid value.
"""

from __future__ import annotations

import codecs
import json
import math
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from firewall.errors import ArtefactError
from firewall.files import Refused, os_reason, read_capped

M = TypeVar("M", bound=BaseModel)

Location = tuple[str | int, ...]

# UTF-32 first: its little-endian BOM begins with UTF-16's (FF FE).
_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


class NotUtf8(ValueError):
    """A file's bytes are not UTF-8; the message says what they look like instead."""


def decode_utf8(raw: bytes) -> str:
    """The text of a JSON file; ``NotUtf8`` naming the encoding found when it is not UTF-8.

    Windows PowerShell's ``>`` writes UTF-16 with a byte-order mark, and some
    editors save without one, so both are recognised and named. A UTF-8 BOM is
    accepted and dropped, as RFC 8259 lets a parser do (the firewall never
    writes one back).
    """
    for bom, name in _BOMS:
        if raw.startswith(bom):
            raise NotUtf8(f"is {name} (a BOM), expected UTF-8: re-save it as UTF-8")
    if b"\0" in raw:
        found = _nul_pattern(raw[:4])
        raise NotUtf8(
            f"is {found} (NUL bytes between the characters), expected UTF-8: re-save it as UTF-8"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotUtf8(
            f"is not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}; "
            "Latin-1 or Windows-1252?): re-save it as UTF-8"
        ) from None


def _nul_pattern(head: bytes) -> str:
    # JSON text begins with two ASCII characters, so where the NULs fall among the
    # first four bytes tells the encoding apart (RFC 4627 §3).
    nul = "".join("0" if byte == 0 else "x" for byte in head)
    if nul.startswith(("000x", "x000")):
        return "UTF-32"
    if nul.startswith(("0x", "x0")):
        return "UTF-16"
    return "UTF-16 or UTF-32"


MAX_DOCUMENT_BYTES = 256 << 20  # a report or probe part larger than this is not one
NESTED_TOO_DEEP = "nested too deep to read"


def loads(text: str | bytes) -> Any:
    """``json.loads``, but a document nested past the interpreter's recursion limit is the
    ``ValueError`` any other JSON that cannot be read is, never a ``RecursionError``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(NESTED_TOO_DEEP) from None


def non_finite(data: Any, at: Location = ()) -> list[Location]:
    """Where the NaNs and infinities in parsed JSON are, in document order.

    Walked without recursion: what ``json.loads`` could nest, this reads whatever
    depth of the stack it is called at. Most documents hold none, which the C encoder
    says at a third of the walk's cost (``allow_nan=False`` refuses each of them): the
    walk runs only to find where they are.
    """
    try:
        json.dumps(data, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        pass  # one is in there (or the encoder cannot say): walk to find where
    else:
        return []
    found = []
    stack: list[tuple[Location, Any]] = [(at, data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            found.append(where)
        elif isinstance(value, dict):
            stack.extend(((*where, key), child) for key, child in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(
                ((*where, index), child) for index, child in reversed(list(enumerate(value)))
            )
    return found


NON_FINITE = "NaN and infinities are not JSON (jq and JavaScript refuse them)"


def read_versioned(
    path: Path,
    model: type[M],
    *,
    what: str,
    version: int,
    kind: str | None = None,
    hint: str = "",
    cap: int = MAX_DOCUMENT_BYTES,
) -> M:
    """Parse ``path`` as ``model``, refusing other kinds and unknown schema versions, and
    a file that is no regular file or larger than ``cap``."""
    try:
        raw = read_capped(path, cap)
    except FileNotFoundError:
        raise ArtefactError(f"{path}: no such {what}") from None
    except Refused as exc:
        raise ArtefactError(f"{path}: the {what} {exc}") from None
    except OSError as exc:
        raise ArtefactError(f"{path}: cannot read the {what} ({os_reason(exc)})") from None
    try:
        data = loads(decode_utf8(raw))
    except NotUtf8 as exc:
        raise ArtefactError(f"{path}: the {what} {exc}") from None
    except ValueError as exc:  # JSONDecodeError included
        raise ArtefactError(f"{path}: not a {what}: invalid JSON ({exc})") from None
    if not isinstance(data, dict) or (kind is not None and data.get("kind") != kind):
        raise ArtefactError(f"{path}: not a {what}{hint}")
    if data.get("schema_version") != version:
        raise ArtefactError(
            f"{path}: unknown {what} schema_version {data.get('schema_version')!r};"
            f" this firewall reads version {version}"
        )
    found = non_finite(data)
    if found:
        where = ".".join(str(p) for p in found[0])
        raise ArtefactError(f"{path}: malformed {what} at {where}: {NON_FINITE}")
    try:
        return model.model_validate(data)
    except RecursionError:
        raise ArtefactError(f"{path}: malformed {what}: {NESTED_TOO_DEEP}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ArtefactError(f"{path}: malformed {what} at {where}: {first['msg']}") from None
