"""A `firewall` process imports its command with the cyclic collector off, then freezes
what the imports made and turns the collector back on (``firewall.cli._import_uncollected``);
a test's CliRunner, in a long-lived process, is left alone."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from firewall.cli import main


def test_a_command_line_runs_its_command_with_the_collector_on(tmp_path: Path) -> None:
    code = (
        "import gc, sys\nfrom firewall.cli import main\n"
        "sys.argv = ['firewall', 'schema', 'trial-result']\n"
        "try:\n    main(standalone_mode=False)\nexcept SystemExit:\n    pass\n"
        "sys.__stderr__.write(f'{gc.isenabled()} {gc.get_freeze_count() > 0}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert done.stderr.split()[-2:] == ["True", "True"]


def test_a_command_line_that_names_no_command_leaves_the_collector_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "argv", ["firewall", "--version"])
    frozen = gc.get_freeze_count()
    try:
        with pytest.raises(SystemExit):
            main()
        assert gc.isenabled()
    finally:
        if gc.get_freeze_count() > frozen:
            gc.unfreeze()


def test_cli_runner_leaves_the_collector_alone() -> None:
    frozen = gc.get_freeze_count()
    result = CliRunner().invoke(main, ["schema", "trial-result"])
    assert result.exit_code == 0, result.output
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
