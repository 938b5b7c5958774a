"""The quarantine's nightly progress (streaks, last probes, issue numbers) on the state branch.

``progress.json`` beside the history on the state branch: sorted keys, 2-space
indent, one entry per quarantined eval. Only the nightly on the default branch
writes it; every run reads it over the reviewed ``quarantine.json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, ValidationError

from firewall.lifecycle import Progress
from firewall.store.jsonfile import non_finite

PROGRESS_PATH = "progress.json"
SCHEMA_VERSION = 1


class ProgressFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int
    evals: dict[str, Progress] = {}


def parse_progress(text: str | None) -> dict[str, Progress] | None:
    """The progress of each eval, or None when the file is missing or not one we can read
    (then the reviewed entries stand as they are, and the next nightly writes it anew).
    NaN or an infinity, which an older firewall could write, makes it one we cannot read."""
    if text is None:
        return None
    try:
        data = json.loads(text)
        if non_finite(data):
            return None
        return dict(ProgressFile.model_validate(data).evals)
    except (ValueError, ValidationError):
        return None


def render_progress(progress: Mapping[str, Progress]) -> str:
    document = ProgressFile(schema_version=SCHEMA_VERSION, evals=dict(progress))
    # allow_nan=False: NaN and Infinity are Python's, not JSON's; jq and JavaScript refuse them.
    text = json.dumps(document.model_dump(mode="json"), indent=2, sort_keys=True, allow_nan=False)
    return text + "\n"
