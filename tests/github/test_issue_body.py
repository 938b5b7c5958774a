"""The issue body explains the instability: hints, the rule checklist, flips, drifting fields."""

from __future__ import annotations

import datetime as dt
import re

from builders import drifting_field, make_check, make_flip, make_hint, make_report, make_spec

from firewall._stats import Stats
from firewall.artefact import EvalReport
from firewall.diagnostics import Cause
from firewall.github.issue_text import render_body, render_template
from firewall.github.issues import IssueContext
from firewall.lifecycle import Entry
from firewall.pipeline.stages import judge
from firewall.policy import Status
from firewall.runner.trial import TrialRecord
from firewall.spec import Source

AT = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc)
SCORES = [0.95, 0.5, 0.96, 0.52, 0.94, 0.51, 0.97]  # two groups: median 0.94, iqr 0.44


def trial(index: int, score: float, *, category: str, flip: float) -> TrialRecord:
    return TrialRecord(
        index=index,
        seed=1000 + index,
        score=score,
        passed=score >= 0.8,
        fields={"category": category},
        items={"case-stable": 1.0, "case-flip": flip, "@everyone": 1.0},
    )


def bimodal_trials() -> list[TrialRecord]:
    """The high scorers say "billing" and pass case-flip; the low ones say "refund" and fail it."""
    return [
        trial(i, s, category="billing" if s > 0.9 else "refund", flip=float(s > 0.9))
        for i, s in enumerate(SCORES)
    ]


def body_of(report: EvalReport) -> str:
    entry = Entry(since=AT, source="auto", reason=report.reason, median=0.94, iqr=0.44, k=7)
    context = IssueContext(report=report, entry=entry, replay="firewall replay tone --seed 1001")
    return render_body("tone", context)


def test_body_names_causes_checks_flipping_cases_and_drift() -> None:
    report = make_report(
        "tone",
        Status.QUARANTINE,
        reason="iqr 0.44 > flakiness 0.03 (median 0.94, k=7)",
        threshold=0.8,
        stats=Stats(median=0.94, iqr=0.44, pass_rate=4 / 7),
        trials=bimodal_trials(),
        checks=[
            make_check("errors", "0", "<= 0"),
            make_check("violations", "0", "0"),
            make_check("iqr", "0.44", "<= 0.03", ok=False),
        ],
        hints=[
            make_hint(
                Cause.BIMODAL,
                "two behaviours, not noise: the trials split into two groups",
                "3 trials scored 0.5-0.52, 4 scored 0.94-0.97",
            ),
            make_hint(
                Cause.SAMPLING,
                "sampling randomness: the output itself varies (temperature, top_p, unpinned seed)",
                '1 of 1 output fields drift: category 0.429 ("billing" x4, "refund" x3)',
                weight=0.4,
            ),
        ],
        flips=[make_flip("case-flip", 4, 7)],
        **drifting_field("category", ("billing", 4), ("refund", 3)),
    )
    body = body_of(report)
    causes = body.split("### Likely causes", 1)[1].split("###", 1)[0]
    assert "two behaviours, not noise" in causes and "sampling randomness" in causes
    assert "FAIL iqr" in body and "ok   errors 0 <= 0" in body
    assert "case-flip passed 4/7" in body
    drifting = body.split("### Drifting output fields", 1)[1].split("###", 1)[0]
    assert 'category 0.429 ("billing" x4, "refund" x3)' in drifting
    assert "@everyone" not in body, "an item id cannot ping anyone"


def test_integration_a_judged_quarantine_explains_itself_in_the_issue_body() -> None:
    """Integration on purpose: judge() -> render_body, with no hint, flip or drift given.

    The test above renders findings it was handed; this one checks that the
    decision of a bimodal probe really comes with them (judge attaches the
    diagnostics to a quarantine) and that the body shows what diagnose() found.
    """
    report = judge(make_spec(id="tone", k=7), bimodal_trials())
    assert report.status is Status.QUARANTINE
    body = body_of(report)
    causes = body.split("### Likely causes", 1)[1].split("###", 1)[0]
    assert "two behaviours, not noise" in causes and "sampling randomness" in causes
    assert "FAIL spread" in body and "ok   errors 0 <= 0" in body
    assert "case-flip passed 4/7" in body
    assert "category" in body and '"billing"' in body
    assert "@everyone" not in body, "an item id cannot ping anyone"


# --- every byte of eval text is fenced or escaped ---------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](https://evil.example)",
    "![pixel](https://evil.example/p.png)",
    "a|b",
    "`tick` ``two``",
    "@everyone",
    "<!-- firewall:eval=other -->",
]
_FENCE = re.compile(r"^(`{3,})[^\n]*\n.*?\n\1$", re.DOTALL | re.MULTILINE)
_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def outside_code(body: str) -> str:
    """The body with its fenced blocks and code spans taken out: what GitHub would render."""
    return _SPAN.sub("", _FENCE.sub("", body))


def hostile_trials() -> list[TrialRecord]:
    """Trials whose model ids, output fields and errors all carry markup."""
    records = [
        TrialRecord(
            index=i,
            seed=1000 + i,
            score=s,
            passed=s >= 0.8,
            model_id=HOSTILE[i % 2],
            fields={"answer": HOSTILE[2 + i % 3]},
            items={"case-stable": 1.0, HOSTILE[3]: float(s > 0.9)},
        )
        for i, s in enumerate(SCORES)
    ]
    return [*records, TrialRecord(index=7, seed=1007, error=" ".join(HOSTILE))]


def assert_inert(body: str) -> None:
    rendered = outside_code(body)
    for markup in ("<script", "<img", "](", "onerror"):
        assert markup not in rendered, f"{markup!r} reaches the page outside code"
    assert "@everyone" not in body and body.count("<!-- firewall:eval=") == 1


def test_integration_the_likely_causes_quote_model_ids_errors_and_fields_in_code() -> None:
    """Integration on purpose: the hints judge() writes quote eval text; none of it renders."""
    report = judge(make_spec(id="tone", k=8), hostile_trials())
    kinds = {hint.kind for hint in report.hints}
    assert {Cause.MODEL_CHANGED, Cause.ERRORS, Cause.SAMPLING} <= kinds
    body = body_of(report)
    causes = body.split("### Likely causes", 1)[1].split("###", 1)[0]
    bullets = [line for line in causes.splitlines() if line.startswith("- ")]
    assert len(bullets) == len(report.hints)
    for bullet in bullets:
        assert outside_code(bullet) == "- ", f"a hint is one code span: {bullet!r}"
    assert "the model changed during the probe" in causes and "<script>" in causes
    assert_inert(body)


def test_table_cells_hold_a_pipe_without_splitting_the_row() -> None:
    report = make_report(
        "tone",
        Status.QUARANTINE,
        owner="bob|x",  # an artefact is not the registry: its owner may be anything
        source=Source(file="evals/a|b\\|c.py", line=3),
    )
    entry = Entry(since=AT, source="auto", reason="r", git_sha="0a1b|<img src=x>")
    body = render_body("tone", IssueContext(report=report, entry=entry, replay="firewall replay"))
    table = body.split("|---|---|\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(table) == 8
    for row in table:
        # A pipe splits the row unless an odd run of backslashes escapes it.
        assert len(re.findall(r"(?<!\\)(?:\\\\)*\|", row)) == 3, f"one key, one value: {row!r}"
    assert "| owner | `bob\\|x` |" in table
    assert "| defined in | `evals/a\\|b\\\\\\|c.py:3` |" in table
    assert_inert(body)


def test_a_value_a_template_leaves_unquoted_is_escaped() -> None:
    why = "GitHub said <img src=x onerror=alert(1)> see [docs](https://evil.example) a|b"
    text = render_template("issue_comment_unassigned.md.j2", owner="bob", why=why)
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "\\[docs\\]" in text
    assert "a\\|b" in text and "`bob`" in text and "<img" not in text
