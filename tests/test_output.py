"""The sink: which stream carries what, progress only on a terminal, no line a command."""

from __future__ import annotations

import os

import pytest

from firewall import output


def test_progress_writes_to_stderr_only_when_enabled(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = output.TrialCounter(enabled=False)
    quiet.start(2)
    quiet.step("a", errored=False)
    assert capsys.readouterr() == ("", "")

    shown = output.TrialCounter(enabled=True)
    shown.start(2)
    shown.step("a", errored=False)
    shown.step("b", errored=True)
    shown.finish()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "[2/2] 1 errored" in captured.err and "last: b" in captured.err
    assert captured.err.endswith("\r" + " " * shown.width() + "\r")


@pytest.mark.parametrize("columns", [100, 60, 24])
def test_progress_never_wraps_in_a_narrow_terminal(
    columns: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``\\r`` returns to the start of the last row only: a line that wraps leaves debris."""
    monkeypatch.setenv("COLUMNS", str(columns))
    shown = output.TrialCounter(enabled=True)
    shown.start(519)
    for index in range(519):
        shown.step(f"tests/test_checkout.py/test_case_with_a_long_name.{index:04}", errored=False)
    shown.finish()
    err = capsys.readouterr().err
    assert "\n" not in err
    drawn = err.split("\r")[1:-1]  # every update, then the clearing line
    assert len(drawn) == 520
    assert {len(line) for line in drawn} == {columns - 1}  # each covers the one before
    assert drawn[0].startswith("[  1/519] 0 errored  last: "[: columns - 1])


def test_the_width_is_stderrs_terminal_when_columns_is_not_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((37, 9)))
    assert output.stderr_columns() == 37
    assert output.TrialCounter(enabled=True).width() == 36
    monkeypatch.setenv("COLUMNS", "52")
    assert output.stderr_columns() == 52


def test_the_width_is_a_resized_terminals(capsys: pytest.CaptureFixture[str]) -> None:
    sizes = iter([80, 30])
    shown = output.TrialCounter(enabled=True, columns=lambda: next(sizes))
    shown.start(2)
    shown.step("a" * 100, errored=False)
    shown.step("b" * 100, errored=False)
    first, second = capsys.readouterr().err.split("\r")[1:]
    assert (len(first), len(second)) == (79, 29)


def test_progress_is_off_when_stderr_is_not_a_terminal() -> None:
    assert output.TrialCounter().enabled is False  # pytest's captured stderr is no terminal


def test_finish_clears_the_line_once(capsys: pytest.CaptureFixture[str]) -> None:
    shown = output.TrialCounter(enabled=True)
    shown.start(1)
    shown.step("a", errored=False)
    shown.finish()
    capsys.readouterr()
    shown.finish()  # the context manager finishes again after the pipeline did
    assert capsys.readouterr().err == ""


def test_each_kind_of_output_has_its_stream(capsys: pytest.CaptureFixture[str]) -> None:
    output.echo("result")
    output.echo_json('{"a": 1}')
    output.note("remark")
    output.warn("careful")
    output.error("broken")
    output.annotate(["::error title=t::m"])
    printed = capsys.readouterr()
    assert printed.out == 'result\n{"a": 1}\n'
    assert printed.err == (
        "remark\nfirewall: warning: careful\nfirewall: error: broken\n::error title=t::m\n"
    )


@pytest.mark.parametrize("actions", [False, True])
def test_text_is_made_inert_in_and_out_of_a_github_job(
    actions: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A step may run the firewall where GITHUB_ACTIONS does not reach (a container)."""
    if actions:
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
    output.echo("::error::forged\nsee ##[error]forged")
    output.warn("x\n  ::warning::forged")
    output.echo_json('{"reason": "##[error]forged"}')
    printed = capsys.readouterr()
    joiner = output.WORD_JOINER
    assert printed.out == (
        f"{joiner}::error::forged\nsee #{joiner}#[error]forged\n"
        '{"reason": "\\u0023#[error]forged"}\n'
    )
    assert printed.err == f"firewall: warning: x\n  {joiner}::warning::forged\n"


def test_text_without_a_command_is_printed_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    text = "STATUS  EVAL\nFAIL    a::b  median 0.5 ## [x] #[y] :: z"
    output.echo(text)
    assert capsys.readouterr().out == text + "\n"
