"""A registry the firewall cannot honour stops every command that reads it, exit 2, untouched."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from builders import invoke_split

CONFIG = 'k = 3\nseed = 7\n[[evals]]\nid = "tone"\ncommand = "echo \'{\\"score\\": 0.9}\'"\n'
REGISTRY = json.dumps(
    {
        "schema_version": 1,
        "evals": {
            "tone": {"since": "2026-11-29T21:05:00Z", "source": "manual", "reason": "outage"}
        },
    }
)
READERS = [
    ["run", "--no-issues"],
    ["nightly", "--no-issues"],
    ["status"],
    ["quarantine", "list"],
    ["quarantine", "add", "tone", "--reason", "again", "--no-issues"],
    ["quarantine", "release", "tone", "--no-issues"],
]


@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_a_utf_16_registry_is_named_with_its_encoding(project: Path, command: list[str]) -> None:
    (project / "firewall.toml").write_text(CONFIG, encoding="utf-8")
    registry = project / "quarantine.json"
    registry.write_text(REGISTRY, encoding="utf-16")  # what Windows PowerShell's `>` writes
    before = registry.read_bytes()
    result = invoke_split(*command)
    assert result.exit_code == 2, result.stderr
    assert (
        "quarantine.json: the quarantine registry is UTF-16 (a BOM), expected UTF-8: "
        "re-save it as UTF-8; it was left untouched"
    ) in result.stderr
    assert "Traceback" not in result.stderr and registry.read_bytes() == before


@pytest.mark.parametrize("command", READERS[-2:], ids=" ".join)
def test_a_read_only_registry_is_refused_and_left_as_it_is(
    project: Path, command: list[str]
) -> None:
    (project / "firewall.toml").write_text(CONFIG, encoding="utf-8")
    registry = project / "quarantine.json"
    registry.write_text(REGISTRY.replace('"tone"', '"other"', 1) if "add" in command else REGISTRY)
    registry.chmod(0o444)
    before = registry.read_bytes()
    result = invoke_split(*command)
    assert result.exit_code == 2, result.stderr
    assert "quarantine.json: the quarantine registry is read-only (mode 0444)" in result.stderr
    assert registry.read_bytes() == before and stat.S_IMODE(registry.stat().st_mode) == 0o444


def test_a_read_only_registry_still_serves_the_commands_that_only_read(project: Path) -> None:
    (project / "firewall.toml").write_text(CONFIG, encoding="utf-8")
    registry = project / "quarantine.json"
    registry.write_text(REGISTRY)
    registry.chmod(0o444)
    listed = invoke_split("quarantine", "list")
    assert listed.exit_code == 0 and "tone  manual" in listed.stdout
