"""`firewall --help`, `--version` and `list` load no more than they show."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from firewall.cli import COMMANDS, SUMMARIES, main


def test_every_command_has_the_summary_its_docstring_gives() -> None:
    ctx = click.Context(main)
    assert set(SUMMARIES) == set(COMMANDS)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None
        assert command.get_short_help_str(limit=500) == SUMMARIES[name], name


def loaded_after(args: list[str], cwd: str) -> set[str]:
    """The modules a fresh interpreter holds once `firewall ARGS` has run."""
    code = (
        "import sys\nfrom firewall.cli import main\n"
        f"try:\n    main({args!r}, standalone_mode=False)\nexcept SystemExit:\n    pass\n"
        "sys.__stderr__.write('\\n'.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, check=True
    )
    return set(done.stderr.split())


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_help_and_version_import_no_command_and_no_config_model(
    args: list[str], tmp_path: object
) -> None:
    loaded = loaded_after(args, str(tmp_path))
    assert not any(name.startswith("firewall.cli.") for name in loaded)
    assert "pydantic" not in loaded
    assert "firewall.config" not in loaded


def test_list_loads_no_run_pipeline_and_no_github(project: object) -> None:
    loaded = loaded_after(["list"], str(project))
    for heavy in ("firewall.pipeline.run", "firewall.report.terminal", "github"):
        assert heavy not in loaded, heavy


def test_gate_loads_no_event_loop_and_no_github_client(project: Path) -> None:
    """`firewall gate` decides trials read from files: no pool worker's asyncio, and with
    --no-issues no PyGithub (`firewall.github.client` alone imports it)."""
    (project / "firewall.toml").write_text(
        'k = 3\n[[evals]]\nid = "good"\ncommand = "echo \'{\\"score\\": 1}\'"\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, ["probe", "--out", "part.json"])
    assert result.exit_code == 0, result.output
    loaded = loaded_after(["gate", "part.json", "--no-issues"], str(project))
    assert "firewall.pipeline.run" in loaded  # it did decide
    for heavy in ("asyncio", "github", "firewall.github.client"):
        assert heavy not in loaded, heavy
