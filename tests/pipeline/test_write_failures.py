"""Files that cannot be written: one line naming the file and what to do, never a traceback;
the table printed all the same; no torn file, no temp file and no lock file left behind.

    registry   exit 2, before anything else is written (no report, history or GitHub)
    report     exit 2, once the registry, the history and GitHub have been told
    history    a warning; the decision and exit code stand
    summary, outputs   a warning each; the file is as it was, or has the whole block

The failures are real: a file-size limit (RLIMIT_FSIZE, set in the process of the
installed command, under which the kernel writes what fits and then refuses with
EFBIG, as a full disk refuses with ENOSPC), /dev/full, paths that run through a
regular file, and the immutable flag (`chattr +i`, where the file system and the
process allow it). They hold as root, where a read-only mode does not.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import invoke_split

from firewall.store.atomic import LOCK_DIR_VARIABLE
from firewall.store.history import HistoryRow

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
# Trial i scores 0.1, 0.5, 0.9: quarantined (iqr 0.4). The other eval passes.
CONFIG = """k = 3
seed = 7
adaptive = false
[[evals]]
id = "steady"
command = "echo 0.9"
[[evals]]
id = "scatters"
command = "echo 0.$((FIREWALL_TRIAL * 4 + 1))"
"""
OLD_REGISTRY = (
    json.dumps(
        {
            "schema_version": 1,
            "evals": {"old": {"since": "2026-11-01T00:00:00Z", "source": "manual", "reason": "x"}},
        },
        indent=2,
        sort_keys=True,
    )
    + "\n"
)
EARLIER = "2026-11-29T13:00:00Z"
LAUNCH = (
    "import os, resource, sys; "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY)); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


def limited(
    project: Path, limit: int, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed command, no file of it larger than ``limit`` bytes, its locks (as a
    user's are) beside the files they guard."""
    environment = {k: v for k, v in os.environ.items() if k != LOCK_DIR_VARIABLE}
    return subprocess.run(
        [sys.executable, "-c", LAUNCH, str(limit), FIREWALL, *args],
        cwd=project,
        env=environment | (env or {}),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def files(project: Path) -> list[str]:
    """Every file under ``project``: a temp or lock file left behind shows here."""
    return sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())


def one_error(stderr: str) -> str:
    """The one error line a failed command printed, after checking there is only one."""
    errors = [line for line in stderr.splitlines() if line.startswith("firewall: error: ")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    return errors[0].removeprefix("firewall: error: ")


@pytest.fixture
def config(project: Path) -> Path:
    (project / "firewall.toml").write_text(CONFIG, encoding="utf-8")
    return project


pytestmark = pytest.mark.usefixtures("config")


@pytest.mark.e2e
def test_a_registry_that_cannot_be_written_stops_the_record_before_any_other_file(
    project: Path,
) -> None:
    registry = project / "quarantine.json"
    registry.write_text(OLD_REGISTRY, encoding="utf-8")
    # The registry with `scatters` added is about 700 bytes: over the limit.
    proc = limited(project, len(OLD_REGISTRY) + 100, "run", "--no-issues")
    assert proc.returncode == 2, proc.stderr
    assert "QUARANTINE  scatters" in proc.stdout and "PASS        steady" in proc.stdout
    message = one_error(proc.stderr)
    assert message.startswith(
        f"{registry}: could not write the quarantine registry (File too large); the file was "
        "left as it was; the file is over this process's file-size limit: raise it (`ulimit -f`)"
    )
    assert message.endswith(
        "this run wrote nothing else (no report, no history, nothing for GitHub): "
        "run it again once that is fixed"
    )
    assert registry.read_text(encoding="utf-8") == OLD_REGISTRY
    assert files(project) == ["firewall.toml", "quarantine.json"]


@pytest.mark.e2e
def test_a_report_that_cannot_be_written_is_an_error_once_the_rest_is_recorded(
    project: Path,
) -> None:
    # The registry (about 460 bytes) and the history (two rows) fit; the report (6 KB) not.
    proc = limited(project, 2000, "run", "--no-issues")
    assert proc.returncode == 2, proc.stderr
    assert "QUARANTINE  scatters" in proc.stdout
    assert "report: not written (below: why)" in proc.stdout
    report = project / "firewall-report.json"
    assert one_error(proc.stderr).startswith(
        f"{report}: could not write the report (File too large); no file was written;"
    )
    assert list(json.loads((project / "quarantine.json").read_text())["evals"]) == ["scatters"]
    history = (project / ".firewall" / "history.jsonl").read_text().splitlines()
    assert sorted(json.loads(row)["eval_id"] for row in history) == ["scatters", "steady"]
    assert files(project) == [".firewall/history.jsonl", "firewall.toml", "quarantine.json"]


@pytest.mark.e2e
def test_a_history_that_cannot_be_appended_to_is_a_warning(project: Path) -> None:
    history = project / ".firewall" / "history.jsonl"
    history.parent.mkdir()
    row = HistoryRow(
        eval_id="steady", run_id="earlier", mode="run", status="pass", k=3, build_ts=EARLIER
    )
    history.write_text(f"{row.to_json()}\n" * 40, encoding="utf-8")  # over the limit already
    before = history.read_bytes()
    proc = limited(project, len(before) - 1, "run", "--no-issues")
    assert proc.returncode == 0, proc.stderr  # the decision's: a quarantine is no failure
    assert "QUARANTINE  scatters" in proc.stdout and "firewall: error" not in proc.stderr
    (warning,) = (line for line in proc.stderr.splitlines() if "could not append" in line)
    assert warning.startswith(f"firewall: warning: {history}: could not append")
    assert warning.endswith("this run's decision and exit code stand")
    assert history.read_bytes() == before
    report = json.loads((project / "firewall-report.json").read_text())
    assert report["summary"]["quarantine"] == 1
    assert "scatters" in json.loads((project / "quarantine.json").read_text())["evals"]
    assert ".firewall/.history.jsonl.lock" not in files(project)


@pytest.mark.e2e
def test_step_outputs_cut_off_part_way_leave_the_file_as_the_step_had_it(project: Path) -> None:
    output = project / "github_output"
    summary = project / "step_summary"
    limit = 8000  # the report (6 KB), the history and the summary fit
    output.write_text("earlier=1\n" * ((limit - 100) // 10), encoding="utf-8")
    before = output.read_bytes()
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    proc = limited(project, limit, "run", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "QUARANTINE  scatters" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("::warning")]
    assert any(
        f"{output}: could not append the step outputs (File too large); what it had written "
        "was cut back, so the file is as it was" in line
        for line in warnings
    ), proc.stderr
    assert output.read_bytes() == before  # no heredoc without its delimiter for the runner
    assert summary.read_text(encoding="utf-8").startswith("## ✅ Flakiness Firewall: PASS")
    assert summary.read_text(encoding="utf-8").endswith("\n")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_summary_on_a_full_disk_is_a_warning_and_the_outputs_are_written(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = project / "github_output"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", "/dev/full")
    result = invoke_split("run")
    assert result.exit_code == 0, result.stderr
    assert (
        "/dev/full: could not append the job summary (No space left on device); "
        "nothing of it was written" in result.stderr
    )
    lines = output.read_text(encoding="utf-8").splitlines()  # every output, whole
    assert len(lines) == 3 * 8 and lines[1] == "pass"
    assert all(lines[i + 2] == lines[i].split("<<", 1)[1] for i in range(0, len(lines), 3)), lines


def break_the_lock_directory(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Locks go to a directory under a regular file: every lock fails to be made (ENOTDIR)."""
    (project / "blocker").write_text("")
    monkeypatch.setenv(LOCK_DIR_VARIABLE, str(project / "blocker" / "locks"))
    return project / "quarantine.json"


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_registry_that_cannot_be_locked_stops_the_record_and_shows_the_result(
    project: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    registry = break_the_lock_directory(project, monkeypatch)
    result = invoke_split("run", "--no-issues", "--format", fmt)
    assert result.exit_code == 2, result.stderr
    if fmt == "json":
        shown = json.loads(result.stdout)
        assert [e["status"] for e in shown["evals"]] == ["pass", "quarantine"]
    else:
        assert "QUARANTINE  scatters" in result.stdout
    message = one_error(result.stderr)
    assert message.startswith(f"{registry}: could not lock the quarantine registry:")
    assert "(Not a directory)" in message and "this run wrote nothing else" in message
    assert files(project) == ["blocker", "firewall.toml"]


def test_a_gate_that_cannot_lock_the_registry_writes_nothing_either(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probed = invoke_split("probe", "--out", "part.json")
    assert probed.exit_code == 0, probed.stderr
    break_the_lock_directory(project, monkeypatch)
    result = invoke_split("gate", "part.json", "--no-issues")
    assert result.exit_code == 2, result.stderr
    assert "QUARANTINE  scatters" in result.stdout
    assert "could not lock the quarantine registry" in one_error(result.stderr)
    assert files(project) == ["blocker", "firewall.toml", "part.json"]


def test_a_nightly_that_cannot_change_the_registry_counts_nothing(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = project / "quarantine.json"
    registry.write_text(OLD_REGISTRY.replace('"old"', '"steady"'), encoding="utf-8")
    before = registry.read_bytes()
    break_the_lock_directory(project, monkeypatch)
    result = invoke_split("nightly", "--no-issues", "--seed", "7")
    assert result.exit_code == 2, result.stderr
    assert "steady" in result.stdout  # tonight's probe is shown all the same
    message = one_error(result.stderr)
    assert message.startswith(f"{registry}: could not lock the quarantine registry:")
    assert "tonight wrote nothing else (no report, no history, no issue updated)" in message
    assert registry.read_bytes() == before
    assert files(project) == ["blocker", "firewall.toml", "quarantine.json"]


def test_a_probe_part_that_cannot_be_written_names_it(project: Path) -> None:
    (project / "parts").write_text("a file where a directory belongs")
    result = invoke_split("probe", "--out", "parts/part-1.json")
    assert result.exit_code == 2, result.stderr
    assert one_error(result.stderr).startswith(
        "parts/part-1.json: could not write the file (File exists); no file was written;"
    )


def test_a_normal_run_leaves_no_lock_file_beside_what_it_wrote(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(LOCK_DIR_VARIABLE)
    result = invoke_split("run", "--no-issues")
    assert result.exit_code == 0, result.stderr
    assert files(project) == [
        ".firewall/history.jsonl",
        "firewall-report.json",
        "firewall.toml",
        "quarantine.json",
    ]


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """``path`` made immutable (``chattr +i``): not even root may change, replace or add to it."""
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("needs chattr")
    made = subprocess.run([chattr, "+i", str(path)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not allowed here: {made.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)


def test_an_immutable_registry_stops_the_record_with_what_to_do(project: Path) -> None:
    registry = project / "quarantine.json"
    registry.write_text(OLD_REGISTRY, encoding="utf-8")
    with immutable(registry):
        result = invoke_split("run", "--no-issues")
    assert result.exit_code == 2, result.stderr
    assert "QUARANTINE  scatters" in result.stdout
    message = one_error(result.stderr)
    assert message.startswith(
        f"{registry}: the quarantine registry is not writable by this user (mode 0644; another "
        "user's file, or immutable: `lsattr` shows an `i`, `chattr -i` clears it)"
    )
    assert "this run wrote nothing else" in message
    assert registry.read_text(encoding="utf-8") == OLD_REGISTRY
    assert files(project) == ["firewall.toml", "quarantine.json"]


def test_an_immutable_directory_refuses_the_lock_of_the_registry_in_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(LOCK_DIR_VARIABLE)
    (project / "firewall.toml").write_text(
        'registry = "state/quarantine.json"\n' + CONFIG, encoding="utf-8"
    )
    state = project / "state"
    state.mkdir()
    with immutable(state):
        result = invoke_split("run", "--no-issues")
    assert result.exit_code == 2, result.stderr
    message = one_error(result.stderr)
    assert message.startswith(
        f"{state / 'quarantine.json'}: could not lock the quarantine registry: its lock file "
        f"{state / '.quarantine.json.lock'} cannot be made (Operation not permitted); it goes "
        "beside the quarantine registry, whose directory must be writable to change it"
    )
    assert files(project) == ["firewall.toml"]


def test_an_immutable_report_is_an_error_once_the_rest_is_recorded(project: Path) -> None:
    report = project / "firewall-report.json"
    report.write_text("{}\n", encoding="utf-8")
    with immutable(report):
        result = invoke_split("run", "--no-issues")
        assert report.read_text(encoding="utf-8") == "{}\n"
    assert result.exit_code == 2, result.stderr
    assert "QUARANTINE  scatters" in result.stdout
    assert one_error(result.stderr) == (
        f"{report}: could not write the report (Operation not permitted); the file was left as "
        "it was; make the file and its directory writable for this user (an immutable file "
        "shows `i` in `lsattr` and needs `chattr -i`)"
    )
    assert "scatters" in json.loads((project / "quarantine.json").read_text())["evals"]
    assert (project / ".firewall" / "history.jsonl").read_text().count("\n") == 2


def test_issue_numbers_that_cannot_be_kept_are_a_warning(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from github_standin import GitHubStandIn

    from firewall.pipeline import context, effects

    registry = project / "quarantine.json"
    registry.write_text(OLD_REGISTRY.replace('"old"', '"scatters"'), encoding="utf-8")
    before = registry.read_bytes()
    with GitHubStandIn() as hub:
        env = {
            "GITHUB_TOKEN": hub.token,
            "GITHUB_REPOSITORY": hub.repository,
            "GITHUB_API_URL": hub.url,
        }
        ctx = context.load(cwd=project, env=env, with_evals=False)
        with immutable(registry):
            effects.publish_add(ctx, "scatters", issues=True)  # opens the issue, then keeps it
        (issue,) = hub.open_issues()
    warning = capsys.readouterr().err
    assert f"firewall: warning: {registry}: the quarantine registry is not writable" in warning
    assert warning.rstrip().endswith(
        "the issue numbers learnt were not kept: the next run finds the issues again by "
        "their marker"
    )
    assert registry.read_bytes() == before and issue.number
