"""Evals do not inherit the firewall's own GitHub token unless `[github] share_token` says so.

The firewall keeps the token in its own process (it opens issues with it); its trials,
commands and Python workers alike, run without it. Other secrets stay: an eval needs
its API key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from builders import command_spec, python_spec, write_module
from click.testing import CliRunner

from firewall.cli import main
from firewall.configfile import load_config
from firewall.errors import ConfigError
from firewall.runner import Runner, Task
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec

TOKEN = "ghs_firewallsOwnToken0123456789"
# Each eval reports what its environment holds as its error, so the artefact shows it.
COMMAND = (
    'echo "{\\"error\\": \\"github=${GITHUB_TOKEN:-none} gh=${GH_TOKEN:-none} '
    'key=${OPENAI_API_KEY:-none}\\"}"'
)
MODULE = """
import os

def _seen():
    names = ("GITHUB_TOKEN", "GH_TOKEN", "INPUT_GITHUB-TOKEN", "OPENAI_API_KEY")
    return {"error": " ".join(f"{name}={os.environ.get(name, 'none')}" for name in names)}

def plain(seed, trial):
    return _seen()

async def pooled(seed, trial):
    return _seen()
"""
NOTHING_SHARED = "GITHUB_TOKEN=none GH_TOKEN=none INPUT_GITHUB-TOKEN=none OPENAI_API_KEY=sk-kept"


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "INPUT_GITHUB-TOKEN"):
        monkeypatch.setenv(name, TOKEN)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-kept")
    return TOKEN


def one(cwd: Path, spec: EvalSpec, *, share_token: bool = False) -> str:
    [record] = Runner(concurrency=1, cwd=cwd, share_token=share_token).run([Task(spec, 0, 1, 1)])
    return error(record)


def error(record: TrialRecord) -> str:
    assert record.error is not None
    return record.error


def test_a_command_eval_does_not_see_the_token(project: Path, token: str) -> None:
    seen = one(project, command_spec(COMMAND))
    assert "github=none gh=none key=sk-kept" in seen
    assert os.environ["GITHUB_TOKEN"] == token, "the firewall itself keeps it"


@pytest.mark.parametrize("target", ["plain", "pooled"])
def test_a_python_eval_does_not_see_the_token(project: Path, token: str, target: str) -> None:
    module = write_module(project, "peek", MODULE)
    spec = python_spec(f"{module}:{target}", asynchronous=target == "pooled")
    assert NOTHING_SHARED in one(project, spec)


def test_share_token_hands_it_on(project: Path, token: str) -> None:
    module = write_module(project, "peek", MODULE)
    assert f"github={token} gh={token}" in one(project, command_spec(COMMAND), share_token=True)
    seen = one(project, python_spec(f"{module}:plain"), share_token=True)
    assert f"GITHUB_TOKEN={token} GH_TOKEN={token} INPUT_GITHUB-TOKEN={token}" in seen


def test_firewall_run_keeps_the_token_from_command_and_python_evals(
    project: Path, token: str
) -> None:
    write_module(project, "peek", MODULE)
    (project / "firewall.toml").write_text(
        "k = 3\nadaptive = false\n"
        f'[[evals]]\nid = "command"\ncommand = {json.dumps(COMMAND)}\n'
        '[[evals]]\nid = "python"\npython = "peek:plain"\n'
        '[[evals]]\nid = "async"\npython = "peek:pooled"\n'
    )

    result = CliRunner().invoke(main, ["run", "--no-issues"], catch_exceptions=False)

    assert result.exit_code == 3, result.output
    text = (project / "firewall-report.json").read_text()
    assert token not in text
    reasons = {e["id"]: e["reason"] for e in json.loads(text)["evals"]}
    # The eval saw no token; the key it did see is in the report as *** (contract §7).
    assert "github=none gh=none key=***" in reasons["command"]
    reported = NOTHING_SHARED.replace("sk-kept", "***")
    assert reported in reasons["python"] and reported in reasons["async"]


def test_firewall_run_with_share_token_hands_it_on(project: Path, token: str) -> None:
    (project / "firewall.toml").write_text(
        "k = 3\nadaptive = false\n[github]\nshare_token = true\n"
        f'[[evals]]\nid = "command"\ncommand = {json.dumps(COMMAND)}\n'
    )

    CliRunner().invoke(main, ["run", "--no-issues"], catch_exceptions=False)

    [evaluation] = json.loads((project / "firewall-report.json").read_text())["evals"]
    # The eval saw the token, and the report still does not carry it.
    assert "github=***" in evaluation["reason"] and token not in evaluation["reason"]


def test_share_token_is_a_github_setting_off_by_default(project: Path) -> None:
    (project / "firewall.toml").write_text("[github]\n")
    assert load_config(project / "firewall.toml").settings.github.share_token is False
    (project / "firewall.toml").write_text("[github]\nshare_token = true\n")
    assert load_config(project / "firewall.toml").settings.github.share_token is True
    (project / "firewall.toml").write_text('[github]\nshare_token = "maybe"\n')
    with pytest.raises(ConfigError, match="share_token"):
        load_config(project / "firewall.toml")
