"""What the firewall's issues and comments say, rendered from the templates beside it.

Eval output quoted in an issue cannot ping anyone or break the Markdown:
``@`` gets a zero-width joiner, quotes are fenced longer than any backtick
run inside them, and HTML comments are broken so no marker can be forged.
Every byte of eval text reaches the page through a quoting filter (``code``,
``fence``, ``quote``) or pre-quoted here (the likely causes); a value a
template forgot to quote is still escaped, so that no tag, link, image or
table cell can come of it (the environment's ``finalize``).
"""

from __future__ import annotations

import html
import re
from typing import Any

import jinja2

from firewall.artefact import EvalReport
from firewall.diagnostics import (
    Cause,
    FieldDrift,
    describe_drift,
    describe_flip,
    describe_hint,
    format_check,
)
from firewall.github.issues import IssueContext, ProposalKind
from firewall.github.markers import Closing, closing_marker, json_marker
from firewall.lifecycle import Candidate, Event, ProbeNumbers
from firewall.text import fmt
from firewall.timeutil import to_text

MAX_FLIPS_SHOWN = 10
MAX_TRIALS_SHOWN = 40  # an issue body holds at most 65536 characters (markers.fit cuts the rest)
MAX_FAILURES_SHOWN = 5
MAX_QUOTE_CHARS = 2000

_MENTION = re.compile(r"@(?=[A-Za-z0-9_])")
_ZWJ = "\u200d"
_MARKUP = re.compile(r"([\\`\[\]|])")
_PIPE = re.compile(r"(\\*)\|")


class Quoted(str):
    """Text a quoting filter made inert; ``finalize`` passes it through as it is."""


def issue_title(eval_id: str) -> str:
    return f"Flaky eval quarantined: {eval_id}"


def render_body(eval_id: str, ctx: IssueContext) -> str:
    report, entry = ctx.report, ctx.entry
    trials = sorted(report.trials, key=lambda t: t.index) if report else []
    failures = [
        {
            "index": t.index,
            "seed": t.seed,
            "what": "errored" if t.error else "broke",
            "text": t.error or ", ".join(t.violations),
        }
        for t in trials
        if t.error or t.violations
    ]
    passed = sum(1 for t in trials if t.passed)
    return render_template(
        "issue_body.md.j2",
        **(quarantine_view(eval_id, ctx) | {"git_sha": _cell(entry.git_sha)}),
        threshold=report.threshold if report else None,
        flakiness=report.flakiness if report else None,
        pass_rate=f"{passed} of {len(trials)}" if trials else "",
        since=to_text(entry.since),
        owner=_cell(entry.owner or (report.owner if report else None)),
        source=_cell(str(report.source) if report else None),
        trials=[
            {
                "index": t.index,
                "seed": t.seed,
                "score": t.score,
                "in_flight": t.in_flight,
                "passed": "error" if t.error else ("yes" if t.passed else "no"),
            }
            for t in trials[:MAX_TRIALS_SHOWN]
        ],
        more_trials=max(0, len(trials) - MAX_TRIALS_SHOWN),
        failures=failures[:MAX_FAILURES_SHOWN],
        status=status_view(ctx, None, "unstable"),
        judge=_judge_view(report),
        **_diagnostics_view(report),
    )


def _judge_view(report: EvalReport | None) -> dict[str, Any] | None:
    """What the issue says of an eval whose judge scatters, or None: its judge rule
    quarantined it, or the split of its variance finds the judge the larger source
    (``firewall.judging``). Then the issue says what to pin, and names the judge."""
    if report is None:
        return None
    failed = next((c for c in report.checks if c.name == "judge" and not c.ok), None)
    hint = next((h for h in report.hints if h.kind is Cause.JUDGE), None)
    if hint is not None:
        evidence = hint.evidence
    elif failed is not None:
        evidence = failed.actual
    else:
        return None
    judge = next((t.judged.judge for t in report.trials if t.judged is not None), None)
    return {"target": judge, "evidence": evidence, "alone": failed is not None}


def candidate_title(eval_id: str) -> str:
    return f"Flaky eval candidate: {eval_id}"


def render_candidate_body(eval_id: str, candidate: Candidate) -> str:
    body = render_template("candidate_body.md.j2", eval_id=eval_id, **_numbers(candidate))
    return f"{body.rstrip()}\n\n{json_marker('candidate', candidate)}\n"


def render_candidate_comment(candidate: Candidate, *, again: bool) -> str:
    text = render_template("candidate_comment.md.j2", again=again, **_numbers(candidate))
    return f"{text.rstrip()}\n\n{json_marker('candidate', candidate)}\n"


def render_dismissal(eval_id: str, reprobe: ProbeNumbers, candidate: Candidate | None) -> str:
    text = render_template(
        "candidate_dismissed.md.j2",
        eval_id=eval_id,
        candidate_pr=candidate.pr if candidate else None,
        **_numbers(reprobe),
    )
    return with_closing(f"{text.rstrip()}\n\n{json_marker('dismissed', reprobe)}", "dismissed")


def render_proposal(eval_id: str, pull: int, change: ProposalKind) -> str:
    text = render_template("proposal_comment.md.j2", eval_id=eval_id, pull=pull, change=change)
    return f"{text.rstrip()}\n\n{proposal_marker(pull, change)}\n"


def proposal_marker(pull: int, change: ProposalKind) -> str:
    return json_marker("proposed", {"pr": pull, "change": change})


def render_duplicate(eval_id: str, original: int) -> str:
    text = render_template("issue_comment_duplicate.md.j2", eval_id=eval_id, original=original)
    return with_closing(text, "duplicate")


def with_closing(comment: str, why: Closing) -> str:
    """A closing comment that says, to the firewall's later runs, why it closed the issue."""
    return f"{comment.rstrip()}\n\n{closing_marker(why)}\n"


def _numbers(probe: ProbeNumbers) -> dict[str, Any]:
    return {
        "pr": probe.pr if isinstance(probe, Candidate) else None,
        "ref": _cell(probe.ref),
        "sha": _cell(probe.sha),
        "median": probe.median,
        "iqr": probe.iqr,
        "k": probe.k,
        "at": to_text(probe.at),
        "reason": probe.reason,
    }


def _diagnostics_view(report: EvalReport | None) -> dict[str, list[str]]:
    """Why it scatters: cause hints, every rule's check, flipping cases, drifting fields."""
    if report is None:
        return {"hints": [], "checks": [], "flips": [], "drift": []}
    drifting = [
        describe_drift(
            FieldDrift(
                name=name,
                drift=rate,
                distribution=report.distributions.get(name, []),
                trials=sum(v.count for v in report.distributions.get(name, [])),
            )
        )
        for name, rate in sorted(report.drift.items(), key=lambda item: -item[1])
        if rate > 0
    ]
    return {
        # A hint quotes model ids, field values and error text: all of it in a code span.
        "hints": [inline_code(describe_hint(hint)) for hint in report.hints],
        "checks": [format_check(check) for check in report.checks],
        "flips": [describe_flip(flip) for flip in report.flips[:MAX_FLIPS_SHOWN]],
        "drift": drifting[:MAX_FLIPS_SHOWN],
    }


def quarantine_view(eval_id: str, ctx: IssueContext) -> dict[str, Any]:
    report, entry = ctx.report, ctx.entry
    return {
        "eval_id": eval_id,
        "reason": report.reason if report else entry.reason,
        "median": report.stats.median if report else entry.median,
        "iqr": report.stats.iqr if report else entry.iqr,
        "k": report.k if report else entry.k,
        "git_sha": entry.git_sha,
        "replay": ctx.replay,
        "trend": ctx.trend,
    }


def status_view(ctx: IssueContext, event: Event | None, state: str) -> dict[str, Any]:
    view = quarantine_view("", ctx)
    last = ctx.entry.last_probe or ctx.entry.since
    return {
        "state": state,
        "streak": event.streak if event else ctx.entry.stable_streak,
        "release_after": (event.release_after if event else 0) or ctx.release_after,
        "last_probe": to_text(last),
        "median": view["median"],
        "iqr": view["iqr"],
        "k": view["k"],
        "trend": ctx.trend,
        "message": event.message if event else "",
    }


def neutralise(text: str) -> str:
    """Eval text that can neither ping anyone nor forge a marker: a joiner after `@` and `<`."""
    return _MENTION.sub("@" + _ZWJ, text).replace("<!--", "<" + _ZWJ + "!--")


def escape_markdown(text: str) -> str:
    """Text shown as it is: no tag, entity, link, image, code span or table cell comes of it.

    Entities first, then backslashes, as ``report.markdown.cell`` does. Emphasis
    is left alone: the templates' own words use it, and it cannot hide anything.
    """
    return _MARKUP.sub(r"\\\1", html.escape(neutralise(text), quote=False))


def inline_code(text: str) -> Quoted:
    """One line of eval text as a code span no backtick inside it can end."""
    text = " ".join(text.split())[:MAX_QUOTE_CHARS] or " "
    ticks = "`" * (_longest_backtick_run(text) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return Quoted(f"{ticks}{pad}{neutralise(text)}{pad}{ticks}")


def fenced(text: str, info: str = "") -> Quoted:
    """Eval output in a fence longer than any backtick run inside it."""
    if len(text) > MAX_QUOTE_CHARS:
        text = f"{text[:MAX_QUOTE_CHARS]}\n… ({len(text) - MAX_QUOTE_CHARS} more characters)"
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    return Quoted(f"{fence}{info}\n{neutralise(text.rstrip())}\n{fence}")


def quoted(text: str) -> Quoted:
    return fenced(text) if "\n" in text.strip() else inline_code(text)


def _cell(text: str | None) -> str | None:
    """Text for a table cell's code span: a `|` would split the row even there.

    GitHub's escape is `\\|`, and only an odd run of backslashes escapes, so a run
    before a pipe is doubled first (the page then shows it doubled, never split).
    """
    return None if text is None else _PIPE.sub(lambda run: run[1] * 2 + "\\|", text)


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _number(value: float | int | None) -> str:
    return "n/a" if value is None else fmt(value)


def _finalize(value: Any) -> Any:
    # Whatever reaches the page is neutralised, even a value a template forgot to quote.
    if isinstance(value, Quoted):
        return neutralise(value)
    return escape_markdown(value) if isinstance(value, str) else value


_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("firewall.github", "templates"),
    autoescape=False,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    finalize=_finalize,
)
_TEMPLATES.filters.update(code=inline_code, fence=fenced, quote=quoted, num=_number)


def render_template(name: str, **values: Any) -> str:
    return _TEMPLATES.get_template(name).render(**values)
