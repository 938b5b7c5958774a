"""`firewall schema`: the JSON Schemas of the files the firewall reads and writes.

Each is a JSON Schema 2020-12 document (pydantic's dialect) with an ``$id`` that
names the schema and the version of the file it describes, so that a schema
saved beside a project can be told from one of another version. The files the
firewall writes are described as written (serialisation mode); the trial
result, which an eval writes and the firewall reads, as the firewall accepts it.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import click
from pydantic import BaseModel

from firewall import output
from firewall.artefact import SCHEMA_VERSION as ARTEFACT_VERSION
from firewall.artefact import Artefact
from firewall.runner.trial import TrialPayload
from firewall.store.registry import SCHEMA_VERSION as REGISTRY_VERSION
from firewall.store.registry import RegistryFile

DIALECT = "https://json-schema.org/draft/2020-12/schema"

# The trial result has no `schema_version` of its own: this is the contract's (§3) first.
TRIAL_RESULT_VERSION = 1

SCHEMAS: dict[str, tuple[type[BaseModel], int, Literal["validation", "serialization"]]] = {
    "artefact": (Artefact, ARTEFACT_VERSION, "serialization"),
    "registry": (RegistryFile, REGISTRY_VERSION, "serialization"),
    "trial-result": (TrialPayload, TRIAL_RESULT_VERSION, "validation"),
}


def json_schema(name: str) -> dict[str, Any]:
    """The schema called ``name``, with its ``$schema`` and ``$id``."""
    model, version, mode = SCHEMAS[name]
    document = model.model_json_schema(by_alias=True, mode=mode)
    return {
        "$schema": DIALECT,
        "$id": f"urn:flakiness-firewall:schema:{name}:v{version}",
        **document,
    }


@click.command()
@click.argument("which", required=False, type=click.Choice(sorted(SCHEMAS)))
def schema(which: str | None) -> None:
    """Print JSON Schemas: the artefact, the registry and the trial result.

    With WHICH, print only that schema; otherwise an object of all three.
    """
    document = json_schema(which) if which else {name: json_schema(name) for name in SCHEMAS}
    output.echo_json(json.dumps(document, indent=2, sort_keys=True))
