"""What each eval target read: the project files its worker noted (``firewall/runner/_worker.py``).

A run that fingerprints its evals (``firewall.pipeline.affected``) asks the runner
for them: the workers write one JSON line per (target, file) into a directory of the
run's scratch, named to them in ``FIREWALL_READS``, and the runner reads it back
before the scratch goes. Inside the scratch, nothing outlives a SIGKILLed firewall.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from pathlib import Path

READS_VAR = "FIREWALL_READS"  # the worker's side channel; _worker.py names it too

Reads = dict[str, set[str]]  # target -> the project files it imported or opened


def note_reads(scratch: Path, environment: MutableMapping[str, str]) -> Path:
    """Ask the workers started with ``environment`` to note what they read, into a
    directory of the run's ``scratch`` (made once; asking again changes nothing)."""
    directory = scratch / "reads"
    if environment.get(READS_VAR) != str(directory):
        directory.mkdir(exist_ok=True)
        environment[READS_VAR] = str(directory)
    return directory


def recorded(directory: Path, into: Reads) -> None:
    """Add the project files each eval target imported or opened, by target."""
    for path in sorted(directory.glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        try:  # a worker's lines as one array: one parse, not one per line
            notes = json.loads("[" + ",".join(lines) + "]")
        except ValueError:  # a worker killed mid-write: its last line torn
            notes = []
            for line in lines:
                try:
                    notes.append(json.loads(line))
                except ValueError:
                    continue
        for note in notes:
            if isinstance(note, dict) and isinstance(note.get("target"), str):
                into.setdefault(note["target"], set()).add(str(note.get("file")))
