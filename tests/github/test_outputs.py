"""Step outputs: the toolkit's heredoc vectors, and round trips through the runner's reader."""

from __future__ import annotations

import datetime as dt
import random
import subprocess
import sys
from pathlib import Path

import pytest

from firewall.artefact import Artefact, RunInfo, Summary
from firewall.errors import ExitCode, WriteError
from firewall.github.actions.outputs import key_value_message, outputs_for, write_outputs

# actions/toolkit packages/core/__tests__/core.test.ts mocks uuid to this value.
UUID = "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d"
DELIMITER = f"ghadelimiter_{UUID}"


def read_outputs(text: str) -> dict[str, str]:
    """The file as the runner reads it (actions/runner src/Runner.Worker/FileCommandManager.cs,
    on Linux): ``NAME=VALUE`` lines, or ``NAME<<DELIMITER`` up to a line that is exactly
    the delimiter, the value being everything in between without its last line break."""
    values: dict[str, str] = {}
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final line break ends the last line, it starts none
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line:
            continue
        equals, heredoc = line.find("="), line.find("<<")
        if equals >= 0 and (heredoc < 0 or equals < heredoc):
            name, value = line.split("=", 1)
            values[name] = value
            continue
        assert heredoc >= 0, f"invalid line {line!r}"
        name, delimiter = line.split("<<", 1)
        assert name and delimiter
        body = []
        while lines[index] != delimiter:  # IndexError: matching delimiter not found
            body.append(lines[index])
            index += 1
        index += 1
        values[name] = "\n".join(body)
    return values


def raw(path: Path) -> str:
    """The file's text as written: read_text() would turn CR and CRLF into LF."""
    return path.read_bytes().decode("utf-8")


def fixed() -> str:
    """The delimiter the toolkit's tests get from their mocked uuid."""
    return DELIMITER


def test_heredoc_form_matches_the_toolkit() -> None:
    # core.test.ts "exportVariable produces the correct command and sets the env"
    assert (
        key_value_message("my var", "var val", delimiters=fixed)
        == f"my var<<{DELIMITER}\nvar val\n{DELIMITER}\n"
    )


def test_the_delimiter_is_refused_in_a_value_or_name_as_the_toolkit_does() -> None:
    # core.test.ts "exportVariable does not allow delimiter as value" / "... as name"
    with pytest.raises(ValueError) as value_error:
        key_value_message("my var", f"good stuff {DELIMITER} bad stuff", delimiters=fixed)
    assert str(value_error.value) == (
        f'Unexpected input: value should not contain the delimiter "{DELIMITER}"'
    )
    with pytest.raises(ValueError) as name_error:
        key_value_message(f"good stuff {DELIMITER} bad stuff", "test", delimiters=fixed)
    assert str(name_error.value) == (
        f'Unexpected input: name should not contain the delimiter "{DELIMITER}"'
    )


@pytest.mark.parametrize("name", ["", "a=b", "a<<b", "a\nb", "a\rb"])
def test_names_the_runner_would_misread_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="output name"):
        key_value_message(name, "x")


def test_each_message_gets_a_fresh_delimiter() -> None:
    first, second = key_value_message("a", "x"), key_value_message("a", "x")
    assert first.split("\n")[0].startswith("a<<ghadelimiter_")
    assert first != second


TRICKY = [
    "",
    "plain",
    "two\nlines",
    "\n",
    "\n\n",
    "trailing\n",
    "\nleading",
    "carriage\rreturn",
    "windows\r\nline",
    "ghadelimiter_",
    "ghadelimiter_00000000-0000-0000-0000-000000000000",
    "EOF",
    "x\nEOF\ny",
    "name<<EOF\nforged\nEOF",
    "\nstatus=pass\n",
    "\nstatus<<X\npass\nX",
    "=",
    "<<",
    "%0A::set-output name=x::y",
    "ünïcödé ✅ \u2028",
]


def test_values_round_trip_through_the_runner_reader(tmp_path: Path) -> None:
    path = tmp_path / "github_output"
    values = {f"v{i}": value for i, value in enumerate(TRICKY)}
    write_outputs(path, values)
    assert read_outputs(raw(path)) == values


def test_random_values_round_trip(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    alphabet = "ab=<\n\r:%,ghadelimiter_-E0F "
    values = {
        f"r{i}": "".join(rng.choice(alphabet) for _ in range(rng.randrange(40))) for i in range(300)
    }
    path = tmp_path / "github_output"
    write_outputs(path, values)
    assert read_outputs(raw(path)) == values


def test_outputs_are_appended_to_what_earlier_steps_wrote(tmp_path: Path) -> None:
    path = tmp_path / "github_output"
    path.write_text("earlier=1\n", encoding="utf-8")
    write_outputs(path, {"status": "pass"})
    write_outputs(path, {"later": "two\nlines"})
    assert read_outputs(raw(path)) == {
        "earlier": "1",
        "status": "pass",
        "later": "two\nlines",
    }


def test_a_refused_value_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "github_output"
    with pytest.raises(ValueError):
        write_outputs(path, {"good": "x", "bad": DELIMITER}, delimiters=fixed)
    assert not path.exists() or raw(path) == ""


@pytest.mark.parametrize(
    ("exit_code", "status"), [(0, "pass"), (1, "fail"), (3, "error"), (130, "error"), (2, "error")]
)
def test_status_follows_the_exit_code(exit_code: int, status: str) -> None:
    assert ExitCode(exit_code).result == status


def test_outputs_for_a_run(tmp_path: Path) -> None:
    run = RunInfo(
        mode="gate", base_seed=7, started_at=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    )
    summary = Summary(
        fail=1, quarantine=2, quarantined=3, error=4, exit_code=ExitCode.FAIL, **{"pass": 5}
    )
    artefact = Artefact(run=run, summary=summary, evals=[])
    values = outputs_for(artefact, Path("out") / "firewall-report.json")
    assert values == {
        "status": "fail",
        "exit-code": "1",
        "pass": "5",
        "fail": "1",
        "quarantine": "2",
        "quarantined": "3",
        "error": "4",
        "report": str(Path("out") / "firewall-report.json"),
    }
    path = tmp_path / "github_output"
    write_outputs(path, values)
    assert read_outputs(raw(path)) == values


def test_the_reader_sees_an_injection_through_a_fixed_delimiter() -> None:
    # Why the delimiter is random: with a fixed one a value sets a second output.
    naive = "status<<EOF\nx\nEOF\nforged=1\nEOF\n"
    with pytest.raises(AssertionError, match="invalid line 'EOF'"):
        read_outputs(naive)
    assert read_outputs("status<<EOF\nx\nEOF\nforged=1\n") == {"status": "x", "forged": "1"}


# Under a file-size limit the kernel writes what fits and refuses the rest (EFBIG), as a
# full disk does (ENOSPC): the runner would then meet a heredoc without its delimiter.
LIMITED_WRITER = """
import resource, sys
from pathlib import Path
from firewall.github.actions.outputs import write_outputs
path, room = Path(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + room, resource.RLIM_INFINITY))
try:
    write_outputs(path, {"status": "pass", "report": "x" * 500})
except OSError as exc:  # what firewall.github.publish catches, turning it into a warning
    print(exc)
"""


def test_outputs_cut_off_part_way_leave_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "github_output"
    path.write_text("earlier=1\n", encoding="utf-8")
    limited = subprocess.run(
        [sys.executable, "-c", LIMITED_WRITER, str(path), "100"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert raw(path) == "earlier=1\n"
    assert read_outputs(raw(path)) == {"earlier": "1"}
    assert limited.stdout.startswith(
        f"{path}: could not append the step outputs (File too large); what it had written "
        "was cut back, so the file is as it was;"
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_outputs_on_a_full_disk_fail_with_the_file_named() -> None:
    with pytest.raises(WriteError) as caught:
        write_outputs(Path("/dev/full"), {"status": "pass"})
    assert isinstance(caught.value, OSError)
    assert str(caught.value).startswith(
        "/dev/full: could not append the step outputs (No space left on device); "
        "nothing of it was written; free space on its disk"
    )
