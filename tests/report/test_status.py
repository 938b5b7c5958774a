"""`firewall status` and `firewall calibrate` on hand-made histories with known answers."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from click.testing import CliRunner

from firewall.cli import main
from firewall.lifecycle import Entry
from firewall.report.calibrate import calibrate
from firewall.report.status import build, read_trends, trends
from firewall.store.history import HistoryRow, LocalHistory
from firewall.store.registry import Registry
from firewall.text import sparkline
from firewall.timeutil import now, to_text

AT = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)


def row(
    eval_id: str,
    run: str,
    *,
    days_ago: float,
    median: float | None = 0.8,
    iqr: float | None = 0.01,
    status: str = "pass",
    mode: str = "run",
    drift: dict[str, float] | None = None,
    sd: float | None = None,
) -> HistoryRow:
    return HistoryRow(
        eval_id=eval_id,
        run_id=run,
        mode=mode,
        status=status,
        k=7,
        median=median,
        iqr=iqr,
        sd=sd,
        n=7 if sd is not None else 0,
        drift=drift or {},
        build_ts=to_text(AT - dt.timedelta(days=days_ago)),
    )


def entry(days_ago: int, streak: int = 1, **extra: object) -> Entry:
    since = AT - dt.timedelta(days=days_ago)
    return Entry.model_validate(
        {
            "since": since,
            "source": "auto",
            "reason": "iqr 0.2 > 0.03",
            "median": 0.7,
            "iqr": 0.2,
            "k": 7,
            "stable_streak": streak,
            "review_by": since + dt.timedelta(days=30),
            **extra,
        }
    )


def test_status_joins_registry_trend_and_last_run() -> None:
    rows = [
        row("tone", "r1", days_ago=20, median=0.1),  # outside the 14-day window
        row("tone", "r2", days_ago=10, median=0.6, status="quarantine"),
        row("other", "r2", days_ago=10),
        row("tone", "r3", days_ago=1, median=None, status="error", mode="nightly"),
        row(
            "tone",
            "r4",
            days_ago=0.5,
            median=0.9,
            status="quarantined",
            mode="nightly",
            drift={"category": 0.4, "tone": 0.0},
        ),
        row("other", "r4", days_ago=0.5, status="fail", mode="nightly"),
    ]
    view = build(
        {"tone": entry(45, streak=2, issue=42, owner="alice")},
        rows,
        at=AT,
        registry="quarantine.json",
        release_after=3,
        days=14,
        defined={"tone"},
    )
    (tone,) = view.quarantined
    assert tone.trend == [0.6, None, 0.9]
    assert tone.sparkline == "▅·▇"  # on the fixed 0-1 scale
    assert (tone.age_days, tone.streak, tone.release_after) == (45, 2, 3)
    assert tone.overdue and view.overdue == ["tone"]
    assert tone.issue == 42 and tone.owner == "alice"
    assert tone.drifting == {"category": 0.4}
    assert view.last_run is not None and view.last_run.run_id == "r4"
    assert view.last_run.counts == {"quarantined": 1, "fail": 1}


def test_issue_links_use_the_github_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/bot")
    view = build(
        {"tone": entry(1, issue=7)},
        [],
        at=AT,
        registry="q.json",
        release_after=3,
        days=14,
        defined=set(),
    )
    assert view.quarantined[0].issue_url == "https://github.com/acme/bot/issues/7"
    assert view.quarantined[0].defined is False
    assert view.last_run is None


@pytest.mark.parametrize(
    "values, expected",
    [
        ([0.0, 1 / 7, 2 / 7, 3 / 7, 4 / 7, 5 / 7, 6 / 7, 1.0], "▁▂▃▄▅▆▇█"),
        ([0.1, 0.5, 0.9], "▂▅▇"),
        # A steady eval stays flat and high; a coin toss swings: one scale for both.
        ([0.84, 0.85, 0.86], "▇▇▇"),
        ([0.2, 0.8, 0.2], "▂▇▂"),
        ([0.9], "▇"),  # one point sits at its level, not mid-height
        ([None, 0.3], "·▃"),
        ([-0.5, 1.5], "▁█"),  # off the scale: drawn at its edge
        ([], ""),
    ],
)
def test_sparkline(values: list[float | None], expected: str) -> None:
    assert sparkline(values) == expected


def test_sparkline_keeps_the_last_width_values() -> None:
    assert sparkline([0.0] * 10 + [1.0] * 4, width=5) == "▁████"


def test_calibrate_suggests_from_the_within_run_sd_and_its_cost() -> None:
    sds = [0.008, 0.01, 0.012, 0.01] * 5
    rows = [row("tone", f"r{i}", days_ago=i, sd=v) for i, v in enumerate(sds)]
    rows += [row("young", "r0", days_ago=0, sd=0.5)]
    result = calibrate(rows, {"tone": 0.008}, 0.03)
    tone = next(s for s in result.evals if s.eval_id == "tone")
    assert tone.eval_id == "tone" and tone.points == 20 and tone.trials == 7
    pooled = float(np.sqrt(np.mean(np.square(sds))))  # every run has 6 degrees of freedom
    high = pooled * np.sqrt(120 / scipy.stats.chi2.ppf(0.05, 120))
    ratio = scipy.stats.chi2.isf(0.01, 6) / scipy.stats.chi2.isf(0.05, 6)
    assert tone.sd == pytest.approx(pooled) and tone.sd_high == pytest.approx(high)
    expected = round(2 * scipy.stats.norm.ppf(0.75) * high * np.sqrt(ratio), 4)
    assert tone.flakiness == pytest.approx(expected)
    assert tone.quarantined_share == 0.0
    sd_f = 0.008 / (2 * scipy.stats.norm.ppf(0.75))
    flagged = [scipy.stats.chi2.sf(6 * v**2 / sd_f**2, 6) < 0.05 for v in sds]
    assert 0 < tone.current_share == pytest.approx(np.mean(flagged))
    young = next(s for s in result.evals if s.eval_id == "young")
    assert young.flakiness is None and young.points == 1
    assert result.overall.points == 21


def test_a_few_wild_evals_do_not_pull_the_global_suggestion_up() -> None:
    calm = [row(f"calm-{e}", f"r{i}", days_ago=i, sd=0.01) for e in range(3) for i in range(12)]
    wild = [row(f"wild-{e}", f"r{i}", days_ago=i, sd=0.2) for e in range(2) for i in range(12)]
    result = calibrate(calm + wild, {}, 0.03)
    own = {s.eval_id: s.flakiness for s in result.evals}
    assert own["wild-0"] is not None and own["wild-0"] > 0.2
    assert result.overall.flakiness == own["calm-0"]


def test_calibrate_never_suggests_a_flakiness_of_zero() -> None:
    rows = [row("exact", f"r{i}", days_ago=i, iqr=0.0, sd=0.0) for i in range(12)]
    result = calibrate(rows, {}, 0.03)
    assert result.evals[0].flakiness == 0.01 and result.overall.flakiness == 0.01


def test_the_snippet_is_commented_out_and_says_what_the_suggestion_means(project: Path) -> None:
    (project / "firewall.toml").write_text('[[evals]]\nid = "tone"\ncommand = "true"\n')
    write_history(project, [row("tone", f"r{i}", days_ago=0, sd=0.01) for i in range(12)])
    snippet = CliRunner().invoke(main, ["calibrate"]).output
    assert "is quarantined in 1% of probes by the spread test at 5%" in snippet
    assert all(line.startswith("#") for line in snippet.splitlines() if line.strip())


def test_calibrate_ignores_rows_without_a_spread() -> None:
    rows = [row("tone", "r", days_ago=0, iqr=None)] * 30
    assert calibrate(rows, {}, 0.03).overall.points == 0


def write_history(root: Path, rows: list[HistoryRow]) -> None:
    path = root / ".firewall" / "history.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.to_json() + "\n" for r in rows) + '{"torn": ')


def test_status_and_calibrate_commands(project: Path) -> None:
    (project / "firewall.toml").write_text('[[evals]]\nid = "tone"\ncommand = "true"\n')
    recent = now()
    rows = [
        dataclasses.replace(
            row("tone", f"r{i}", days_ago=0, iqr=i / 100, sd=0.005 + i / 400),
            build_ts=to_text(recent),
        )
        for i in range(12)
    ]
    write_history(project, rows)
    with Registry(project / "quarantine.json").edit() as entries:
        entries["tone"] = Entry(
            since=recent, source="manual", reason="vendor outage", stable_streak=1
        )
    runner = CliRunner()
    text = runner.invoke(main, ["status"]).output
    assert "tone" in text and "1/3" in text and "vendor outage" in text
    data = json.loads(runner.invoke(main, ["status", "--json"]).output)
    assert data["quarantined"][0]["id"] == "tone" and len(data["quarantined"][0]["trend"]) == 12
    snippet = runner.invoke(main, ["calibrate"]).output
    [tone] = calibrate(rows, {"tone": 0.03}, 0.03).evals
    assert f"flakiness = {tone.flakiness:g}" in snippet and "12 probes of 7" in snippet
    assert f"would have quarantined {tone.quarantined_share:.0%}" in snippet
    assert (
        json.loads(runner.invoke(main, ["calibrate", "--json"]).output)["overall"]["points"] == 12
    )


def test_calibrate_without_history_says_so(project: Path) -> None:
    (project / "firewall.toml").write_text('[[evals]]\nid = "tone"\ncommand = "true"\n')
    result = CliRunner().invoke(main, ["calibrate"])
    assert result.exit_code == 2 and "no probes recorded" in result.output


def test_history_compaction_keeps_recent_rows(project: Path) -> None:
    (project / "firewall.toml").write_text("")
    recent, old = now(), now() - dt.timedelta(days=200)
    write_history(
        project,
        [
            dataclasses.replace(row("a", "r1", days_ago=0), build_ts=to_text(old)),
            dataclasses.replace(row("a", "r2", days_ago=0), build_ts=to_text(recent)),
        ],
    )
    result = CliRunner().invoke(main, ["history", "compact", "--keep-days", "90"])
    assert result.exit_code == 0 and "kept 1 rows, dropped 2" in result.output
    kept = list(LocalHistory(project / ".firewall" / "history.jsonl").scan())
    assert [r.run_id for r in kept] == ["r2"]


def test_read_trends_reads_the_window_only(tmp_path: Path) -> None:
    said: list[str] = []
    store = LocalHistory(tmp_path / "history.jsonl", warn=said.append)
    store.append([row("tone", "ancient", days_ago=300, median=0.1)])
    with store.path.open("a") as handle:  # beyond the window: never read, never warned about
        handle.write('{"eval_id":"tone","run_id":"torn","med\n')
    store.append([row("x", f"old{i}", days_ago=200 - i / 100) for i in range(8000)])  # > a block
    for day in range(20, -1, -1):
        median = min(day / 7, 1.0)
        store.append([row(e, f"d{day}", days_ago=day, median=median) for e in ("tone", "x")])
    sparklines = read_trends(store, {"tone", "gone"}, at=AT, days=7)
    assert said == []
    assert sparklines == trends(store.scan(), {"tone", "gone"}, at=AT, days=7)
    assert sparklines == {"tone": "█▇▆▅▄▃▂▁"}
    assert len(said) == 1  # the whole file is read by scan, and the torn row met


def test_status_reads_the_window_from_the_end_of_a_long_history(project: Path) -> None:
    (project / "firewall.toml").write_text('[[evals]]\nid = "tone"\ncommand = "true"\n')
    recent = now()
    with Registry(project / "quarantine.json").edit() as entries:
        entries["tone"] = Entry(since=recent, source="manual", reason="vendor outage")

    def at(days_ago: float, run: str, median: float = 0.8) -> HistoryRow:
        stamp = to_text(recent - dt.timedelta(days=days_ago))
        return dataclasses.replace(row("tone", run, days_ago=0, median=median), build_ts=stamp)

    # Two years of runs, more than a read block of them, then a torn row, then the window.
    old = [at(730 - i / 10, f"old{i}") for i in range(7000)]
    window = [at(10 - i, f"new{i}", median=0.5 + i / 100) for i in range(10)]
    path = project / ".firewall" / "history.jsonl"
    path.parent.mkdir(parents=True)
    text = "".join(r.to_json() + "\n" for r in old[:100])
    text += '{"eval_id":"tone","run_id":"torn","mo\n'
    text += "".join(r.to_json() + "\n" for r in [*old[100:], *window])
    path.write_text(text)
    assert len(text) - text.index('"torn"') > 1 << 20  # more than a read block from the end
    result = CliRunner().invoke(main, ["status", "--json"])
    assert result.exit_code == 0 and "warning" not in result.output
    data = json.loads(result.output)
    assert data["quarantined"][0]["trend"] == [r.median for r in window]
    assert data["last_run"]["run_id"] == "new9"
    with path.open("a") as handle:  # a torn row inside the window is read, and said
        handle.write('{"eval_id":"tone","run_id":"torn-too","mo\n')
    result = CliRunner().invoke(main, ["status"])
    assert result.exit_code == 0
    assert f"{path.name}: skipped 1 line(s) that are not history rows" in result.output
