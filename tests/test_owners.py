"""An eval's owner is a GitHub login or team on every path that sets one, checked in one place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import invoke_split, write_module

from firewall.config import OWNER_EXPECTED, parse_owner
from firewall.configfile import load_config
from firewall.discovery import discover
from firewall.errors import ConfigError

GOOD = {
    "alice": "alice",
    "@alice": "alice",
    "a": "a",
    "Alice-Bob-2": "Alice-Bob-2",
    "a" * 39: "a" * 39,
    "@octo-org/safety": "octo-org/safety",
    "octo-org/safety_team.v2": "octo-org/safety_team.v2",
}
BAD = [
    "",
    "@",
    "bob|x",  # would split the table
    "bob\nx",  # would put a line break in the registry
    "bob ",
    "-bob",
    "bob-",
    "bob--x",
    "bob_x",
    "a" * 40,
    "@@alice",
    "org/",
    "org/team/more",
    "@org/-team",
    "<img src=x onerror=alert(1)>",
]


@pytest.mark.parametrize(("owner", "kept"), GOOD.items())
def test_a_login_or_a_team_is_kept_without_its_at_sign(owner: str, kept: str) -> None:
    assert parse_owner(owner) == kept


@pytest.mark.parametrize("owner", BAD)
def test_anything_else_is_refused_saying_what_is_expected(owner: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_owner(owner)
    assert str(caught.value) == OWNER_EXPECTED
    assert "alice or @alice" in OWNER_EXPECTED and "@org/team" in OWNER_EXPECTED


def config_with(owner: str) -> str:
    return f'[[evals]]\nid = "tone"\ncommand = "true"\nowner = {json.dumps(owner)}\n'


@pytest.mark.parametrize("owner", ["bob|x", "bob\nx", "a" * 40])
def test_the_config_names_the_file_the_eval_and_the_key(project: Path, owner: str) -> None:
    (project / "firewall.toml").write_text(config_with(owner), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(None, project)
    assert str(caught.value) == (
        f"firewall.toml: evals[0] (id 'tone').owner: {OWNER_EXPECTED} (got {owner!r})"
    )


def test_the_config_owner_reaches_the_spec_without_its_at_sign(project: Path) -> None:
    (project / "firewall.toml").write_text(config_with("@octo-org/safety"), encoding="utf-8")
    (spec,) = discover(load_config(None, project), project)
    assert spec.owner == "octo-org/safety"


def test_the_decorator_names_the_function_and_the_key(project: Path) -> None:
    (project / "firewall.toml").write_text('paths = ["evals"]\n', encoding="utf-8")
    (project / "evals").mkdir()
    write_module(
        project / "evals",
        "tone",
        "import firewall\n\n@firewall.eval(owner='bob|x')\ndef tone(seed):\n    return 1.0\n",
    )
    with pytest.raises(ConfigError) as caught:
        discover(load_config(None, project), project)
    assert (
        str(caught.value)
        == f"evals/tone.py:3: @firewall.eval owner: {OWNER_EXPECTED} (got 'bob|x')"
    )


@pytest.mark.parametrize("owner", ["bob|x", "bob\nx"])
def test_quarantine_add_refuses_the_owner_and_changes_nothing(project: Path, owner: str) -> None:
    (project / "firewall.toml").write_text(
        '[[evals]]\nid = "tone"\ncommand = "true"\n', encoding="utf-8"
    )
    result = invoke_split("quarantine", "add", "tone", "--reason", "outage", "--owner", owner)
    assert result.exit_code == 2
    assert result.stderr == f"firewall: error: --owner: {OWNER_EXPECTED} (got {owner!r})\n"
    assert not (project / "quarantine.json").exists()


def test_quarantine_add_keeps_a_team_owner_without_its_at_sign(project: Path) -> None:
    (project / "firewall.toml").write_text(
        '[[evals]]\nid = "tone"\ncommand = "true"\nowner = "alice"\n', encoding="utf-8"
    )
    result = invoke_split(
        "quarantine",
        "add",
        "tone",
        "--reason",
        "outage",
        "--owner",
        "@octo-org/safety",
        "--no-issues",
    )
    assert result.exit_code == 0
    entry = json.loads((project / "quarantine.json").read_text())["evals"]["tone"]
    assert entry["owner"] == "octo-org/safety"
