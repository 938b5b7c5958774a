"""The history store: typed rows from writer to reader, appends that never interleave."""

from __future__ import annotations

from pathlib import Path

from firewall.store.history import HistoryRow, LocalHistory

AT = "2026-11-29T12:00:00Z"


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
