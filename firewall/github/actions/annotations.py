"""Workflow-command annotations (contract §7): pure strings, nothing printed here.

Escaping mirrors GitHub's own toolkit (``@actions/core``, ``src/command.ts``),
so that whatever an eval put into its reason stays data: a forged
``\\n::error::`` or ``::set-output`` inside a reason cannot start a command of
its own, because the runner only parses a command at the start of a line and
no line break survives the escaping. Nor can a legacy ``##[error]`` in it: the
runner looks for ``##[`` only in a line that is not a ``::`` command already.
These lines are the only ones ``firewall.output`` prints as they are (on stderr).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from firewall.artefact import Artefact, EvalReport, severity
from firewall.policy import Status
from firewall.spec import Source

Kind = Literal["error", "warning", "notice"]
KINDS: tuple[Kind, ...] = ("error", "warning", "notice")

PER_STEP = 10
"""GitHub shows at most this many annotations of each kind per step."""

MORE_IN = "the job summary and the JSON report"
"""Where the notice says the evals left out are, when the job summary was written."""

TITLE = "Flakiness Firewall"
"""The title of the firewall's own warnings (GitHub unreachable, a file not written)."""

MESSAGE_LIMIT = 4000
"""Characters of a reason kept in an annotation; the job summary and the artefact keep it all."""

# Characters that str.splitlines() treats as line breaks besides CR and LF. The
# runner splits only on CR/LF, but a log viewer may break a line on these, so
# they become spaces before escaping.
_OTHER_BREAKS = dict.fromkeys(map(ord, "\v\f\x1c\x1d\x1e\x85\u2028\u2029"), " ")


def escape_data(s: str) -> str:
    """A command's message, escaped as ``escapeData`` in @actions/core command.ts."""
    # % first, or the escapes of CR and LF would be escaped again.
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(s: str) -> str:
    """A command's property value, escaped as ``escapeProperty`` in @actions/core command.ts."""
    # ':' would end the property list ('::'), ',' would start another property.
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


def annotation(
    kind: Kind,
    message: str,
    *,
    title: str | None = None,
    file: str | None = None,
    line: int | None = None,
) -> str:
    """One ``::kind title=...,file=...,line=...::message`` line, without its line break.

    Properties come in the toolkit's order (``toCommandProperties``) and, as
    there, empty ones are left out.
    """
    if kind not in KINDS:
        raise ValueError(f"annotation kind must be one of {', '.join(KINDS)}, got {kind!r}")
    properties = [
        f"{name}={escape_property(str(value))}"
        for name, value in (("title", title), ("file", file), ("line", line))
        if value
    ]
    head = f"{kind} {','.join(properties)}" if properties else kind
    return f"::{head}::{escape_data(message)}"


def annotations_for(
    artefact: Artefact,
    *,
    overdue: Sequence[str] = (),
    workspace: Path | None = None,
    limit: int = PER_STEP,
    problems: Sequence[str] = (),
    more_in: str = MORE_IN,
    said: int = 0,
) -> list[str]:
    """Every annotation of the step, in one budget: at most ``limit`` of each kind, the
    worst first, then a notice saying how many were left out and where they are.
    ``said``: warnings the command annotated already (its notices), in the same budget.

    The firewall's own ``problems`` (GitHub failing, a file not written) come first
    among the warnings and are never the ones cut: an eval's warning is in the job
    summary and the report anyway, a problem of the firewall is nowhere else. The
    notice is the step's only notice, so it is never itself dropped; ``more_in``
    is where it says the rest is (no job summary when it could not be written).

    ``workspace`` is ``$GITHUB_WORKSPACE``: annotation paths must be relative
    to it, while the artefact's are relative to the working directory.
    """
    reports = sorted(artefact.evals, key=severity)
    errors = [_eval_annotation("error", r, workspace) for r in reports if _is_error(r)]
    # New quarantines lead the warnings: they change the registry, a
    # non-blocking failure changes nothing.
    new_first = sorted(
        (r for r in reports if _is_warning(r)), key=lambda r: r.status is not Status.QUARANTINE
    )
    warnings = [_eval_annotation("warning", r, workspace) for r in new_first]
    warnings += [
        annotation(
            "warning",
            f"the quarantine of {eval_id} is due for review; see "
            "`firewall status` and release or re-date it",
            title=f"REVIEW OVERDUE {eval_id}",
        )
        for eval_id in overdue
    ]
    own = problem_annotations(problems, limit=max(1, limit - said)) if problems else []
    room = max(0, limit - said - len(own))
    lines = errors[:limit] + own + warnings[:room]
    left_out = _left_out(("error", len(errors) - limit), ("warning", len(warnings) - room))
    if left_out:
        lines.append(
            annotation(
                "notice",
                f"{left_out} not annotated (GitHub shows {limit} of each kind per step); "
                f"every eval is in {more_in}",
                title="More results in the job summary" if more_in == MORE_IN else "More results",
            )
        )
    return lines


def problem_annotations(problems: Sequence[str], *, limit: int = PER_STEP) -> list[str]:
    """The firewall's own warnings, at most ``limit``: the last one holds any beyond it."""
    texts = [_one_line(problem) for problem in problems]
    if len(texts) > limit:
        rest = texts[limit - 1 :]
        texts = [*texts[: limit - 1], f"{len(rest)} problems: " + " | ".join(rest)]
    return [annotation("warning", _one_line(text), title=TITLE) for text in texts]


def _is_error(report: EvalReport) -> bool:
    return report.blocking and report.status in (Status.FAIL, Status.ERROR)


def _is_warning(report: EvalReport) -> bool:
    nonblocking_failure = not report.blocking and report.status in (Status.FAIL, Status.ERROR)
    return nonblocking_failure or report.status is Status.QUARANTINE


def _eval_annotation(kind: Kind, report: EvalReport, workspace: Path | None) -> str:
    label = report.status.label
    if report.status in (Status.FAIL, Status.ERROR) and not report.blocking:
        label += " (non-blocking)"
    message = _one_line(report.reason)
    if report.status is Status.QUARANTINE:
        message += " -- newly quarantined: reported, not blocking, until it is stable again"
    file = _relative_to_workspace(report.source, workspace)
    if file is None:  # defined outside the repository: GitHub could not link it
        message += f" (defined at {report.source})"
    return annotation(
        kind,
        message,
        title=f"{label} {report.id}",
        file=file,
        line=report.source.line if file is not None else None,
    )


def _one_line(text: str) -> str:
    text = text.translate(_OTHER_BREAKS)
    if len(text) > MESSAGE_LIMIT:
        text = text[:MESSAGE_LIMIT] + "..."
    return text


def _relative_to_workspace(source: Source, workspace: Path | None) -> str | None:
    """The source file as GitHub wants it, or None when it lies outside the workspace."""
    path = Path(source.file)
    if workspace is None:
        return path.as_posix()
    absolute = Path(os.path.abspath(path))  # relative paths are from the working directory
    try:
        return absolute.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return None


def _left_out(*counts: tuple[str, int]) -> str:
    parts = [f"{n} more {kind}{'s' if n > 1 else ''}" for kind, n in counts if n > 0]
    return " and ".join(parts)
