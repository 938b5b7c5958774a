"""The job summary: order, escaping, the quarantine section, and the 1 MiB limit."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from builders import make_artefact, make_check, make_report, trials, with_metrics

from firewall._stats import Stats
from firewall.artefact import Artefact, EvalReport
from firewall.errors import WriteError
from firewall.github.actions.summary import append_summary
from firewall.policy import Status
from firewall.report.markdown import SUMMARY_LIMIT, cell, render_summary
from firewall.report.selection import SCREENFUL

COLUMNS = 9
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


report = make_report
# The summary counts the reports; the exit code follows them unless a test gives its own.
artefact = make_artefact


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of every body row of the table, split where GitHub would split them."""
    lines = markdown.splitlines()
    start = lines.index("|---|---|--:|--:|--:|--:|---|---|---|") + 1
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = UNESCAPED_PIPE.split(line)
        assert cells[0] == "" and cells[-1] == "", line
        rows.append([c.strip() for c in cells[1:-1]])
    return rows


def test_every_eval_in_a_row_failures_first() -> None:
    run = artefact(
        report("passes", Status.PASS),
        report("held", Status.QUARANTINED),
        report("scatters", Status.QUARANTINE, stats=Stats(median=0.8, iqr=0.2)),
        report("judge", Status.FAIL, blocking=False),
        report("crashes", Status.ERROR, stats=Stats(errors=7)),
        report("fails", Status.FAIL, stats=Stats(median=0.61, iqr=0.01, pass_rate=0.0)),
        exit_code=1,
    )
    rows = table_rows(render_summary(run, trends={"fails": "▁▂▃"}))
    assert [(r[0], r[1]) for r in rows] == [
        ("❌ FAIL", "fails"),
        ("💥 ERROR", "crashes"),
        ("⚠️ FAIL (non-blocking)", "judge"),
        ("🚧 QUARANTINE", "scatters"),
        ("🔒 QUARANTINED", "held"),
        ("✅ PASS", "passes"),
    ]
    assert rows[0] == ["❌ FAIL", "fails", "0.61", "0.01", "7", "0%", "▁▂▃", "-", "fails reason"]
    assert rows[1][2:6] == ["-", "-", "7", "-"]  # nothing scored


@pytest.mark.parametrize(
    ("exit_code", "title"),
    [
        (0, "## ✅ Flakiness Firewall: PASS"),
        (1, "## ❌ Flakiness Firewall: FAIL"),
        (3, "## 💥 Flakiness Firewall: ERROR"),
        (130, "## 💥 Flakiness Firewall: ERROR"),
    ],
)
def test_the_title_gives_the_overall_result(exit_code: int, title: str) -> None:
    markdown = render_summary(artefact(report("a", Status.PASS), exit_code=exit_code))
    assert markdown.splitlines()[0] == title


def test_counts_and_run_line() -> None:
    run = artefact(report("a", Status.PASS), report("b", Status.FAIL, blocking=False))
    lines = render_summary(run).splitlines()
    assert lines[2] == (
        "**1** passed · **1** failed · **0** errored · **0** newly quarantined · "
        "**0** in quarantine (1 of the failures and errors non-blocking)"
    )
    assert lines[4] == "Run: mode run, base seed 20261129, commit 0123456789ab, exit code 0"


def test_an_interrupted_run_says_so() -> None:
    markdown = render_summary(artefact(report("a", Status.PASS), exit_code=130, complete=False))
    assert markdown.startswith("## 💥 Flakiness Firewall: ERROR (interrupted)\n")
    assert "> The run was interrupted: these results are incomplete." in markdown


def test_no_evals() -> None:
    assert "No evals were selected." in render_summary(artefact())


HOSTILE = [
    "a | b | c",
    "line\nbreak\r\nand\rmore\u2028end",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "![pixel](https://tracker.example/p.png)",
    "[click](javascript:alert(1))",
    "`code` and ``more``",
    "*bold* _it_ ~~gone~~ # heading \\",
    "&lt;already escaped&gt;",
    "\\| escaped pipe already",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_reason_stays_inside_its_cell(text: str) -> None:
    run = artefact(report(text, Status.FAIL, reason=text), exit_code=1)
    markdown = render_summary(run, trends={text: text})
    rows = table_rows(markdown)
    assert len(rows) == 1 and len(rows[0]) == COLUMNS
    assert "<" not in markdown  # no HTML can open
    assert "](" not in rows[0][8].replace("\\]", "")  # no link or image syntax survives


def test_cell_escaping() -> None:
    assert cell("a|b") == "a\\|b"
    assert cell("one\ntwo\r\nthree") == "one two three"
    assert cell("<b>&</b>") == "&lt;b&gt;&amp;&lt;/b&gt;"
    assert cell("![x](y)") == "\\!\\[x\\](y)"
    assert cell("x" * 10, limit=4) == "xxxx…"


def test_quarantines_with_their_issues() -> None:
    run = artefact(
        report("new", Status.QUARANTINE, reason="iqr 0.21 > 0.03"),
        report("old", Status.QUARANTINED, reason="in quarantine since 2026-01-01"),
        report("fine", Status.PASS),
    )
    links = {"new": "https://github.com/o/r/issues/42", "old": "https://ghe.example/o/r/x (y)"}
    markdown = render_summary(run, issue_links=links)
    section = markdown.split("### Quarantine\n", 1)[1]
    assert (
        "- 🚧 QUARANTINE **new**: iqr 0.21 &gt; 0.03 ([#42](https://github.com/o/r/issues/42))"
        in section
    )
    assert "([issue](https://ghe.example/o/r/x%20%28y%29))" in section
    assert "fine" not in section


def test_no_quarantine_section_without_quarantines() -> None:
    assert "### Quarantine" not in render_summary(artefact(report("a", Status.PASS)))


def test_an_issue_link_that_is_not_a_url_is_text() -> None:
    run = artefact(report("q", Status.QUARANTINE))
    markdown = render_summary(run, issue_links={"q": "javascript:alert(1)"})
    assert "](javascript" not in markdown


def test_overdue_reviews_are_listed() -> None:
    markdown = render_summary(artefact(), overdue=["a_b", "c"])
    assert "### Review overdue\n\na\\_b, c: see `firewall status`" in markdown


def test_huge_suite_leads_with_a_screenful_and_points_to_the_report() -> None:
    statuses = [Status.PASS] * 17 + [Status.FAIL, Status.QUARANTINE, Status.ERROR]
    reports = [
        report(
            f"eval-{i:05}",
            statuses[i % 20],
            reason=f"median 0.{i:05} vs threshold 0.85, k=7 "
            "and a reason long enough to make the table large",
        )
        for i in range(20_000)
    ]
    run = artefact(*reports, exit_code=1)
    markdown = render_summary(run, report="out/firewall-report.json")
    assert len(markdown.encode("utf-8")) <= SUMMARY_LIMIT
    rows = table_rows(markdown)
    assert [r[0] for r in rows] == ["❌ FAIL"] * SCREENFUL  # the worst are the ones kept
    assert (
        "_And 960 more FAIL, 1000 more ERROR, 1000 more QUARANTINE, 17000 more PASS: the JSON "
        "report (out/firewall-report.json) has every eval (a table of all of them would pass "
        "GitHub's 1 MiB per step)._"
    ) in markdown
    assert "<details><summary>All" not in markdown  # 20,000 rows do not fit
    assert "### Quarantine" not in markdown  # none of the 40 shown is a quarantine


def test_the_cut_is_as_late_as_the_limit_allows() -> None:
    run = artefact(*(report(f"e{i:03}", Status.PASS, reason="r" * 400) for i in range(SCREENFUL)))
    full = render_summary(run)
    size = len(full.encode("utf-8"))
    assert render_summary(run, limit_bytes=size) == full
    row_bytes = len(next(line for line in full.splitlines() if "e000" in line).encode()) + 1
    for limit in (size - 1, size // 2, 5000):
        cut = render_summary(run, limit_bytes=limit)
        kept = len(table_rows(cut))
        assert f"_{SCREENFUL - kept} more evals not shown" in cut
        # Within the limit, and no room left for one more row.
        assert limit - row_bytes < len(cut.encode("utf-8")) <= limit


def suite_of(size: int, *looks: EvalReport) -> Artefact:
    """``size`` evals with ids as long as a pytest suite's: ``looks`` among PASSes."""
    reports = [
        report(f"tests/integration/test_checkout_flow.py/test_refund_{i:04}", Status.PASS)
        for i in range(size)
    ]
    reports[3 : 3 + len(looks)] = looks
    return artefact(*reports)


def collapsed_rows(markdown: str) -> list[list[str]]:
    block = markdown.split("<details><summary>All ", 1)[1].split("</details>", 1)[0]
    return table_rows(block)


def test_a_500_eval_summary_shows_what_needs_a_look_and_keeps_every_eval_collapsed() -> None:
    looks = (
        report("fails", Status.FAIL, checks=[make_check("median", "0.6", ">= 0.85", ok=False)]),
        report("scatters", Status.QUARANTINE),
        report("held", Status.QUARANTINED),
        report("crashes", Status.ERROR),
    )
    markdown = render_summary(suite_of(500, *looks))

    assert len(markdown.encode("utf-8")) <= SUMMARY_LIMIT
    assert [r[1] for r in table_rows(markdown)] == ["fails", "crashes", "scatters", "held"]
    assert "_And 496 more PASS: every eval is in the collapsed table below._" in markdown
    every = collapsed_rows(markdown)
    assert len(every) == 500 and every[0][1] == "fails" and every[-1][0] == "✅ PASS"
    # What a reader scrolls through: the collapsed block aside, a screen, not 553 lines.
    before, rest = markdown.split("<details><summary>All ", 1)
    outside = before + rest.split("</details>", 1)[1]
    assert len(outside.splitlines()) <= 40
    assert "### Quarantine" in outside and "**held**" in outside


def test_a_500_eval_summary_that_cannot_keep_every_eval_counts_them() -> None:
    run = suite_of(500, report("fails", Status.FAIL))
    markdown = render_summary(run, report="firewall-report.json", limit_bytes=20_000)
    assert len(markdown.encode("utf-8")) <= 20_000
    assert "<details><summary>All" not in markdown
    assert [r[1] for r in table_rows(markdown)] == ["fails"]
    assert "_And 499 more PASS: the JSON report (firewall-report.json) has every eval" in markdown
    assert len(markdown.splitlines()) <= 20


def test_a_large_suite_that_all_passes_is_a_line_and_a_collapsed_table() -> None:
    markdown = render_summary(suite_of(519))
    assert "_All 519 evals PASS: every eval is in the collapsed table below._" in markdown
    assert markdown.count("| Status | Eval |") == 1  # only the collapsed one
    assert len(collapsed_rows(markdown)) == 519


def test_a_limit_too_small_for_the_header_is_refused() -> None:
    with pytest.raises(ValueError, match="limit_bytes=100"):
        render_summary(artefact(report("a", Status.PASS)), limit_bytes=100)


def test_append_summary_adds_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "step_summary"
    path.write_text("# earlier step\n", encoding="utf-8")
    append_summary(path, "## ours")
    append_summary(path, "more\n")
    assert path.read_text(encoding="utf-8") == "# earlier step\n## ours\nmore\n"


def test_usage_is_shown_without_budgets_and_failures_list_their_checks() -> None:
    records = with_metrics(
        trials([0.5] * 7),
        latency_ms=[100.0 * (i + 1) for i in range(7)],
        tokens=[400.0] * 7,
        cost_usd=[0.002] * 7,
    )
    failing = report(
        "slowpoke",
        Status.FAIL,
        reason="median 0.5 < threshold 0.8 (iqr 0, k=7)",
        threshold=0.8,
        # No budgets were set, yet the usage is measured: p50 and p95 of 100..700 ms.
        stats=Stats(
            median=0.5,
            iqr=0.0,
            pass_rate=0.0,
            p50_latency_ms=400.0,
            p95_latency_ms=670.0,
            mean_tokens=400.0,
            mean_cost_usd=0.002,
        ),
        trials=records,
        checks=[
            make_check("errors", "0", "<= 0"),
            make_check("violations", "0", "0"),
            make_check("iqr", "0", "<= 0.03"),
            make_check("collapse fence", "min 0.5", ">= 0.41"),
            make_check("median", "0.5", ">= 0.8", ok=False),
        ],
    )
    markdown = render_summary(artefact(failing, exit_code=1))
    (row,) = table_rows(markdown)
    assert row[7] == "p50 400 ms, p95 670 ms, 400 tokens, $0.002"
    details = markdown.split("### Details", 1)[1]
    assert "<details><summary>slowpoke" in details
    assert "FAIL median 0.5 &lt; 0.8" in details and "ok   iqr 0 &lt;= 0.03" in details


def test_control_characters_never_reach_the_summary() -> None:
    run = artefact(report("esc", Status.FAIL, reason="a\x00b\x1b[31mred\x7f"), exit_code=1)
    markdown = render_summary(run)
    assert "\x00" not in markdown and "\x1b" not in markdown and "\x7f" not in markdown
    assert "abred" in markdown, "the colour sequence goes whole, not only its ESC"


def test_an_errored_eval_shows_no_numbers_from_its_few_scored_trials() -> None:
    errored = report("outage", Status.ERROR, stats=Stats(median=0.92, iqr=0.0, pass_rate=1.0))
    (row,) = table_rows(render_summary(artefact(errored, exit_code=3)))
    assert row[2:6] == ["-", "-", "7", "-"]


LIMITED_WRITER = """
import resource, sys
from pathlib import Path
from firewall.github.actions.summary import append_summary
path, room = Path(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + room, resource.RLIM_INFINITY))
try:
    append_summary(path, "## ours\\n" + "| row |\\n" * 1000)
except OSError as exc:  # what firewall.github.publish catches, turning it into a warning
    print(exc)
"""


def test_a_summary_cut_off_part_way_leaves_no_half_of_it(tmp_path: Path) -> None:
    # A file-size limit lets the kernel write what fits, then refuses the rest (EFBIG),
    # as a full disk does: GitHub would show a table cut in the middle of a row.
    path = tmp_path / "step_summary"
    path.write_text("# earlier step\n", encoding="utf-8")
    limited = subprocess.run(
        [sys.executable, "-c", LIMITED_WRITER, str(path), "1000"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert path.read_text(encoding="utf-8") == "# earlier step\n"
    assert limited.stdout.startswith(
        f"{path}: could not append the job summary (File too large); what it had written "
        "was cut back, so the file is as it was;"
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_summary_on_a_full_disk_fails_with_the_file_named() -> None:
    with pytest.raises(WriteError) as caught:
        append_summary(Path("/dev/full"), "## ours")
    assert isinstance(caught.value, OSError)
    assert str(caught.value) == (
        "/dev/full: could not append the job summary (No space left on device); nothing of it "
        "was written; free space on its disk (or raise the quota) and run again"
    )
