"""`firewall schema`: the JSON Schemas of the files the firewall reads and writes."""

from __future__ import annotations

import json

import click
from pydantic import BaseModel

from firewall import output
from firewall.artefact import Artefact
from firewall.runner.trial import TrialPayload
from firewall.store.registry import RegistryFile

SCHEMAS: dict[str, type[BaseModel]] = {
    "artefact": Artefact,
    "registry": RegistryFile,
    "trial-result": TrialPayload,
}


@click.command()
@click.argument("which", required=False, type=click.Choice(sorted(SCHEMAS)))
def schema(which: str | None) -> None:
    """Print JSON Schemas: the artefact, the registry and the trial result.

    With WHICH, print only that schema; otherwise an object of all three.
    """
    if which:
        document = SCHEMAS[which].model_json_schema(by_alias=True, mode="serialization")
    else:
        document = {
            name: model.model_json_schema(by_alias=True, mode="serialization")
            for name, model in SCHEMAS.items()
        }
    output.echo_json(json.dumps(document, indent=2, sort_keys=True))
