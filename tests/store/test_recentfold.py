"""A push's fold of its run into ``recent.jsonl``: what each line keeps, and when its
oldest runs fall out to the weeks.

The fold has two ways: the usual line is appended to on its text, any other is
decoded and written whole. The properties here hold the first to the second, byte
for byte, over histories of any values a row can hold.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firewall.store import recentfold, recenttext, statefiles
from firewall.store.history import HistoryRow
from firewall.store.recent import recent_rows
from firewall.store.recentfold import fold_recent

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone.utc)
FUZZ = settings(database=None, derandomize=True, deadline=None, max_examples=200)


def stamp(n: int) -> str:
    return (NOW + dt.timedelta(minutes=n)).strftime("%Y-%m-%dT%H:%M:%SZ")


def row(eval_id: str, at: int, **fields: object) -> HistoryRow:
    defaults: dict[str, object] = {"status": "pass", "k": 7, "median": 0.8, "iqr": 0.01}
    return HistoryRow(
        eval_id=eval_id,
        run_id=f"r{at:03d}",
        mode="run",
        build_ts=stamp(at),
        **{**defaults, **fields},  # type: ignore[arg-type]
    )


def test_each_line_rolls_its_oldest_runs_up_together_at_its_evals_turn() -> None:
    """Each eval rolls up once in ``room + 1`` pushes, at its own turn: "e" and "g" (turns
    0 and 1 of 3, from their ids) hold 3 to 5 runs each, and never roll up in one push."""
    text = ""
    held: dict[str, list[int]] = {"e": [], "g": []}
    fell = []
    for n in range(9):
        rows = [row(e, n, median=n / 10) for e in "eg"]
        text, fallen = fold_recent(text, rows, keep=3, room=2)
        for e in held:
            held[e].append(len(recent_rows(text)[e]))
        fell.append(
            {r["eval_id"]: (r["n"], round(r["median"], 4)) for got in fallen.values() for r in got}
        )
    assert held == {"e": [1, 2, 3, 3, 4, 5, 3, 4, 5], "g": [1, 2, 3, 4, 5, 3, 4, 5, 3]}
    # the oldest runs, rolled up into their week: n runs, the mean of their medians
    assert fell == [
        {},
        {},
        {},
        {"e": (1, 0.0)},
        {},
        {"g": (3, 0.1)},
        {"e": (3, 0.2)},
        {},
        {"g": (3, 0.4)},
    ]
    assert json.loads(text.partition("\n")[0])["pushes"] == 9


def test_a_suite_rolls_up_a_tenth_of_its_evals_a_push_also_from_lines_all_alike() -> None:
    """Lines that all hold as many runs (as a firewall that rolled every eval up at once left
    them) spread out: no push rolls up more than a fifth of 500 evals, none holds more
    than ``most``, and once spread each push rolls up about a tenth."""
    evals = [f"suite/eval-{i:03d}" for i in range(500)]
    text, _ = fold_recent(None, [row(e, n) for n in range(39) for e in evals], keep=39, room=0)
    text = text.replace('"pushes":1,', "", 1)  # as the older firewall wrote it: no count
    rolled, most = [], 0
    for n in range(39, 69):
        text, fallen = fold_recent(text, [row(e, n) for e in evals])
        rolled.append(sum(len(got) for got in fallen.values()))
        most = max(most, max(len(rows) for rows in recent_rows(text).values()))
    assert max(rolled) <= 100 and most <= 49
    assert all(30 <= count <= 70 for count in rolled[10:]), rolled
    assert sum(rolled[10:]) == 500 * 2  # each eval rolled up once in each ten pushes


def test_without_room_each_push_rolls_up_what_falls_past_keep() -> None:
    text: str | None = None
    for n in range(5):
        text, fallen = fold_recent(text, [row("e", n)], keep=3, room=0)
        assert [r["n"] for r in fallen.get("2026-W49", [])] == ([1] if n >= 3 else [])


def decoded_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recentfold, "appended", lambda *args: None)


# Values a row can hold, the awkward ones included: quotes, backslashes, non-ASCII and
# control characters in strings, NaN and infinities, maps of files, empty ones.
TEXTS = st.text(max_size=6) | st.sampled_from(
    ['a"b', "a\\b", "é", "\n", "x]", "x,y", "", "x],", '],"median":[']
)
NUMBERS = st.none() | st.floats(allow_nan=True) | st.integers(-3, 3).map(float)
ROWS = st.fixed_dictionaries(
    {},
    optional={
        "status": st.sampled_from(["pass", "fail", "quarantined", "error"]),
        "median": NUMBERS,
        "sd": NUMBERS,
        "n": st.integers(0, 9),
        "drift": st.dictionaries(TEXTS, st.floats(-1, 1), max_size=2),
        "model_ids": st.lists(TEXTS, max_size=2).map(tuple),
        "fingerprint": st.none() | TEXTS,
        "inputs": st.dictionaries(TEXTS, TEXTS, max_size=2),
        "cost_usd": NUMBERS,
    },
)
RUNS = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), ROWS, min_size=1), max_size=12)


@FUZZ
@given(RUNS, st.integers(1, 4), st.integers(0, 3))
def test_a_line_appended_on_its_text_is_the_line_decoded_and_written_whole(
    runs: list[dict[str, dict[str, object]]], keep: int, room: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        texts: list[str | None] = [None, None]
        for n, evals in enumerate(runs):
            rows = [row(eval_id, n, **fields) for eval_id, fields in sorted(evals.items())]
            fast, fast_fallen = fold_recent(texts[0], rows, keep=keep, room=room)
            decoded_only(patch)
            slow, slow_fallen = fold_recent(texts[1], rows, keep=keep, room=room)
            patch.undo()
            assert fast == slow
            assert json.dumps(fast_fallen, sort_keys=True) == json.dumps(
                slow_fallen, sort_keys=True
            )
            texts = [fast, slow]


def test_the_usual_line_is_appended_to_without_being_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nine pushes in ten append to each line: no line is decoded whole, no entry built."""
    text, _ = fold_recent(None, [row(e, 0, fingerprint="f0") for e in "abc"])
    text, _ = fold_recent(text, [row(e, 1) for e in "abc"])
    decoded: list[str] = []

    def parse(line: str, skipped: object) -> object:
        decoded.append(line)
        return statefiles.parse_line(line, None)

    monkeypatch.setattr(recentfold, "parse_line", parse)
    text, fallen = fold_recent(text, [row(e, 2, fingerprint="f2") for e in "abc"])
    assert [line for line in decoded if line.startswith(statefiles.LINE_START)] == []
    assert fallen == {}
    kept = recent_rows(text)
    assert [[r.fingerprint for r in kept[e]] for e in "abc"] == [[None, None, "f2"]] * 3


def test_a_usual_push_reads_a_line_no_further_than_its_names_and_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One new run, no roll-up due: no column read, and the runs' list of lines that hold
    the same decoded once; the bytes are those of the line decoded and written whole. A
    string that ends in ``],`` looks like a column's end: that line is read column by
    column."""
    odd = {"c": ("m],",)}  # a model's id
    firsts = [
        row(e, 0, fingerprint="f0", inputs={"x": "0"}, model_ids=odd.get(e, ())) for e in "abc"
    ]
    text, _ = fold_recent(None, firsts)
    text, _ = fold_recent(text, [row(e, 1) for e in "abc"])
    read: list[str] = []
    decoded: list[str] = []
    columns_in, loads = recenttext._columns_in, json.loads

    def reading(line: str) -> object:
        read.append(line)
        return columns_in(line)

    def decoding(text: str, **options: object) -> object:
        decoded.append(text)
        return loads(text, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(recenttext, "_columns_in", reading)
    monkeypatch.setattr(json, "loads", decoding)
    rows = [row(e, 2, fingerprint="f2", inputs={"y": "2"}) for e in "abc"]
    fast, _ = fold_recent(text, rows)
    monkeypatch.undo()
    assert [json.loads(line)["eval_id"] for line in read] == ["c"]
    assert decoded.count('["r000","r001"]') == 1
    with pytest.MonkeyPatch.context() as patch:
        decoded_only(patch)
        assert fold_recent(text, rows)[0] == fast
    kept = recent_rows(fast)
    assert [(r.fingerprint, r.inputs) for r in kept["b"]] == [
        (None, {}),
        (None, {}),
        ("f2", {"y": "2"}),
    ]
    assert [(r.fingerprint, r.inputs) for r in recent_rows(text)["b"]] == [
        ("f0", {"x": "0"}),
        (None, {}),
    ]
    assert [r.model_ids for r in kept["c"]] == [("m],",), (), ()]


def test_a_column_of_garbage_is_kept_as_it_is_until_the_lines_turn_writes_it_whole() -> None:
    """A column that holds no value per run (a hand-edited branch) is passed over by the
    usual push, as its readers pass it over; at the line's turn it is read, and the line
    is written whole without it. A column of no value at all is never appended to.
    (Evals a and g roll up at pushes 3 and 2, one push in three: ``_Limits``.)"""
    text, _ = fold_recent(None, [row(e, 0, sd=0.5) for e in "ag"], keep=1, room=2)
    header, a, g = text.splitlines()
    a = a.replace('"sd":[0.5]', '"sd":[0.5,0.5]')
    g = g.replace('"sd":[0.5]', '"sd":[]')
    texts = ["\n".join([header, a, g])]
    for n in range(1, 4):
        texts.append(fold_recent(texts[-1], [row(e, n) for e in "ag"], keep=1, room=2)[0])
    lines = [dict(zip("hag", text.splitlines(), strict=True)) for text in texts]
    assert [line["a"].count('"sd":[0.5,0.5,null') for line in lines] == [0, 1, 1, 0]
    assert [r.sd for r in recent_rows(texts[-1])["a"]] == [None]
    assert [json.loads(line["g"]).get("sd") for line in lines[1:]] == [None, None, None]
    assert [r.run_id for r in recent_rows(texts[-1])["g"]] == ["r002", "r003"]


def test_a_line_with_a_column_new_to_it_is_written_whole() -> None:
    text, _ = fold_recent(None, [row("a", 0)])
    text, _ = fold_recent(text, [row("a", 1, cost_usd=0.25)])
    assert [r.cost_usd for r in recent_rows(text)["a"]] == [None, 0.25]


def test_a_line_not_as_written_is_decoded_and_what_cannot_be_read_dropped() -> None:
    text, _ = fold_recent(None, [row(e, 0) for e in "ab"])
    header, a, b = text.splitlines()
    spaced = a.replace(",", ", ")
    text, _ = fold_recent("\n".join([header, spaced, b[:-1]]), [row(e, 1) for e in "ab"])
    kept = recent_rows(text)
    assert [r.run_id for r in kept["a"]] == ["r000", "r001"]
    assert [r.run_id for r in kept["b"]] == ["r001"]


def test_values_json_would_escape_are_written_as_json_writes_them() -> None:
    odd = ['a"b', "a\\b", "é", "\x07", "x]", "x,y"]
    text, _ = fold_recent(None, [row("a", 0, model_ids=("m",))])
    for n, value in enumerate(odd, start=1):
        text, _ = fold_recent(text, [row("a", n, model_ids=(value,), median=float("nan"))])
    kept = recent_rows(text)["a"]
    assert [r.model_ids for r in kept] == [("m",), *((value,) for value in odd)]
    assert all(r.median != r.median for r in kept[1:])  # NaN, as json writes it


@pytest.mark.parametrize("keep", [1, 2, 4])
@pytest.mark.parametrize("room", [0, 1, 3, 5])
def test_every_roll_up_cut_on_the_text_is_the_decoded_one(
    keep: int, room: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each size of cut: a line of every eval run each time, rolled up ``room + 1`` runs at
    a time, the same bytes either way, and the same rows rolled up."""
    texts: list[str] = ["", ""]
    for n in range(3 * (keep + room + 1)):
        rows = [row(e, n, median=n / 100, fingerprint=f"f{n}" if n % 3 else None) for e in "ab"]
        fast, fast_fallen = fold_recent(texts[0], rows, keep=keep, room=room)
        with monkeypatch.context() as patch:
            decoded_only(patch)
            slow, slow_fallen = fold_recent(texts[1], rows, keep=keep, room=room)
        assert fast == slow
        assert json.dumps(fast_fallen, sort_keys=True) == json.dumps(slow_fallen, sort_keys=True)
        texts = [fast, slow]


def test_a_column_of_numbers_is_passed_over_on_its_text_until_a_roll_up_reads_it() -> None:
    """A number that is no JSON (a hand-edited branch) in a column the usual push passes over
    unread: the line keeps it and its reader skips the line and says so; the push that
    rolls that run up reads it, and the line is dropped as any line that cannot be read
    (its eval starts again from the new run)."""
    text, _ = fold_recent(None, [row(e, 0) for e in "ab"], keep=2, room=1)
    header, a, b = text.splitlines()
    garbled = a.replace('"median":[0.8]', '"median":[0.8e]')
    assert garbled != a
    text, fallen = fold_recent(
        "\n".join([header, garbled, b]), [row(e, 1) for e in "ab"], keep=2, room=1
    )
    assert fallen == {} and '"median":[0.8e,0.8]' in text  # appended to, not decoded
    said: list[str] = []
    assert sorted(recent_rows(text, skipped=said.append)) == ["b"] and len(said) == 1
    text, _ = fold_recent(text, [row(e, 2) for e in "ab"], keep=2, room=1)
    text, fallen = fold_recent(text, [row(e, 3) for e in "ab"], keep=2, room=1)
    assert [r["eval_id"] for r in fallen["2026-W49"]] == ["b"]
    assert [r.run_id for r in recent_rows(text)["a"]] == ["r003"]
    assert [r.run_id for r in recent_rows(text)["b"]] == ["r002", "r003"]
