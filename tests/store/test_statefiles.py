"""The state branch's parsers take whatever a file holds: any bytes in, rows or a skip out.

One over-nested line on the branch made every CI `run` and `status` exit 4 (a
``RecursionError`` in ``parse_file``). Each parser of ``statefiles`` and ``progress``
is fed garbage, deep nesting and huge lines, valid files with a line broken, and
anything at all; it returns the rows it can read and says once what it skipped.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from firewall.store.history import HistoryRow
from firewall.store.progress import CANDIDATES, PROGRESS
from firewall.store.recent import recent_medians, recent_rows
from firewall.store.recentfold import fold_recent
from firewall.store.rollups import fold_week, parse_rollup, render_rollup, roll_up, rolled_rows
from firewall.store.statefiles import MAX_LINE, parse_file, run_file, run_summary
from firewall.timeutil import to_text

FUZZ = settings(database=None, derandomize=True, deadline=None, max_examples=300)
DEEP = "[" * 100_000 + "]" * 100_000
NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone.utc)


def run(evals: int = 3) -> list[HistoryRow]:
    return [
        HistoryRow(
            eval_id=f"e{i}",
            run_id="r1",
            mode="run",
            status="pass",
            k=7,
            build_ts="2026-12-01T09:00:00Z",
            median=0.8,
            iqr=0.01,
        )
        for i in range(evals)
    ]


def valid_run_file() -> str:
    return run_file(run())[1]


def valid_rollup() -> str:
    return render_rollup("2026-W49", roll_up(run()))


# Lines a file can hold: valid rows, JSON of any shape, deep nesting, huge lines, bytes.
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
LINES = st.one_of(
    st.sampled_from(valid_run_file().splitlines() + valid_rollup().splitlines()),
    JSONISH.map(lambda value: json.dumps(value, allow_nan=True)),
    st.integers(1, 200_000).map(lambda depth: '{"a":' * depth + "1" + "}" * depth),
    st.integers(1, 200_000).map(lambda depth: "[" * depth),
    st.just("x" * (MAX_LINE + 1)),
    st.binary(max_size=200).map(lambda raw: raw.decode("utf-8", "replace")),
)
FILES = st.one_of(
    st.lists(LINES, max_size=8).map("\n".join),
    st.binary(max_size=2_000).map(lambda raw: raw.decode("utf-8", "replace")),
    st.lists(LINES, max_size=6).map(lambda lines: "\n".join([valid_run_file(), *lines])),
)


@FUZZ
@given(FILES)
def test_any_run_file_gives_rows_or_a_skip(text: str) -> None:
    skipped: list[str] = []
    rows = list(parse_file(text, skipped=skipped.append))
    assert all(isinstance(row, HistoryRow) for row in rows)


@FUZZ
@given(FILES)
def test_any_rollup_file_gives_rows_or_a_skip(text: str) -> None:
    skipped: list[str] = []
    rows = list(parse_rollup(text, skipped=skipped.append))
    assert all(isinstance(row, HistoryRow) for row in rows)


@FUZZ
@given(FILES)
def test_any_progress_or_candidates_file_parses_or_is_none(text: str) -> None:
    for file in (PROGRESS, CANDIDATES):
        parsed = file.parse(text)
        assert parsed is None or isinstance(parsed, dict)
        file.merge({})(text)  # a writer starts anew from what it cannot read


def test_an_over_nested_line_is_skipped_and_said_the_rest_kept() -> None:
    good = valid_run_file().splitlines()
    text = "\n".join([good[0], DEEP, good[1], "x" * (MAX_LINE + 1), *good[2:]])
    skipped: list[str] = []
    assert [row.eval_id for row in parse_file(text, skipped=skipped.append)] == ["e0", "e1", "e2"]
    assert len(skipped) == 2
    assert "RecursionError" in skipped[0] and "characters" in skipped[1]
    rollup = "\n".join([*valid_rollup().splitlines(), DEEP])
    skipped.clear()
    assert len(list(parse_rollup(rollup, skipped=skipped.append))) == 3
    assert len(skipped) == 1


def test_an_over_nested_header_skips_its_file() -> None:
    skipped: list[str] = []
    assert list(parse_file(DEEP + "\n" + valid_run_file(), skipped=skipped.append)) == []
    assert len(skipped) == 1
    assert PROGRESS.parse(DEEP) is None and CANDIDATES.parse("{" * 100_000) is None


def test_recent_runs_keep_what_a_pull_request_carries_by_the_newest_fingerprint_alone() -> None:
    """An affected-only pull request compares with the default branch's newest probe: its
    fingerprint and inputs survive the fold; older runs keep their costs, not their maps."""

    def probe(run: str, day: int, fingerprint: str) -> HistoryRow:
        return HistoryRow(
            "e", run, "run", "pass", 7, f"2026-12-0{day}T00:00:00Z", median=0.8,
            fingerprint=fingerprint, inputs={"file:p.txt": fingerprint}, trials=7,
            seconds=1.5, cost_usd=0.02, git_ref="refs/heads/main",
        )  # fmt: skip

    text, _ = fold_recent(None, [probe("r1", 1, "old")])
    text, _ = fold_recent(text, [probe("r2", 2, "new")])
    older, newest = recent_rows(text)["e"]
    assert (newest.fingerprint, dict(newest.inputs)) == ("new", {"file:p.txt": "new"})
    assert (older.fingerprint, dict(older.inputs)) == (None, {})
    assert (older.trials, older.seconds, older.cost_usd) == (7, 1.5, 0.02)
    assert text.count("file:p.txt") == 1


def rows_of_week(seed: int) -> list[HistoryRow]:
    """Runs of one week in any order, some numbers missing, as they fall out of the recent
    file when jobs push out of order."""
    import random

    rng = random.Random(seed)
    rows = []
    for n in range(rng.randint(1, 12)):
        day, hour = rng.randint(23, 29), rng.randint(0, 23)
        rows.append(
            HistoryRow(
                eval_id=f"e{rng.randint(0, 3)}",
                run_id=f"r{n}",
                mode="run",
                status=rng.choice(["pass", "fail"]),
                k=rng.choice([5, 7]),
                build_ts=f"2026-11-{day}T{hour:02d}:00:00Z",
                median=rng.choice([None, rng.random()]),
                iqr=rng.random(),
                mean=rng.random(),
                pass_rate=rng.choice([None, 1.0, 0.5]),
            )
        )
    return rows


@FUZZ
@given(st.integers(0, 10_000), st.integers(0, 10_000), st.integers(0, 3))
def test_a_week_folded_as_fields_is_the_week_rendered_from_rows(
    before: int, fallen: int, split: int
) -> None:
    """``fold_week`` (what every push does) writes the very bytes ``render_rollup`` writes
    from rows, whatever the order the runs come in and however the week was split."""
    earlier = rows_of_week(before)
    files = [render_rollup("2026-W48", roll_up(earlier[i::2])) for i in range(min(split, 2))]
    new = rows_of_week(fallen)
    rows = [row for text in files for row in parse_rollup(text)]
    folded = fold_week("2026-W48", files, rolled_rows("2026-W48", new))
    assert folded == render_rollup("2026-W48", [*rows, *roll_up(new)])


@FUZZ
@given(FILES)
def test_a_week_folded_over_any_file_gives_a_week_of_rows(text: str) -> None:
    folded = fold_week("2026-W48", [text], rolled_rows("2026-W48", run()))
    skipped: list[str] = []
    rows = list(parse_rollup(folded, skipped=skipped.append))
    assert skipped == [] and {"e0", "e1", "e2"} <= {row.eval_id for row in rows}


@FUZZ
@given(st.lists(LINES, max_size=6))
def test_a_sparkline_read_from_two_columns_is_the_one_read_from_whole_lines(
    garbage: list[str],
) -> None:
    """The summary's medians are decoded where their column stands; a line that is not as
    the writer writes it is read whole, as before: the same points either way."""
    text, _ = fold_recent(None, [*run(), *[dataclasses.replace(r, run_id="r2",
        build_ts="2026-12-01T10:00:00Z", median=0.5) for r in run()]])  # fmt: skip
    lines = text.splitlines()
    mixed = "\n".join([lines[0], *garbage, *lines[1:]]) + "\n"
    ids = {"e0", "e1", "e2", "x"}
    fast = recent_medians(mixed, ids, since="2026-11-01", last=14)
    rows = recent_rows(mixed, eval_ids=ids, since="2026-11-01", last=14)
    drawn = {eval_id: points for eval_id, points in fast.items() if points}
    assert drawn == {e: [r.median for r in kept] for e, kept in rows.items() if kept}
    assert recent_medians(mixed.encode(), ids, since="2026-11-01", last=14) == fast


@FUZZ
@given(
    st.lists(st.text(alphabet='r]["\\,1', min_size=1, max_size=4), min_size=1, max_size=25),
    st.integers(1, 20),
    st.integers(0, 26),
    st.sampled_from([None, 1, True, "x"]),
)
def test_a_sparkline_drawn_from_a_list_of_runs_decoded_once_is_the_one_of_whole_rows(
    run_ids: list[str], last: int, cut: int, odd: object
) -> None:
    """Lines that hold the same runs are drawn from one decoding of their list: the newest
    ``last`` since the window's start, whatever the run ids hold (a ``]`` or a quote cuts
    the list's text short, and the line is then read whole), and whatever a median is."""
    ids = list(dict.fromkeys(run_ids))
    stamps = [to_text(NOW + dt.timedelta(hours=h)) for h in range(len(ids))]
    rows = [
        dataclasses.replace(row, run_id=run_id, build_ts=stamp, median=n / 64)
        for n, (run_id, stamp) in enumerate(zip(ids, stamps, strict=True))
        for row in run()
    ]
    text, _ = fold_recent(None, rows, keep=30, room=0)
    # One line's oldest median is not a number: no point is drawn of it.
    text = text.replace('"median":[0.0', f'"median":[{json.dumps(odd)}', 1)
    since = stamps[cut] if cut < len(stamps) else "9999"
    ask = {"e0", "e1", "e2"}
    fast = recent_medians(text, ask, since=since, last=last)
    whole = recent_rows(text, eval_ids=ask, since=since, last=last)
    drawn = {e: [r.median for r in kept] for e, kept in whole.items() if kept}
    assert {e: points for e, points in fast.items() if points} == drawn
    assert all(len(points) == min(last, len(ids) - cut) for points in drawn.values())


def test_a_run_files_first_line_says_its_counts_and_an_older_ones_are_counted() -> None:
    rows = [*run(2), dataclasses.replace(run(3)[2], status="fail")]
    _, text = run_file(rows)
    summary = run_summary(text)
    assert summary is not None and dict(summary.counts) == {"pass": 2, "fail": 1}
    assert (summary.run_id, summary.mode, summary.build_ts) == ("r1", "run", rows[0].build_ts)
    header, *body = text.splitlines()
    older = json.loads(header)
    del older["counts"]
    assert run_summary("\n".join([json.dumps(older), *body])) == summary
    assert run_summary("") is None and run_summary(DEEP) is None


@FUZZ
@given(FILES)
def test_any_run_file_gives_a_summary_or_none(text: str) -> None:
    summary = run_summary(text)
    assert summary is None or all(n > 0 for n in summary.counts.values())
