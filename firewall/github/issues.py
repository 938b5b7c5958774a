"""GitHub issues for quarantined evals: the tracker interface, what the issues say, catch-up.

The rest of the firewall talks to an ``IssueTracker``: ``client.GitHubIssues``
does it for real through PyGithub (imported there only, and only when issues
are on), ``RecordingIssues`` only says what it would do (``--dry-run``,
``--no-issues``). An issue is found again by its label and the marker
``<!-- firewall:eval=ID -->`` in its body, so the registry can lose an issue
number and the next run still finds the issue.

Eval output quoted in an issue cannot ping anyone or break the Markdown:
``@`` gets a zero-width joiner, quotes are fenced longer than any backtick
run inside them, and HTML comments are broken so no marker can be forged.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import jinja2

from firewall.artefact import EvalReport
from firewall.diagnostics import (
    FieldDrift,
    describe_drift,
    describe_flip,
    describe_hint,
    format_check,
)
from firewall.lifecycle import Entry, Event
from firewall.text import fmt
from firewall.timeutil import to_text

DEFAULT_LABEL = "flaky-eval"
MAX_FLIPS_SHOWN = 10
MAX_TRIALS_SHOWN = 40  # an issue body holds at most 65536 characters
MAX_FAILURES_SHOWN = 5
MAX_QUOTE_CHARS = 2000

_MARKER = re.compile(r"^<!-- firewall:eval=([A-Za-z0-9._/-]+) -->$", re.MULTILINE)
_STATUS_BLOCK = re.compile(r"<!-- firewall:status -->.*?<!-- /firewall:status -->", re.DOTALL)
_STATE = re.compile(r"<!-- firewall:state=([a-z]+) -->")
_MENTION = re.compile(r"@(?=[A-Za-z0-9_])")
_ZWJ = "\u200d"


@dataclasses.dataclass(frozen=True)
class IssueContext:
    """What an issue body needs: the probe, the registry entry, how to reproduce, the trend."""

    report: EvalReport | None  # the probe that quarantined it, or the nightly probe
    entry: Entry
    replay: str  # e.g. "firewall replay triage-tone --seed 1234"
    trend: str = ""  # sparkline of recent medians
    release_after: int | None = None  # stable nightly probes needed, for the status block


class IssueTracker(Protocol):
    def open_or_comment(self, eval_id: str, ctx: IssueContext) -> int | None:
        """Open the eval's issue, or comment on its open one; its number (None: none exists)."""

    def update_status(self, eval_id: str, issue: int, ctx: IssueContext, event: Event) -> None:
        """Refresh the status block; comment on a change of state; close on release."""

    def close(self, eval_id: str, issue: int | None, message: str) -> None:
        """Comment and close the eval's issue (the open one found by marker when None)."""

    def open_issues(self) -> dict[str, int]:
        """Open issues that carry the label and a marker: eval id -> issue number."""


class RecordingIssues:
    """A tracker that changes nothing on GitHub and records what it would have done."""

    def __init__(
        self, labels: Sequence[str] = (DEFAULT_LABEL,), echo: Callable[[str], None] | None = None
    ) -> None:
        self.labels = list(labels) or [DEFAULT_LABEL]
        self.actions: list[str] = []
        self._echo = echo

    def open_or_comment(self, eval_id: str, ctx: IssueContext) -> int | None:
        if ctx.entry.issue is not None:
            self._say(
                f"would comment on issue #{ctx.entry.issue} for {eval_id} (quarantined again)"
            )
            return ctx.entry.issue
        owner = ctx.entry.owner or (ctx.report.owner if ctx.report else None)
        assignee = f", assignee {owner.removeprefix('@')}" if owner else ""
        self._say(
            f"would open issue for {eval_id} (labels {', '.join(self.labels)}{assignee}),"
            f" or comment on its open one"
        )
        return None

    def update_status(self, eval_id: str, issue: int, ctx: IssueContext, event: Event) -> None:
        closing = " and close it (completed)" if event.kind == "released" else ""
        self._say(f"would update issue #{issue} for {eval_id}{closing}: {event.message}")

    def close(self, eval_id: str, issue: int | None, message: str) -> None:
        which = f"issue #{issue}" if issue is not None else "the open issue"
        self._say(f"would close {which} for {eval_id} (completed): {message}")

    def open_issues(self) -> dict[str, int]:
        return {}

    def _say(self, action: str) -> None:
        line = " ".join(action.split())  # eval text may not start a line of its own
        self.actions.append(line)
        if self._echo is not None:
            self._echo(line)


def catch_up(
    tracker: IssueTracker,
    entries: Mapping[str, Entry],
    context: Callable[[str, Entry], IssueContext],
    record: Callable[[str, int], None],
    *,
    close_strays: bool,
) -> None:
    """Make GitHub agree with the registry, which is the truth.

    An entry without its open issue adopts the one found by marker, or gets a
    new one; ``record`` hears each number as soon as it is known, so a failure
    half-way keeps what was done. With ``close_strays``, an open labelled issue
    whose eval is no longer quarantined is closed.
    """
    found = tracker.open_issues()
    for eval_id, entry in sorted(entries.items()):
        number = found.get(eval_id)
        if number is None:
            number = tracker.open_or_comment(eval_id, context(eval_id, entry))
        if number is not None and number != entry.issue:
            record(eval_id, number)
    if close_strays:
        for eval_id, number in sorted(found.items()):
            if eval_id not in entries:
                tracker.close(eval_id, number, "no longer in the quarantine registry")


# --- issue text


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
        **quarantine_view(eval_id, ctx),
        threshold=report.threshold if report else None,
        flakiness=report.flakiness if report else None,
        pass_rate=f"{passed} of {len(trials)}" if trials else "",
        since=to_text(entry.since),
        owner=entry.owner or (report.owner if report else None),
        source=str(report.source) if report else None,
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
        **_diagnostics_view(report),
    )


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
        "hints": [describe_hint(hint) for hint in report.hints],
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


def marked_eval(body: str) -> str | None:
    match = _MARKER.search(body)
    return match.group(1) if match else None


def recorded_state(body: str) -> str:
    match = _STATE.search(body)
    return match.group(1) if match else "unstable"  # what an issue starts as


def replace_status(body: str, block: str) -> str:
    """The body with its status block replaced in place, or appended if someone removed it."""
    if _STATUS_BLOCK.search(body):
        return _STATUS_BLOCK.sub(lambda _: block.strip(), body, count=1)
    return f"{body.rstrip()}\n\n{block.strip()}\n"


def neutralise(text: str) -> str:
    """Eval text that can neither ping anyone nor forge a marker: a joiner after `@` and `<`."""
    return _MENTION.sub("@" + _ZWJ, text).replace("<!--", "<" + _ZWJ + "!--")


def inline_code(text: str) -> str:
    """One line of eval text as a code span no backtick inside it can end."""
    text = " ".join(text.split())[:MAX_QUOTE_CHARS] or " "
    ticks = "`" * (_longest_backtick_run(text) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{ticks}{pad}{neutralise(text)}{pad}{ticks}"


def fenced(text: str, info: str = "") -> str:
    """Eval output in a fence longer than any backtick run inside it."""
    if len(text) > MAX_QUOTE_CHARS:
        text = f"{text[:MAX_QUOTE_CHARS]}\n… ({len(text) - MAX_QUOTE_CHARS} more characters)"
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    return f"{fence}{info}\n{neutralise(text.rstrip())}\n{fence}"


def quoted(text: str) -> str:
    return fenced(text) if "\n" in text.strip() else inline_code(text)


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _number(value: float | int | None) -> str:
    return "n/a" if value is None else fmt(value)


def _finalize(value: Any) -> Any:
    # Whatever reaches the page is neutralised, even a value a template forgot to quote.
    return neutralise(value) if isinstance(value, str) else value


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
