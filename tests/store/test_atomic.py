"""Atomic writes and appends: all or nothing, the permissions a plain write would give, an
error naming the file; locks beside their file that leave nothing behind."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from filelock import FileLock

from firewall.errors import LockError, WriteError
from firewall.store.atomic import (
    LOCK_DIR_VARIABLE,
    append_whole,
    lock_path,
    locked,
    write_atomic,
)


def test_a_new_file_gets_the_umask_permissions(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "report.json", "{}\n")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "report.json").stat().st_mode) == 0o644


def test_an_existing_file_keeps_its_permissions(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.json"
    path.write_text("old")
    path.chmod(0o664)
    write_atomic(path, "new")
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o664


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.json"
    path.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(path, "\udcff")  # a lone surrogate cannot be encoded
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["quarantine.json"]


def test_a_lock_lives_beside_its_file_only_while_it_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(LOCK_DIR_VARIABLE)
    target = tmp_path / "quarantine.json"
    with locked(target, "quarantine registry"):
        assert lock_path(target) == tmp_path / ".quarantine.json.lock"
        assert lock_path(target).exists()
    assert list(tmp_path.iterdir()) == []  # nothing piles up, nothing to be refused later


def test_the_lock_directory_variable_moves_the_locks_there(tmp_path: Path) -> None:
    target = tmp_path / "quarantine.json"
    with locked(target, "quarantine registry"):
        held = lock_path(target)
        assert held.exists() and held.name.startswith("firewall-")
    assert held.parent == Path(os.environ[LOCK_DIR_VARIABLE])
    assert list(tmp_path.iterdir()) == [] and not held.exists()


# Each process adds one to the counter, many times, under the lock: a lost update (two
# holders at once) shows as a total short of the sum. The lock file is removed at every
# release, so a waiter often holds the old, unlinked one when it gets the lock.
COUNTER = """
import sys
from pathlib import Path
from firewall.store.atomic import locked
path = Path(sys.argv[1])
for _ in range(int(sys.argv[2])):
    with locked(path, "counter"):
        path.write_text(str(int(path.read_text()) + 1))
"""


def test_locks_that_remove_themselves_still_keep_writers_apart(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    env = {k: v for k, v in os.environ.items() if k != LOCK_DIR_VARIABLE}
    writers = [
        subprocess.Popen([sys.executable, "-c", COUNTER, str(counter), "150"], env=env)
        for _ in range(3)
    ]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0, 0]
    assert counter.read_text() == "450"
    assert [p.name for p in tmp_path.iterdir()] == ["counter"]


def test_a_lock_file_that_cannot_be_made_is_named_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv(LOCK_DIR_VARIABLE, str(blocker / "locks"))
    target = tmp_path / "quarantine.json"
    with pytest.raises(LockError) as caught, locked(target, "quarantine registry"):
        pytest.fail("the block ran without its lock")
    message = str(caught.value)
    assert message.startswith(f"{target}: could not lock the quarantine registry: its lock file")
    assert str(lock_path(target)) in message and "(Not a directory)" in message
    assert message.endswith(f"${LOCK_DIR_VARIABLE} must name a directory this user can write")
    assert caught.value.exit_code == 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_directory_refuses_the_lock_beside_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(LOCK_DIR_VARIABLE)
    target = tmp_path / "quarantine.json"
    tmp_path.chmod(0o555)
    try:
        with (
            pytest.raises(LockError, match="Permission denied") as caught,
            locked(target, "quarantine registry"),
        ):
            pytest.fail("the block ran without its lock")
    finally:
        tmp_path.chmod(0o755)
    assert str(caught.value).endswith("whose directory must be writable to change it")


def test_a_write_that_fails_names_the_file_and_keeps_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "firewall-report.json"
    path.mkdir()  # a directory stands where the file goes: os.replace refuses (EISDIR)
    (path / "keep").write_text("")
    with pytest.raises(WriteError) as caught:
        write_atomic(path, "{}\n", what="report")
    assert str(caught.value).startswith(
        f"{path}: could not write the report (Is a directory); the file was left as it was; "
        "its path must name a file in a directory"
    )
    assert caught.value.path == path and isinstance(caught.value, OSError)
    assert caught.value.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["firewall-report.json"]


def test_a_file_under_a_file_is_never_written(tmp_path: Path) -> None:
    (tmp_path / "reports").write_text("a file, not a directory")
    path = tmp_path / "reports" / "firewall-report.json"
    with pytest.raises(WriteError, match=r"could not write the report \(File exists\); no file"):
        write_atomic(path, "{}\n", what="report")


# The kernel writes what fits under a file-size limit and refuses the rest with EFBIG
# (Python ignores SIGXFSZ), as a full disk refuses with ENOSPC.
LIMITED = """
import resource, sys
from pathlib import Path
from firewall.errors import WriteError
from firewall.store.atomic import append_whole, write_atomic
how, path, limit = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
try:
    if how == "replace":
        write_atomic(path, "x" * 10_000, what="report")
    else:
        append_whole(path, b"y" * 10_000, what="job summary")
except WriteError as exc:
    assert exc.path == path
    print(exc)
"""


def limited(how: str, path: Path, limit: int) -> str:
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, how, str(path), str(limit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_a_replace_over_the_file_size_limit_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "firewall-report.json"
    path.write_text("old")
    message = limited("replace", path, 4096)
    assert message == (
        f"{path}: could not write the report (File too large); the file was left as it was; "
        "the file is over this process's file-size limit: raise it (`ulimit -f`)"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["firewall-report.json"]
    assert path.read_text() == "old"


def test_an_append_that_fails_part_way_is_cut_back(tmp_path: Path) -> None:
    path = tmp_path / "step_summary"
    path.write_bytes(b"# an earlier step\n")
    message = limited("append", path, 4096)  # 4 KiB of the 10 KB go in, then EFBIG
    assert message.startswith(
        f"{path}: could not append the job summary (File too large); what it had written "
        "was cut back, so the file is as it was;"
    )
    assert path.read_bytes() == b"# an earlier step\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_append_to_a_full_disk_writes_nothing() -> None:
    with pytest.raises(WriteError) as caught:
        append_whole(Path("/dev/full"), b"## summary\n", what="job summary")
    assert str(caught.value) == (
        "/dev/full: could not append the job summary (No space left on device); nothing of it "
        "was written; free space on its disk (or raise the quota) and run again"
    )


def test_an_append_that_cannot_be_cut_back_says_so(tmp_path: Path) -> None:
    # A pipe whose reader leaves after 1000 bytes: the write stops part-way (EPIPE), and
    # a pipe cannot be truncated. The message must not claim the file is intact.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    read: list[bytes] = []

    def reader() -> None:
        with fifo.open("rb") as stream:
            read.append(stream.read(1000))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        with pytest.raises(WriteError) as caught:
            append_whole(fifo, b"z" * (1 << 20), what="step outputs")
    finally:
        thread.join(timeout=60)
    assert read == [b"z" * 1000]
    assert (
        "(Broken pipe); it could not be cut back, so the file may end in a part of the step "
        "outputs;" in str(caught.value)
    )


def test_a_lock_held_elsewhere_times_out_with_a_message_that_says_what_to_do(
    tmp_path: Path,
) -> None:
    target = tmp_path / "quarantine.json"
    other = FileLock(lock_path(target))  # another process's lock, as far as filelock can tell
    with other, pytest.raises(LockError) as caught, locked(target, "registry", timeout=0.05):
        pass
    message = str(caught.value)
    assert message.startswith(f"{target}: could not lock the registry within 0.05 s")
    assert str(lock_path(target)) in message and "wait for it to finish" in message
    assert caught.value.exit_code == 2
