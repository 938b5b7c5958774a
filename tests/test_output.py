"""The sink: progress on stderr only on a terminal, eval text shown so that no line is a command."""

from __future__ import annotations

import pytest

from firewall import output


def test_progress_writes_to_stderr_only_when_enabled(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = output.Progress(enabled=False)
    quiet.start(2)
    quiet.step("a", errored=False)
    assert capsys.readouterr() == ("", "")

    shown = output.Progress(enabled=True)
    shown.start(2)
    shown.step("a", errored=False)
    shown.step("b", errored=True)
    shown.finish()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "[2/2] 1 errored" in captured.err and "last: b" in captured.err
    assert captured.err.endswith("\r" + " " * output.Progress.WIDTH + "\r")


def test_progress_is_off_when_stderr_is_not_a_terminal() -> None:
    assert output.Progress().enabled is False  # pytest's captured stderr is no terminal


def test_finish_clears_the_line_once(capsys: pytest.CaptureFixture[str]) -> None:
    shown = output.Progress(enabled=True)
    shown.start(1)
    shown.step("a", errored=False)
    shown.finish()
    capsys.readouterr()
    shown.finish()  # the context manager finishes again after the pipeline did
    assert capsys.readouterr().err == ""


def test_stop_commands_never_uses_a_token_found_in_the_text() -> None:
    tokens = iter(["abcd", "abcd", "ef01"])
    assert output.stop_commands("x abcd y", tokens=lambda: next(tokens)) == (
        "::stop-commands::ef01\nx abcd y\n::ef01::"
    )


def test_untrusted_text_is_wrapped_only_in_actions(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    output.echo_untrusted("::error::forged")
    assert capsys.readouterr().out == "::error::forged\n"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    output.echo_untrusted("::error::forged")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("::stop-commands::") and lines[1] == "::error::forged"
    assert lines[2] == f"::{lines[0].removeprefix('::stop-commands::')}::"
