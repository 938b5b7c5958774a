"""An eval's fingerprint: everything that can change its outcome, hashed (contract §4).

Pure: the caller reads the files and the environment, and this module names and
hashes what it is given. The fingerprint is made of named parts, kept beside it
in the artefact and the history, so that a later run can say which one changed:

    settings      the resolved spec, less what cannot change an outcome (where the
                  eval is defined, its owner, its tags, whether it blocks)
    firewall      the firewall's version
    file:PATH     a project file the eval's worker imported or opened, or one its
                  `inputs` globs match (``ABSENT`` when it is not there)
    env:NAME      an environment variable its `env` names (its value hashed, never kept)

An eval whose inputs cannot be known (a command or an Inspect task without
`inputs`; a JUnit suite, whose cases a run discovers) has no fingerprint
(``unknowable``): it is always probed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from firewall._version import __version__
from firewall.spec import EvalSpec

SETTINGS = "settings"
VERSION = "firewall"
FILE = "file:"
ENV = "env:"
ABSENT = "absent"
# What a spec holds that does not change what its trials measure or how they are decided.
_NOT_AN_INPUT = {"source", "owner", "tags", "blocking"}


def digest(data: bytes) -> str:
    """A short content hash: 64 bits tell any two versions of one file apart."""
    return hashlib.sha256(data).hexdigest()[:16]


def settings_digest(spec: EvalSpec) -> str:
    document = spec.model_dump(mode="json", exclude=_NOT_AN_INPUT)
    return digest(json.dumps(document, sort_keys=True, separators=(",", ":")).encode())


def unknowable(spec: EvalSpec) -> str | None:
    """Why the eval's inputs cannot be known, or None when they can."""
    if spec.result == "junit":
        return (
            "a JUnit suite: its cases are known only from the report a run writes (a change "
            "can add, drop or rename one unseen), and its test runner imports and opens its "
            "files in a process the firewall does not watch, so only `inputs` naming every "
            "file its tests touch could vouch for a carry, and one left out would carry a "
            "changed case: a suite is always probed"
        )
    if spec.kind == "python" or spec.inputs:
        return None
    return f"a {spec.kind} eval without `inputs`: what it reads cannot be known"


def parts_of(
    spec: EvalSpec,
    files: Mapping[str, bytes | None],
    env: Mapping[str, str | None],
    *,
    version: str = __version__,
) -> dict[str, str]:
    """The named parts of the eval's fingerprint. ``files``: project files by their path
    relative to the root (None: not there); ``env``: the values of the variables its
    ``env`` names (None: unset)."""
    digests = {path: None if data is None else digest(data) for path, data in files.items()}
    return parts_from(spec, digests, env, version=version)


def parts_from(
    spec: EvalSpec,
    files: Mapping[str, str | None],
    env: Mapping[str, str | None],
    *,
    version: str = __version__,
) -> dict[str, str]:
    """``parts_of`` from each file's ``digest`` (None: not there) instead of its content:
    for a caller that hashes a file once however many evals read it."""
    parts = {SETTINGS: settings_digest(spec), VERSION: version}
    for path, file_digest in files.items():
        parts[FILE + path] = ABSENT if file_digest is None else file_digest
    for name in spec.env:
        value = env.get(name)
        parts[ENV + name] = ABSENT if value is None else digest(value.encode())
    return dict(sorted(parts.items()))


def combine(parts: Mapping[str, str]) -> str:
    """The fingerprint of its parts: equal parts, equal fingerprint, whatever their order."""
    text = json.dumps(dict(sorted(parts.items())), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def files_in(parts: Mapping[str, str]) -> list[str]:
    """The project files a fingerprint was made from."""
    return [name.removeprefix(FILE) for name in parts if name.startswith(FILE)]


def changes(before: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """What differs between two fingerprints' parts, the most telling first: the
    firewall's version, the settings, then each file and variable, in path order."""
    said = []
    if before.get(VERSION) != now.get(VERSION):
        said.append(f"firewall {before.get(VERSION, '?')} -> {now.get(VERSION, '?')}")
    if before.get(SETTINGS) != now.get(SETTINGS):
        said.append("its settings changed")
    for name in sorted(before.keys() | now.keys()):
        if name in (VERSION, SETTINGS) or before.get(name) == now.get(name):
            continue
        kind, shown = (
            ("variable", name.removeprefix(ENV))
            if name.startswith(ENV)
            else (
                "file",
                name.removeprefix(FILE),
            )
        )
        was, is_ = before.get(name, ABSENT), now.get(name, ABSENT)
        if kind == "variable":
            said.append(f"${shown} changed")
        elif was == ABSENT:
            said.append(f"{shown} is new")
        elif is_ == ABSENT:
            said.append(f"{shown} is gone")
        else:
            said.append(f"{shown} changed")
    return said
