"""The history store: typed rows from writer to reader, appends that never interleave
nor leave a torn row, and recent windows read at the cost of the window."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from firewall.errors import HistoryWriteError
from firewall.store.history import APPEND_LAG, HistoryRow, LocalHistory
from firewall.timeutil import to_text

AT = "2026-11-29T12:00:00Z"
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)


def run(run_id: str, at: dt.datetime, evals: int = 3, median: float = 0.8) -> list[HistoryRow]:
    return [
        HistoryRow(
            eval_id=f"e{i}",
            run_id=run_id,
            mode="run",
            status="pass",
            k=7,
            build_ts=to_text(at),
            median=median,
            drift={"category": 0.0},
        )
        for i in range(evals)
    ]


def test_scan_filters_by_eval_and_last_run_reads_from_the_end(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    rows = [
        HistoryRow(
            eval_id=f"e{n % 3}", run_id=f"r{n // 3}", mode="run", status="pass", k=7, build_ts=AT
        )
        for n in range(3000)
    ]
    store = LocalHistory(path)
    store.append(rows)
    with path.open("a") as handle:
        handle.write('{"eval_id": "e1", "run_id": "hand", "status": "fail"}\n{"torn": ')
    picked = list(store.scan({"e1"}))
    assert len(picked) == 1001 and {r.eval_id for r in picked} == {"e1"}
    assert [r.run_id for r in store.last_run(chunk=64)] == ["hand"]
    store.append(rows[-3:])
    assert [r.eval_id for r in store.last_run(chunk=64)] == ["e0", "e1", "e2"]
    assert LocalHistory(tmp_path / "missing.jsonl").last_run() == []


# A writer process: waits until the test closes its stdin (so that all writers start
# together), then appends APPENDS runs of ROWS rows each, every row a few KiB long so
# that one append is far larger than any write the OS promises not to split.
WRITER = """
import sys
from pathlib import Path
from firewall.store.history import HistoryRow, LocalHistory
path, writer, appends, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
drift = {f"field-{i:03}": 0.5 for i in range(150)}
store = LocalHistory(Path(path))
sys.stdin.read()
for a in range(appends):
    store.append([
        HistoryRow(eval_id=f"{writer}-{r}", run_id=f"{writer}-{a}", mode="run",
                   status="pass", k=7, build_ts="2026-11-29T12:00:00Z", drift=drift)
        for r in range(rows)
    ])
"""


def test_concurrent_appends_from_processes_lose_and_interleave_nothing(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys
    from collections import Counter

    path = tmp_path / ".firewall" / "history.jsonl"
    writers, appends, rows = 4, 50, 8
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"w{w}", str(appends), str(rows)],
            stdin=subprocess.PIPE,
        )
        for w in range(writers)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()  # go
    assert [proc.wait(timeout=120) for proc in procs] == [0] * writers

    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # the file ends with a newline
    parsed = [json.loads(line) for line in lines[:-1]]  # every line is one whole row
    assert len(parsed) == writers * appends * rows
    keys = Counter((row["run_id"], row["eval_id"]) for row in parsed)
    assert keys == {
        (f"w{w}-{a}", f"w{w}-{r}"): 1
        for w in range(writers)
        for a in range(appends)
        for r in range(rows)
    }
    # Each append's rows are contiguous and in order: one run, one write.
    for start in range(0, len(parsed), rows):
        block = parsed[start : start + rows]
        writer = block[0]["run_id"].split("-")[0]
        assert {row["run_id"] for row in block} == {block[0]["run_id"]}
        assert [row["eval_id"] for row in block] == [f"{writer}-{r}" for r in range(rows)]
    assert len(list(LocalHistory(path).scan())) == writers * appends * rows


def test_recent_is_the_window_of_scan_for_any_block_size(tmp_path: Path) -> None:
    # Runs append when they finish, so starts come slightly out of order (up to 6 hours);
    # some lines are hand-written (spaced JSON), one is blank.
    rng = random.Random(11)
    store = LocalHistory(tmp_path / "history.jsonl", warn=pytest.fail)
    for n in range(300):
        started = NOW - dt.timedelta(hours=300 - n) - dt.timedelta(hours=rng.uniform(0, 6))
        store.append(run(f"r{n}", started, evals=1 + n % 4, median=n / 300))
        if n % 50 == 7:
            with store.path.open("a") as handle:
                stamp = to_text(started)
                handle.write(f'{{"eval_id": "e1", "run_id": "h{n}", "build_ts": "{stamp}"}}\n\n')
    for since_hours in (1, 30, 100, 299, 400):
        since = NOW - dt.timedelta(hours=since_hours)
        for ids in ({"e1"}, {"e0", "e3"}, None):
            expected = [r for r in store.scan(ids) if r.build_ts >= to_text(since)]
            for chunk in (16, 200, 4096, 1 << 20):
                assert store.recent(ids, since=since, chunk=chunk) == expected


def test_recent_stops_reading_before_the_window(tmp_path: Path) -> None:
    # A line that is no row, far older than the window: scan meets it and says so,
    # a read of the window never reaches it.
    said: list[str] = []
    store = LocalHistory(tmp_path / "history.jsonl", warn=said.append)
    store.append(run("ancient", NOW - dt.timedelta(days=400)))
    with store.path.open("a") as handle:
        handle.write('{"eval_id":"e1","run_id":"torn-by-an-old-version","mode":"ru\n')
    for day in range(365, 0, -1):
        store.append(run(f"d{day}", NOW - dt.timedelta(days=day)))
    window = store.recent({"e1"}, since=NOW - dt.timedelta(days=14), chunk=512)
    assert [r.run_id for r in window] == [f"d{day}" for day in range(14, 0, -1)]
    assert said == []
    assert len(list(store.scan({"e1"}))) == 366
    assert len(said) == 1 and "skipped 1 line(s) that are not history rows" in said[0]
    assert str(store.path) in said[0] and "firewall history compact" in said[0]


def test_a_torn_row_in_the_middle_is_skipped_with_one_warning(tmp_path: Path) -> None:
    said: list[str] = []
    store = LocalHistory(tmp_path / "history.jsonl", warn=said.append)
    store.append(run("r1", NOW - dt.timedelta(hours=2)))
    with store.path.open("a") as handle:  # what an older version left on a full disk
        handle.write('{"eval_id":"e1","run_id":"r2","mode":"run","sta')
    store.append(run("r3", NOW - dt.timedelta(hours=1)))  # glued onto nothing: a line of its own
    assert [r.run_id for r in store.last_run()] == ["r3"] * 3
    window = store.recent(None, since=NOW - dt.timedelta(days=1))
    assert [r.run_id for r in window] == ["r1"] * 3 + ["r3"] * 3
    assert [r.run_id for r in store.scan()] == ["r1"] * 3 + ["r3"] * 3
    assert len(said) == 1  # once per store, however many reads meet it
    tail = LocalHistory(tmp_path / "tail.jsonl", warn=pytest.fail)
    tail.append(run("r1", NOW))
    with tail.path.open("a") as handle:  # a torn tail may be a write in progress: no warning
        handle.write('{"eval_id":"e1","run_id":"r2"')
    assert [r.run_id for r in tail.recent(None, since=NOW)] == ["r1"] * 3
    assert [r.run_id for r in tail.scan()] == [r.run_id for r in tail.last_run()] == ["r1"] * 3


def test_the_backward_read_allows_for_runs_that_finish_late(tmp_path: Path) -> None:
    # A long run started before the window but appended after a short run inside it.
    store = LocalHistory(tmp_path / "history.jsonl")
    since = NOW - dt.timedelta(days=14)
    store.append(run("short", since + dt.timedelta(hours=1)))
    store.append(run("long", since - APPEND_LAG / 2))
    assert [r.run_id for r in store.recent({"e0"}, since=since, chunk=64)] == ["short"]


# Appends under a file-size limit that the run's rows cross: the kernel writes what
# fits, then refuses the rest with EFBIG (Python ignores SIGXFSZ), as a full disk does.
LIMITED_WRITER = """
import resource, sys
from pathlib import Path
from firewall.errors import HistoryWriteError
from firewall.store.history import HistoryRow, LocalHistory
path, room = Path(sys.argv[1]), int(sys.argv[2])
rows = [HistoryRow(eval_id=f"e{i}", run_id="big", mode="run", status="pass", k=7,
                   build_ts="2026-11-29T13:00:00Z", drift={f"f{j}": 0.5 for j in range(40)})
        for i in range(50)]
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + room, resource.RLIM_INFINITY))
try:
    LocalHistory(path).append(rows)
except HistoryWriteError as exc:
    assert exc.path == path
    print(exc)
"""


def test_an_append_that_fails_part_way_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / ".firewall" / "history.jsonl"
    store = LocalHistory(path, warn=pytest.fail)
    store.append(run("r1", NOW - dt.timedelta(hours=1)))
    before = path.read_bytes()
    limited = subprocess.run(
        [sys.executable, "-c", LIMITED_WRITER, str(path), "100"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert path.read_bytes() == before
    message = limited.stdout.strip()
    assert message.startswith(f"{path}: could not append this run's 50 history rows")
    assert "the file is as it was before this run" in message and "Free space" in message
    store.append(run("r2", NOW))  # the next run's rows follow whole rows, not a torn one
    assert [r.run_id for r in store.scan()] == ["r1"] * 3 + ["r2"] * 3
    assert path.read_bytes().count(b"\n") == 6


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_history_that_cannot_be_cut_back_says_so() -> None:
    # /dev/full refuses every write with ENOSPC, and cannot be truncated either.
    with pytest.raises(HistoryWriteError, match="could not be cut back") as raised:
        LocalHistory(Path("/dev/full")).append(run("r1", NOW))
    assert raised.value.path == Path("/dev/full") and "No space left" in str(raised.value)


def test_shared_history_reads_the_window_of_the_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitrepos import GIT_ENV, fresh_clone, make_origin

    from firewall.store.gitstate import GitState
    from firewall.store.shared import SharedHistory

    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    clone = fresh_clone(make_origin(tmp_path, {"firewall.toml": ""}), tmp_path / "ci")
    shared = SharedHistory(
        LocalHistory(clone / "history.jsonl"),
        GitState(clone, "origin", "firewall-state"),
        writes=lambda: True,
        notice=pytest.fail,
    )
    for day in (40, 20, 10, 2):
        shared.append(run(f"d{day}", NOW - dt.timedelta(days=day)))
    window = shared.recent({"e0", "e2"}, since=NOW - dt.timedelta(days=14))
    assert [(r.run_id, r.eval_id) for r in window] == [
        ("d10", "e0"),
        ("d10", "e2"),
        ("d2", "e0"),
        ("d2", "e2"),
    ]


# --- a history this user may not read ------------------------------------------------
#
# The suite runs as root, whom a mode of 000 does not stop. So the reader runs in a child
# that has become `nobody` (65534) over a history root owns with mode 600. The child is
# forked, not exec'd: the interpreter lives under /root, which `nobody` may not enter,
# so the `preexec_fn` route (setuid, then exec python) cannot start at all here. A fork
# needs no file of the interpreter's; the command runs once as root first, so that every
# module it imports is loaded before the fork. Skipped only when the process is not
# root (it cannot change user) or the platform has no fork.

NOBODY = 65534


def as_nobody(work: Callable[[], object]) -> object:
    """What ``work()`` returns (JSON) when run in a forked child that is user 65534."""
    if not hasattr(os, "fork") or os.geteuid() != 0:
        pytest.skip("needs root to run a child as another user")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            answer = json.dumps({"value": work()})
        except BaseException as exc:  # everything goes back to the test
            answer, code = json.dumps({"error": f"{type(exc).__name__}: {exc}"}), 1
        with os.fdopen(write, "w") as out:
            out.write(answer)
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as answer_in:
        answer = json.loads(answer_in.read() or '{"error": "no answer"}')
    os.waitpid(pid, 0)
    assert "error" not in answer, answer["error"]
    return answer["value"]


@pytest.fixture
def unreadable() -> Iterator[Path]:
    """A directory `nobody` may enter and write in, holding a history only root may read."""
    where = Path(tempfile.mkdtemp(prefix="firewall-eacces-", dir="/tmp"))
    try:
        where.chmod(0o755)
        history = where / "rows.jsonl"
        LocalHistory(history).append(run("r1", NOW - dt.timedelta(hours=1)))
        history.chmod(0o600)
        if os.geteuid() == 0:
            os.chown(where, NOBODY, NOBODY)
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_a_history_this_user_may_not_read_is_said_by_name_and_read_as_empty(
    unreadable: Path,
) -> None:
    history = unreadable / "rows.jsonl"

    def read() -> object:
        said: list[str] = []
        store = LocalHistory(history, warn=said.append)
        rows = [
            list(store.scan()),
            store.recent(since=NOW - dt.timedelta(days=14)),
            store.last_run(),
            store.medians({"e0"}, since=NOW - dt.timedelta(days=14), last=14),
        ]
        return {"rows": [len(found) for found in rows], "said": said}

    as_root = LocalHistory(history)
    assert len(as_root.recent(since=NOW - dt.timedelta(days=14))) == 3  # root reads it
    answer = as_nobody(read)
    assert answer == {
        "rows": [0, 0, 0, 0],
        "said": [
            f"{history}: cannot read the history (Permission denied, EACCES); this command "
            "reads no history from it: make it readable, or point `history` in the config "
            "at another file"
        ],
    }


def test_a_command_whose_history_it_may_not_read_goes_on(unreadable: Path) -> None:
    from click.testing import CliRunner

    from firewall.cli import main

    (unreadable / "firewall.toml").write_text(
        'history = "rows.jsonl"\n\n[[evals]]\nid = "demo"\ncommand = "echo 0.9"\n'
    )
    os.chown(unreadable / "firewall.toml", NOBODY, NOBODY)

    def status() -> dict[str, Any]:
        os.chdir(unreadable)
        result = CliRunner().invoke(main, ["status"])
        return {"code": result.exit_code, "output": result.output}

    here = Path.cwd()
    try:
        os.chdir(unreadable)  # the same command as root first: its imports are loaded then
        assert CliRunner().invoke(main, ["status"]).exit_code == 0
    finally:
        os.chdir(here)
    answer = as_nobody(status)
    assert isinstance(answer, dict)
    assert answer["code"] == 0, answer["output"]
    assert "rows.jsonl: cannot read the history (Permission denied, EACCES)" in answer["output"]
    assert answer["output"].count("cannot read the history") == 1
    assert "last run: none recorded yet" in answer["output"]


def test_a_row_s_sd_is_the_exact_one_within_an_ulp_and_zero_for_equal_scores() -> None:
    import statistics

    from firewall.store.history import sample_sd

    rng = random.Random(7)
    for _ in range(2000):
        scores = [rng.choice([rng.random(), round(rng.random(), 2), 1.0]) for _ in range(7)]
        assert sample_sd(scores) == pytest.approx(statistics.stdev(scores), rel=1e-15, abs=0)
    assert sample_sd([0.9] * 7) == 0.0 == statistics.stdev([0.9] * 7)
    with pytest.raises(ValueError):
        sample_sd([1.0])
