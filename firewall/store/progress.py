"""The lifecycle's files on the state branch, beside the history: one entry per eval in each.

``progress.json``: the quarantine's nightly progress (streaks, last probes, issue
numbers). Only the nightly on the default branch writes its streaks; every CI run
reads it over the reviewed ``quarantine.json``.

``candidates.json``: instabilities found on pull requests, not yet quarantined.
Any CI job records its own; the nightly confirms or dismisses them on the default
branch and takes them out. They live here, and not only on the eval's issue, so
that CI without GitHub issues (issues off, no token, GitLab, Jenkins) keeps them.

Both are sorted keys, 2-space indent, and are changed one eval at a time
(``merge``): concurrent jobs change different evals of one file, and each push
applies its own changes to the tip it lands on, so that none rolls back another's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from firewall.lifecycle import Candidate, Progress
from firewall.store.jsonfile import non_finite

PROGRESS_PATH = "progress.json"
CANDIDATES_PATH = "candidates.json"
SCHEMA_VERSION = 1

Model = TypeVar("Model", bound=BaseModel)


class ProgressFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int
    evals: dict[str, Progress] = {}


class CandidatesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int
    evals: dict[str, Candidate] = {}


class StateFile(Generic[Model]):
    """One of the lifecycle's files: where it sits on the branch, and its shape."""

    def __init__(self, path: str, document: type[ProgressFile] | type[CandidatesFile]) -> None:
        self.path = path
        self.document = document

    def parse(self, text: str | None) -> dict[str, Model] | None:
        """Each eval's entry, or None when the file is missing or not one we can read
        (then it is as if empty, and the next writer writes it anew). NaN or an infinity,
        which an older firewall could write, makes it one we cannot read."""
        if text is None:
            return None
        try:
            data = json.loads(text)
            if non_finite(data):
                return None
            return dict(self.document.model_validate(data).evals)  # type: ignore[arg-type]
        except (ValueError, ValidationError, RecursionError):
            return None

    def render(self, entries: Mapping[str, Model]) -> str:
        document = self.document(schema_version=SCHEMA_VERSION, evals=dict(entries))  # type: ignore[arg-type]
        # allow_nan=False: NaN and Infinity are Python's, not JSON's; jq and JavaScript refuse them.
        text = json.dumps(
            document.model_dump(mode="json"), indent=2, sort_keys=True, allow_nan=False
        )
        return text + "\n"

    def merge(
        self, changes: Mapping[str, Callable[[Model | None], Model | None]]
    ) -> Callable[[str | None], str]:
        """The file's new text from the tip's, with each eval's change applied to it.

        A change is given the tip's entry (or None) and returns the new one (or None to
        remove it); it is applied anew to every tip a push is rebuilt on."""

        def apply(text: str | None) -> str:
            entries = self.parse(text) or {}
            for eval_id, change in changes.items():
                changed = change(entries.get(eval_id))
                if changed is None:
                    entries.pop(eval_id, None)
                else:
                    entries[eval_id] = changed
            return self.render(entries)

        return apply


PROGRESS: StateFile[Progress] = StateFile(PROGRESS_PATH, ProgressFile)
CANDIDATES: StateFile[Candidate] = StateFile(CANDIDATES_PATH, CandidatesFile)
