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
