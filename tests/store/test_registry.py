"""quarantine.json: format, validation, and writers that never lose an entry."""

from __future__ import annotations

import datetime as dt
import json
import math
import stat
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
        "clean_trials",
        "collapse_llr",
        "counted_trials",
        "collapses",
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


# --- what a strict JSON reader would refuse is refused on read -----------------------------

GOOD = {"since": "2026-11-29T21:05:00Z", "source": "auto", "reason": "iqr 0.21 > 0.03"}


def document(**fields: object) -> str:
    """A registry of one eval, "tone": a valid entry with these fields; NaN as Python writes it."""
    return json.dumps(
        {"schema_version": 1, "evals": {"tone": {**GOOD, **fields}}}, ensure_ascii=False
    )


def refused(path: Path, content: str | bytes) -> str:
    """The message of an edit of a registry holding ``content``, checking it was left alone."""
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    with pytest.raises(RegistryError) as caught, Registry(path).edit() as entries:
        entries["new"] = entry()
    assert path.read_bytes() == content, "a registry it refuses is never overwritten"
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and message.endswith("it was left untouched")
    return message


@pytest.mark.parametrize(
    "encoding, found",
    [
        ("utf-16", "UTF-16 (a BOM)"),  # Windows PowerShell's `>`
        ("utf-16-le", "UTF-16 (NUL bytes between the characters)"),
        ("utf-16-be", "UTF-16 (NUL bytes between the characters)"),
        ("utf-32", "UTF-32 (a BOM)"),
        ("utf-32-le", "UTF-32 (NUL bytes between the characters)"),
        ("utf-32-be", "UTF-32 (NUL bytes between the characters)"),
    ],
)
def test_a_registry_in_another_encoding_is_named_with_the_encoding_found(
    tmp_path: Path, encoding: str, found: str
) -> None:
    message = refused(tmp_path / "quarantine.json", document().encode(encoding))
    assert f"the quarantine registry is {found}, expected UTF-8: re-save it as UTF-8" in message


def test_a_latin_1_registry_is_not_utf_8_and_says_where(tmp_path: Path) -> None:
    content = document(reason="réglage").encode("latin-1")
    message = refused(tmp_path / "quarantine.json", content)
    assert "is not UTF-8 (byte 0xe9 at offset" in message and "re-save it as UTF-8" in message


def test_a_utf_8_bom_is_accepted_and_not_written_back(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.json"
    path.write_bytes(b"\xef\xbb\xbf" + document().encode())
    registry = Registry(path)
    assert registry.read()["tone"].reason == "iqr 0.21 > 0.03"
    with registry.edit() as entries:
        entries["new"] = entry()
    assert path.read_bytes().startswith(b'{\n  "evals"'), "the BOM is dropped on write"


@pytest.mark.parametrize("key", ["median", "iqr"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_and_infinities_are_refused_naming_the_eval_and_the_key(
    tmp_path: Path, key: str, value: float
) -> None:
    message = refused(tmp_path / "quarantine.json", document(**{key: value}))
    assert f"eval 'tone': {key}: NaN and infinities are not JSON" in message


def test_a_number_too_large_for_a_float_is_an_infinity_and_refused(tmp_path: Path) -> None:
    message = refused(
        tmp_path / "quarantine.json", document().replace('"source"', '"median": 1e999, "source"')
    )
    assert "eval 'tone': median: NaN and infinities are not JSON" in message


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"since": 5}, "eval 'tone': since: Input should be a valid datetime (got 5)"),
        ({"since": "2026-11-29T21:05:00"}, "eval 'tone': since: timestamps must carry a time zone"),
        ({"k": 7.5}, "eval 'tone': k: Input should be a valid integer (got 7.5)"),
        ({"issue": "42"}, "eval 'tone': issue: Input should be a valid integer (got \"42\")"),
        ({"stable_streak": True}, "eval 'tone': stable_streak: Input should be a valid integer"),
        ({"median": "0.74"}, "eval 'tone': median: Input should be a valid number"),
        ({"reason": 5}, "eval 'tone': reason: Input should be a valid string (got 5)"),
        ({"source": "robot"}, "eval 'tone': source: Input should be 'auto' or 'manual'"),
    ],
)
def test_wrong_types_are_refused_naming_the_eval_and_the_key(
    tmp_path: Path, fields: dict[str, object], named: str
) -> None:
    assert named in refused(tmp_path / "quarantine.json", document(**fields))


def test_every_problem_is_named_at_once(tmp_path: Path) -> None:
    message = refused(tmp_path / "quarantine.json", document(since=5, median=math.nan, k="7"))
    assert "eval 'tone': since:" in message and "eval 'tone': k:" in message
    assert message.count("median") == 1, "a NaN is named once, not again as a bad number"


def test_an_eval_id_that_config_would_refuse_is_refused(tmp_path: Path) -> None:
    content = json.dumps({"schema_version": 1, "evals": {"x --> <img src=x>": GOOD}})
    message = refused(tmp_path / "quarantine.json", content)
    assert "eval id 'x --> <img src=x>': ids may use only letters, digits and . _ / -" in message


def test_nan_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.json"
    with Registry(path).edit() as entries:
        entries["tone"] = entry()
    before = path.read_bytes()
    with pytest.raises(ValueError, match="not JSON compliant"), Registry(path).edit() as entries:
        entries["tone"] = entries["tone"].model_copy(update={"median": math.nan})
    assert path.read_bytes() == before


# --- the file's mode -------------------------------------------------------------------------


def test_a_write_keeps_the_registrys_mode(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.json"
    path.write_text(document())
    path.chmod(0o644)
    with Registry(path).edit() as entries:
        entries["new"] = entry()
    assert "new" in Registry(path).read() and stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_read_only_registry_is_read_but_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.json"
    path.write_text(document())
    path.chmod(0o444)
    registry = Registry(path)
    with registry.edit():
        pass  # nothing to write: a read-only registry serves every command that only reads
    assert list(registry.read()) == ["tone"]
    with pytest.raises(RegistryError) as caught, registry.edit() as entries:
        entries["new"] = entry()
    assert str(caught.value) == (
        f"{path}: the quarantine registry is read-only (mode 0444); make it writable "
        f"(`chmod u+w {path}`) to change it; it was left untouched"
    )
    assert path.read_text() == document() and stat.S_IMODE(path.stat().st_mode) == 0o444
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("owner", ["bob|x", "bob\nx", "", "-bob", "a" * 40])
def test_an_owner_that_is_no_github_login_or_team_is_refused(tmp_path: Path, owner: str) -> None:
    message = refused(tmp_path / "quarantine.json", document(owner=owner))
    assert "eval 'tone': owner: expected a GitHub login" in message
    assert f"(got {json.dumps(owner)})" in message


def test_an_owner_read_with_its_at_sign_is_kept_without_it(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.json"
    path.write_text(document(owner="@alice"))
    assert Registry(path).read()["tone"].owner == "alice"
    path.write_text(document(owner="@octo-org/safety"))
    assert Registry(path).read()["tone"].owner == "octo-org/safety"
