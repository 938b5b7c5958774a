"""Nothing on disk can hang a command, fill its memory or crash it (issue 21, items 4 and 5).

A FIFO where a file should be, a link to ``/dev/zero``, a file larger than any the
firewall writes, a line nested past Python's recursion limit, a path the OS refuses:
each is a trial's error (an eval's result) or exit 2 with a message naming the file
(the registry, a probe part, the history, the configuration), never exit 4.

The commands that could hang run as the installed command with a subprocess timeout:
the timeout is a hang guard, not a claim about speed (a hang fails the test by it).
The memory bounds are the child's own ``ru_maxrss``, under an address-space limit
that keeps a failing run from taking the machine with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import invoke_split

import firewall

HANG_GUARD_S = 120
MEMORY_BOUND_KIB = 500 * 1024
ADDRESS_SPACE_LIMIT = 3 << 30

# Runs the command line in this process, then reports this process's peak memory.
MEASURED = f"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE_LIMIT}, {ADDRESS_SPACE_LIMIT}))
from firewall.cli import main
try:
    main(sys.argv[1:], prog_name="firewall")
except SystemExit as exc:
    code = exc.code
sys.stderr.write(f"\\nmaxrss_kib={{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}\\n")
sys.exit(code)
"""


def config(command: str, *lines: str) -> str:
    return "\n".join(
        [
            "k = 3",
            *lines,
            "[state]",
            'remote = ""',
            "[[evals]]",
            'id = "demo"',
            f"command = {json.dumps(command)}",
        ]
    )


def run_firewall(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line in a process of its own, in ``project``, on the package under test;
    a hang fails the test by the guard."""
    package_root = str(Path(firewall.__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", MEASURED, *args],
        cwd=project,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )


def peak_kib(ran: subprocess.CompletedProcess[str]) -> int:
    return int(ran.stderr.rsplit("maxrss_kib=", 1)[1].split()[0])


def trial_errors(project: Path) -> list[str]:
    report = json.loads((project / "firewall-report.json").read_text(encoding="utf-8"))
    return [t["error"] for e in report["evals"] for t in e["trials"]]


# --- an eval's result ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "extra", "said"),
    [
        ('mkfifo "$FIREWALL_RESULT"', (), "FIREWALL_RESULT is a FIFO, not a regular file"),
        (
            'ln -s /dev/zero "$FIREWALL_RESULT"',
            (),
            "FIREWALL_RESULT is a character device, not a regular file",
        ),
        ("mkfifo {result}", ('result = "junit"',), "is a FIFO, not a regular file"),
        ("ln -s /dev/zero {result}", ('result = "junit"',), "is a character device"),
    ],
    ids=["result FIFO", "result /dev/zero", "JUnit FIFO", "JUnit /dev/zero"],
)
def test_a_result_that_is_no_regular_file_is_an_errored_trial(
    project: Path, command: str, extra: tuple[str, ...], said: str
) -> None:
    text = config(command).replace('id = "demo"', 'id = "demo"\n' + "\n".join(extra))
    (project / "firewall.toml").write_text(text, encoding="utf-8")
    ran = run_firewall(project, "run", "--no-issues")
    assert ran.returncode == 3, ran.stdout + ran.stderr  # the eval errored: not a crash
    errors = trial_errors(project)
    assert len(errors) == 3 and all(said in error for error in errors), errors
    assert peak_kib(ran) < MEMORY_BOUND_KIB


def test_a_result_over_its_cap_is_refused_before_it_is_read(project: Path) -> None:
    # A sparse file: 3 GiB that cost no disk, and would cost 3 GiB of memory to read.
    command = 'truncate -s 3G "$FIREWALL_RESULT"'
    (project / "firewall.toml").write_text(config(command), encoding="utf-8")
    ran = run_firewall(project, "run", "--no-issues")
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert all(
        "FIREWALL_RESULT is 3 GiB, more than the 64 MiB it may be" in error
        for error in trial_errors(project)
    )
    assert peak_kib(ran) < MEMORY_BOUND_KIB


# --- the registry, a probe part, the history, the configuration -----------------------


@pytest.mark.parametrize(
    "args", [("run", "--no-issues"), ("status",), ("quarantine", "list")], ids=" ".join
)
def test_a_registry_that_is_a_fifo_is_refused_by_name(project: Path, args: tuple[str]) -> None:
    (project / "firewall.toml").write_text(config("echo 0.9"), encoding="utf-8")
    os.mkfifo(project / "quarantine.json")
    ran = run_firewall(project, *args)
    assert ran.returncode == 2, ran.stderr
    assert "quarantine.json: the quarantine registry is a FIFO, not a regular file" in ran.stderr


def test_a_registry_linked_to_dev_zero_is_refused_within_bounded_memory(project: Path) -> None:
    (project / "firewall.toml").write_text(config("echo 0.9"), encoding="utf-8")
    (project / "quarantine.json").symlink_to("/dev/zero")
    ran = run_firewall(project, "nightly", "--no-issues")
    assert ran.returncode == 2, ran.stderr
    assert "quarantine.json: the quarantine registry is a character device" in ran.stderr
    assert peak_kib(ran) < MEMORY_BOUND_KIB


def test_a_registry_over_its_cap_is_refused_by_name(project: Path) -> None:
    (project / "firewall.toml").write_text(config("echo 0.9"), encoding="utf-8")
    with (project / "quarantine.json").open("wb") as registry:
        registry.truncate(65 << 20)
    result = invoke_split("quarantine", "list")
    assert result.exit_code == 2, result.stderr
    assert "the quarantine registry is 65 MiB, more than the 64 MiB it may be" in result.stderr


def test_a_probe_part_that_is_a_fifo_is_refused_by_name(project: Path) -> None:
    (project / "firewall.toml").write_text(config("echo 0.9"), encoding="utf-8")
    os.mkfifo(project / "part-1.json")
    ran = run_firewall(project, "gate", "part-1.json", "--no-issues")
    assert ran.returncode == 2, ran.stderr
    assert "part-1.json: the probe part is a FIFO, not a regular file" in ran.stderr


@pytest.mark.parametrize("kind", ["FIFO", "loop of links"])
def test_a_history_that_cannot_be_read_is_refused_by_name(project: Path, kind: str) -> None:
    (project / "firewall.toml").write_text(
        config("echo 0.9", 'history = "rows.jsonl"'), encoding="utf-8"
    )
    history = project / "rows.jsonl"
    if kind == "FIFO":
        os.mkfifo(history)
    else:
        history.symlink_to("rows.jsonl")
    ran = run_firewall(project, "status")
    assert ran.returncode == 2, ran.stderr
    said = {
        "FIFO": "rows.jsonl: the history is a FIFO, not a regular file",
        "directory": "rows.jsonl: the history is a directory, not a regular file",
        "loop of links": "rows.jsonl: cannot read the history (Too many levels of symbolic "
        "links, ELOOP)",
    }[kind]
    assert said in ran.stderr


def row(eval_id: str, run_id: str) -> bytes:
    document = {"eval_id": eval_id, "run_id": run_id, "build_ts": "2099-01-01T00:00:00Z"}
    return json.dumps(document).encode() + b"\n"


def test_history_lines_nested_too_deep_or_too_long_are_skipped_and_said_once(
    project: Path,
) -> None:
    (project / "firewall.toml").write_text(
        config("echo 0.9", 'history = "rows.jsonl"'), encoding="utf-8"
    )
    (project / "rows.jsonl").write_bytes(
        row("demo", "old")
        + b"[" * 100_000
        + b"\n"
        + b'{"eval_id": "demo", "padding": "'
        + b"x" * (3 << 20)
        + b'"}\n'
        + row("demo", "last")
    )
    result = invoke_split("status")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("skipped") == 1
    assert "skipped 2 line(s) that are not history rows" in result.stderr


def test_a_history_of_one_endless_line_is_read_within_bounded_memory(project: Path) -> None:
    (project / "firewall.toml").write_text(
        config("echo 0.9", 'history = "rows.jsonl"'), encoding="utf-8"
    )
    with (project / "rows.jsonl").open("wb") as history:
        history.write(row("demo", "first"))
        history.truncate(1 << 30)  # then 1 GiB of NULs, and no newline: sparse, no disk
    ran = run_firewall(project, "status")
    assert ran.returncode == 0, ran.stderr
    assert peak_kib(ran) < MEMORY_BOUND_KIB


def test_a_config_name_too_long_for_the_os_is_refused_by_name(project: Path) -> None:
    name = "a" * 300 + ".toml"
    result = invoke_split("list", "--config", name)
    assert result.exit_code == 2, result.stderr
    assert f"{name}: cannot read the configuration (File name too long, ENAMETOOLONG)" in (
        result.stderr
    )


def test_a_config_that_is_a_fifo_is_refused_by_name(project: Path) -> None:
    os.mkfifo(project / "firewall.toml")
    ran = run_firewall(project, "list", "--config", "firewall.toml")
    assert ran.returncode == 2, ran.stderr
    assert "firewall.toml: the configuration is a FIFO, not a regular file" in ran.stderr
