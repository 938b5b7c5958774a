"""Secrets: which environment values are secrets, and that none is left in what is scrubbed."""

from __future__ import annotations

import json
import urllib.parse

import pytest
from builders import make_artefact, make_report
from hypothesis import given, settings
from hypothesis import strategies as st

from firewall.artefact import Artefact
from firewall.policy import Status
from firewall.secrets import REDACTED, Secrets, secret_name, without_token

KEY = "sk-proj-4f9a8b7c6d5e"
TOKEN = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "INPUT_GITHUB-TOKEN",
        "OPENAI_API_KEY",
        "openai_api_key",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "MYSQL_PASSWD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "NPM_AUTH",
        "BASIC-AUTH",
        "GH_PAT",
        "SMTP_PASS",
        "MYSQL_PWD",
        "SSH_AUTH_SOCK",  # a socket's path: harmless to hide
    ],
)
def test_names_that_look_like_secrets(name: str) -> None:
    assert secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["PATH", "PWD", "OLDPWD", "HOME", "GIT_AUTHOR_NAME", "XAUTHORITY", "BYPASS_CACHE", "CI"],
)
def test_names_that_do_not(name: str) -> None:
    assert not secret_name(name)


def test_the_token_and_secret_named_values_are_scrubbed_and_nothing_else() -> None:
    secrets = Secrets.from_env(
        {"GITHUB_TOKEN": TOKEN, "OPENAI_API_KEY": KEY, "HOME": "/home/runner", "USER": "runner"}
    )
    text = f"token {TOKEN}, key {KEY}, home /home/runner"
    assert secrets.scrub(text) == "token ***, key ***, home /home/runner"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "abc12",  # under six characters
        "false",
        "DISABLED",
        "default",
        "2048",
        "3600.5",
        "123456789012345",  # a number of 15 digits: a seed or a count, not a secret
        "   ",
    ],
)
def test_values_too_plain_to_be_secrets_are_left_alone(value: str) -> None:
    secrets = Secrets.from_env({"TOKENIZERS_PARALLELISM": value, "API_KEY": value})
    assert not secrets
    assert secrets.scrub(f"seed 123456789012345, {value} DISABLED") == (
        f"seed 123456789012345, {value} DISABLED"
    )


def test_a_long_number_and_a_six_character_value_are_secrets() -> None:
    secrets = Secrets.from_env({"PIN_KEY": "1234567890123456", "DB_PASS": "hunter"})
    assert secrets.scrub("1234567890123456 hunter2") == "*** ***2"


def test_the_longest_value_goes_first_so_a_value_inside_another_leaves_nothing() -> None:
    secrets = Secrets.from_env({"A_KEY": "abcdef", "B_KEY": "xxabcdefyy"})
    assert secrets.scrub("xxabcdefyy abcdef") == "*** ***"


def test_a_value_in_json_text_and_in_a_url_is_scrubbed() -> None:
    value = 'p@ss"wörd/+1'
    secrets = Secrets.from_env({"DB_PASSWORD": value})
    for encoded in (
        json.dumps({"error": value}),
        json.dumps({"error": value}, ensure_ascii=False),
        f"GET https://api.example.com/v1?key={urllib.parse.quote(value, safe='')}",
        f"POST /?key={urllib.parse.quote_plus(value)}",
    ):
        scrubbed = secrets.scrub(encoded)
        assert REDACTED in scrubbed
        assert "ss" not in scrubbed.replace("POST", "")  # no part of the value is left


def test_blanks_around_a_value_and_each_line_of_a_long_one_are_secrets_too() -> None:
    key = "-----BEGIN KEY-----\nMIIBVQIBADANBgkqhkiG9w0\nAQEBBQAEggE/MIIBOwIBAAJB\n-----END-----"
    secrets = Secrets.from_env({"GITHUB_TOKEN": f"{TOKEN}\n", "SSH_PRIVATE_KEY": key})
    assert secrets.scrub(f"'{TOKEN}'") == "'***'"
    assert secrets.scrub("line MIIBVQIBADANBgkqhkiG9w0 and AQEBBQAEggE/MIIBOwIBAAJB") == (
        "line *** and ***"
    )


def test_scrub_data_scrubs_strings_and_keys_at_any_depth_and_keeps_the_rest() -> None:
    secrets = Secrets.from_env({"OPENAI_API_KEY": KEY})
    data = {"reason": f"bad key {KEY}", KEY: [1, 2.5, None, True, (f"x{KEY}",)], "k": {"n": 3}}
    assert secrets.scrub_data(data) == {
        "reason": "bad key ***",
        "***": [1, 2.5, None, True, ("x***",)],
        "k": {"n": 3},
    }


def test_scrub_model_gives_the_same_model_back_without_the_value() -> None:
    report = make_report("triage", Status.ERROR, reason=f"401: {KEY} is invalid")
    artefact = make_artefact(report)
    scrubbed = Secrets.from_env({"OPENAI_API_KEY": KEY}).scrub_model(artefact)
    assert isinstance(scrubbed, Artefact)
    assert scrubbed.evals[0].reason == "401: *** is invalid"
    assert KEY not in scrubbed.to_json()
    assert scrubbed.model_copy(update={"evals": [report]}) == artefact


def test_without_secrets_everything_is_given_back_as_it_is() -> None:
    nothing = Secrets.from_env({"HOME": "/root"})
    data = {"a": ["b"]}
    assert not nothing
    assert nothing.scrub_data(data) is data
    assert repr(Secrets.from_env({"OPENAI_API_KEY": KEY})) == "Secrets(1 values)"


def test_an_evals_environment_loses_the_firewalls_token_only() -> None:
    env = {name: TOKEN for name in ("GITHUB_TOKEN", "GH_TOKEN", "INPUT_GITHUB-TOKEN")}
    assert without_token({**env, "OPENAI_API_KEY": KEY, "PATH": "/bin"}) == {
        "OPENAI_API_KEY": KEY,
        "PATH": "/bin",
    }


# --- properties

PROPERTIES = settings(derandomize=True, database=None, max_examples=300)
# Values that pass the rules: at least six characters, and not a plain number.
secret_values = st.text(min_size=6, max_size=24).filter(
    lambda v: v == v.strip() and not v.isdigit() and "\n" not in v
)
environments = st.dictionaries(
    st.sampled_from(["GITHUB_TOKEN", "A_KEY", "B_SECRET", "C_PASSWORD", "D_TOKEN", "E_AUTH"]),
    secret_values,
    min_size=1,
)


@PROPERTIES
@given(env=environments, pieces=st.lists(st.text(max_size=12), max_size=6), data=st.data())
def test_no_value_is_left_after_scrub_and_a_second_scrub_changes_nothing(
    env: dict[str, str], pieces: list[str], data: st.DataObject
) -> None:
    secrets = Secrets.from_env(env)
    values = list(env.values())
    mixed = data.draw(st.permutations(pieces + values + [v[:3] + v for v in values]))
    text = "".join(mixed)
    scrubbed = secrets.scrub(text)
    for value in secrets.values:
        assert value not in scrubbed
    assert secrets.scrub(scrubbed) == scrubbed


@PROPERTIES
@given(env=environments, text=st.text(max_size=80))
def test_text_without_any_secret_form_is_unchanged(env: dict[str, str], text: str) -> None:
    secrets = Secrets.from_env(env)
    if not any(form in text for form in secrets.forms):
        assert secrets.scrub(text) == text
