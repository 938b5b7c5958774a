"""quarantine.json: format, validation, and writers that never lose an entry."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from firewall.errors import RegistryError
from firewall.lifecycle import Entry
from firewall.store.registry import Registry

AT = dt.datetime(2026, 11, 29, 21, 5, tzinfo=dt.timezone.utc)


def entry(reason: str = "iqr 0.21 > 0.03") -> Entry:
    return Entry(since=AT, source="auto", reason=reason, median=0.74, iqr=0.21, k=7)


def test_written_sorted_indented_with_a_trailing_newline(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "quarantine.json")
    with registry.edit() as entries:
        entries["zeta"] = entry()
        entries["alpha"] = entry()
    text = registry.path.read_text()
    assert text.endswith("}\n")
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True) + "\n"
    assert list(data["evals"]) == ["alpha", "zeta"]
    assert data["evals"]["alpha"]["since"] == "2026-11-29T21:05:00Z"
    assert set(data["evals"]["alpha"]) == {
        "since",
        "source",
        "reason",
        "median",
        "iqr",
        "k",
        "git_sha",
        "issue",
        "stable_streak",
        "last_probe",
        "review_by",
        "owner",
    }
    assert registry.read()["alpha"] == entry()


def test_an_unchanged_registry_is_not_rewritten(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "quarantine.json")
    with registry.edit():
        pass
    assert not registry.path.exists(), "no empty registry appears in the user's repository"


@pytest.mark.parametrize(
    "content, message",
    [
        ("{oops", "not valid JSON"),
        ('{"schema_version": 2, "evals": {}}', "unknown schema_version 2"),
        ('{"evals": {}}', "unknown schema_version None"),
        ("[1, 2]", "unknown schema_version"),
        ('{"schema_version": 1, "evals": {"x": {"since": "yesterday"}}}', "malformed"),
        ('{"schema_version": 1, "evals": {}, "extra": 1}', "malformed"),
    ],
)
def test_bad_registries_are_named_and_never_overwritten(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "quarantine.json"
    path.write_text(content)
    registry = Registry(path)
    with pytest.raises(RegistryError) as caught, registry.edit() as entries:
        entries["new"] = entry()
    assert str(path) in str(caught.value) and message in str(caught.value)
    assert path.read_text() == content


WRITER = """
import datetime as dt, sys
from pathlib import Path
from firewall.lifecycle import Entry
from firewall.store.registry import Registry
path, name, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
at = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc)
for i in range(rounds):
    with Registry(path).edit() as entries:
        entries[f"{name}-{i}"] = Entry(since=at, source="manual", reason=name)
"""


def test_concurrent_writer_processes_lose_no_entry(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.json"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{n}", "15"]) for n in range(8)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0] * 8
    entries = Registry(path).read()
    assert len(entries) == 8 * 15
    assert not list(tmp_path.glob(".quarantine.json.*")), "no temp file is left behind"
