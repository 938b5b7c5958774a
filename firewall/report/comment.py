"""The pull request's one comment (contract §7): the counts, what changed against the
default branch, and a link to the job summary.

Pure: the run's artefact and the default branch's latest status of each eval in,
Markdown out. ``github.comment`` finds the comment by its first line (``MARKER``),
and creates or edits it.

What changed is this run against the default branch's latest probe of each eval
in the history (``baseline``): *newly quarantined* (unstable here, not in
quarantine there), *newly failing* (FAIL or ERROR here, neither there) and
*fixed* (PASS here, FAIL or ERROR there). An eval the default branch never
probed counts as new here, and says so.

Nobody is pinged and nothing links by accident: every piece of eval text (ids,
reasons, owners) sits in a code span, where GitHub makes no mention, no `#123`
reference and no markup, longer than any backtick run inside it; ``@`` gets a
zero-width joiner as well, and ``<!--`` is broken so that no text can forge the
marker. The comment stays under GitHub's 65,536 characters: each list shows
``SHOWN`` evals at most, and lists are cut further if need be, each saying how
many it left out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence

from firewall.artefact import Artefact, EvalReport, severity
from firewall.constants import BASELINE_WINDOW
from firewall.policy import Status
from firewall.report import affected
from firewall.report.markdown import ICONS, STATUS_ICONS, URL_SAFE, counts, intervals
from firewall.store.history import HistoryRow
from firewall.text import printable

MARKER = "<!-- firewall:pull-request-comment -->"
"""The first line of the comment of a job that does not say which it is (outside Actions,
or before comments were kept per job); ``marker`` gives a job's own."""

JOB_CHARS = 120  # of a job's name, in its marker and its title
_DIGEST_CHARS = 12  # of the digest that ends a longer job's marker
_UNSAFE_IN_MARKER = re.compile(r"[^A-Za-z0-9 _./()-]")  # nothing that can end an HTML comment

MAX_COMMENT = 65_536
"""Characters GitHub keeps in a comment; a longer one is refused with a 422."""

SHOWN = 50  # evals listed under each heading; the job summary has every eval
REASON_CHARS = 300

_BASELINE_MODES = ("run", "gate", "nightly")
_FAILING = (Status.FAIL, Status.ERROR)
_IN_QUARANTINE = (Status.QUARANTINE, Status.QUARANTINED)
_MENTION = re.compile(r"@(?=\S)")
_ZWJ = "\u200d"


@dataclasses.dataclass(frozen=True)
class Difference:
    """One eval whose status differs from the default branch's in a way worth saying."""

    report: EvalReport
    before: Status | None  # the default branch's latest status; None: never probed there


@dataclasses.dataclass(frozen=True)
class Differences:
    quarantined: list[Difference]
    failing: list[Difference]
    fixed: list[Difference]
    compared: int  # evals of this run the default branch has a probe of

    @property
    def any(self) -> bool:
        return bool(self.quarantined or self.failing or self.fixed)


def baseline(rows: Iterable[HistoryRow], default_branch: str) -> dict[str, Status]:
    """The default branch's latest status of each eval, from history rows.

    Only runs on ``refs/heads/<default_branch>`` count (a pull request's rows never
    do), and only decided runs: not the weekly roll-ups of the shared history.
    """
    ref = f"refs/heads/{default_branch}"
    latest: dict[str, tuple[str, Status]] = {}
    for row in rows:
        if row.git_ref != ref or row.mode not in _BASELINE_MODES:
            continue
        try:
            status = Status(row.status)
        except ValueError:  # a newer firewall's status, or a hand edit
            continue
        held = latest.get(row.eval_id)
        if held is None or row.build_ts >= held[0]:
            latest[row.eval_id] = (row.build_ts, status)
    return {eval_id: status for eval_id, (_, status) in latest.items()}


def compare(artefact: Artefact, before: Mapping[str, Status]) -> Differences:
    """What this run changed against the default branch's statuses ``before``."""
    quarantined, failing, fixed = [], [], []
    for report in sorted(artefact.evals, key=severity):
        was = before.get(report.id)
        change = Difference(report, was)
        if report.status is Status.QUARANTINE and was not in _IN_QUARANTINE:
            quarantined.append(change)
        elif report.status in _FAILING and was not in _FAILING:
            failing.append(change)
        elif report.status is Status.PASS and was in _FAILING:
            fixed.append(change)
    compared = sum(1 for report in artefact.evals if report.id in before)
    return Differences(quarantined, failing, fixed, compared)


def render_comment(
    artefact: Artefact,
    before: Mapping[str, Status],
    *,
    default_branch: str | None,
    summary_url: str | None = None,
    limit: int = MAX_COMMENT,
    shown: int = SHOWN,
    job: str | None = None,
) -> str:
    """The comment's Markdown, at most ``limit`` characters, ``marker(job)`` its first line.

    ``before``: the default branch's latest status of each eval (``baseline``);
    ``summary_url``: the workflow run's page, where the job summary is; ``job``: which
    job's comment this is (``github.comment.job_of``), named in its title.
    """
    changes = compare(artefact, before)
    branch = code(default_branch) if default_branch else "the default branch"
    sections = [
        ("Newly failing", [_failing(c, branch) for c in changes.failing]),
        ("Newly quarantined", [_quarantined(c, branch) for c in changes.quarantined]),
        ("Fixed", [_fixed(c, branch) for c in changes.fixed]),
    ]
    kept = [min(len(items), shown) for _, items in sections]
    head = _head(artefact, changes, branch, default_branch is not None, job)
    foot = _foot(artefact, summary_url)
    text = _assemble(head, sections, kept, foot)
    while len(text) > limit and any(kept):  # the last list gives way first
        last = max(i for i, count in enumerate(kept) if count)
        kept[last] -= 1
        text = _assemble(head, sections, kept, foot)
    if len(text) > limit:
        raise ValueError(f"limit={limit} leaves no room for the comment's {len(text)} characters")
    return text


def describe(artefact: Artefact, before: Mapping[str, Status], default_branch: str | None) -> str:
    """The comment in one line, for a dry run to say what it would post."""
    changes = compare(artefact, before)
    against = default_branch or "the default branch"
    return (
        f"{artefact.summary.result.upper()}; against {against}: {len(changes.failing)} newly "
        f"failing, {len(changes.quarantined)} newly quarantined, {len(changes.fixed)} fixed"
    )


def marker(job: str | None = None) -> str:
    """The comment's first line, by which the next run of the same job finds it again.

    One comment per job (its workflow, its job id, its matrix leg, its shard), so that
    two jobs on one pull request keep a comment each instead of editing one in turns. The
    job's name keeps only characters that cannot end the HTML comment it sits in; a name
    longer than ``JOB_CHARS`` ends in a digest of the whole, so that two legs of a matrix
    that differ only past the cut keep two markers.
    """
    if not job:
        return MARKER
    name = re.sub(r"-{2,}", "-", _UNSAFE_IN_MARKER.sub("_", job))
    if len(name) > JOB_CHARS:
        digest = hashlib.sha256(job.encode()).hexdigest()[:_DIGEST_CHARS]
        name = f"{name[: JOB_CHARS - _DIGEST_CHARS - 1]} {digest}"
    return f"<!-- firewall:pull-request-comment job={name} -->"


def code(text: str, limit: int = REASON_CHARS) -> str:
    """Text as one inline code span that no backtick inside it can end, and in which
    nobody is mentioned and no marker begins."""
    text = " ".join(printable(text).split())
    if len(text) > limit:
        text = text[:limit] + "…"
    text = _MENTION.sub("@" + _ZWJ, text or " ").replace("<!--", "<" + _ZWJ + "!--")
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


AFFECTED_SHOWN = 10  # probed evals named, each with the input that made it affected


def _head(
    artefact: Artefact, changes: Differences, branch: str, known: bool, job: str | None
) -> str:
    result = artefact.summary.result
    title = result.upper() + ("" if artefact.run.complete else " (interrupted)")
    if job:
        title += f" · {code(job, JOB_CHARS)}"
    heading = f"## {ICONS[result]} Flakiness Firewall: {title}"
    lines = [marker(job), heading, "", counts(artefact), ""]
    if said := affected.markdown(artefact, shown=AFFECTED_SHOWN):
        lines += [said, ""]
    if not known:
        lines.append(
            "The default branch is not known here, so every eval counts as new: nothing is "
            "compared."
        )
    elif not changes.compared and artefact.evals:
        days = BASELINE_WINDOW.days
        lines.append(
            f"{branch} has no probe of these evals in the history of the last {days} days, so "
            "every eval counts as new."
        )
    elif changes.any:
        lines.append(f"Against the latest probe of each eval on {branch}:")
    else:
        lines.append(f"Nothing changed against the latest probe of each eval on {branch}.")
    return "\n".join(lines)


def _failing(change: Difference, branch: str) -> str:
    report = change.report
    label = report.status.label + ("" if report.blocking else ", non-blocking")
    icon = STATUS_ICONS[report.status] if report.blocking else "⚠️"
    return (
        f"{icon} {code(report.id)} {label} ({_was(change, branch)}): {code(report.reason)}"
        f"{_intervals(report)}"
    )


def _quarantined(change: Difference, branch: str) -> str:
    report = change.report
    owner = f", owner {code(report.owner)}" if report.owner else ""
    return (
        f"{STATUS_ICONS[report.status]} {code(report.id)} ({_was(change, branch)}{owner}): "
        f"{code(report.reason)}{_intervals(report)}"
    )


def _intervals(report: EvalReport) -> str:
    """The median's and the mean's intervals after a line, where the probe scored."""
    said = intervals(report.stats)
    return f"; {code(said)}" if said else ""


def _fixed(change: Difference, branch: str) -> str:
    return f"✅ {code(change.report.id)} ({_was(change, branch)})"


def _was(change: Difference, branch: str) -> str:
    if change.before is None:
        return f"new: no probe on {branch}"
    return f"{change.before.label} on {branch}"


def _assemble(
    head: str, sections: Sequence[tuple[str, Sequence[str]]], kept: Sequence[int], foot: str
) -> str:
    parts = [head]
    for (title, items), count in zip(sections, kept, strict=True):
        if not items:
            continue
        lines = [f"**{title}** ({len(items)})", ""]
        lines += [f"- {item}" for item in items[:count]]
        if count < len(items):
            lines.append(f"- … and {len(items) - count} more: the job summary has every eval")
        parts.append("\n".join(lines))
    parts.append(foot)
    return "\n\n".join(parts) + "\n"


def _foot(artefact: Artefact, summary_url: str | None) -> str:
    summary = "The job summary"
    if summary_url and summary_url.startswith(("https://", "http://")):
        summary = f"[{summary}]({urllib.parse.quote(summary_url, safe=URL_SAFE)})"
    said = [f"{summary} has every eval"]
    if artefact.run.git_sha:
        said.append(f"commit {code(artefact.run.git_sha[:12])}")
    said.append("this comment is edited on every run of the pull request")
    return "<sub>" + " · ".join(said) + "</sub>"
