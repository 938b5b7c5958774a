"""What a run leaves in a GitHub Actions job: annotations, the job summary, step outputs.

Only when ``GITHUB_ACTIONS=true``. Nothing here may change a decision or an
exit code: a summary or output file that cannot be written becomes a warning.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from pathlib import Path

from firewall.artefact import Artefact
from firewall.github import in_actions
from firewall.github.annotations import annotations_for
from firewall.github.outputs import outputs_for, write_outputs
from firewall.github.summary import append_summary
from firewall.lifecycle import Entry, overdue
from firewall.report import status as triage
from firewall.report.markdown import render_summary


@dataclasses.dataclass
class Publication:
    annotations: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)


def publish(
    artefact: Artefact,
    *,
    report_path: Path | None,
    entries: Mapping[str, Entry],
    trends: Mapping[str, str],
    env: Mapping[str, str],
    at: dt.datetime,
    issue_links: Mapping[str, str] | None = None,
) -> Publication:
    """Annotations to print, and the summary and outputs written (unless a dry run)."""
    if not in_actions(env):
        return Publication()
    late = overdue(dict(entries), at)
    workspace = Path(env["GITHUB_WORKSPACE"]) if env.get("GITHUB_WORKSPACE") else None
    result = Publication(annotations_for(artefact, overdue=late, workspace=workspace))
    if report_path is None:  # a dry run changes no file, the step's files included
        return result
    links = dict(issue_links or {})
    for eval_id, entry in entries.items():
        url = triage.issue_url(entry.issue)
        if url and eval_id not in links:
            links[eval_id] = url
    if env.get("GITHUB_STEP_SUMMARY"):
        markdown = render_summary(
            artefact, trends=trends, issue_links=links, overdue=late, report=str(report_path)
        )
        try:
            append_summary(Path(env["GITHUB_STEP_SUMMARY"]), markdown)
        except OSError as exc:
            result.problems.append(f"could not write the job summary: {exc}")
    if env.get("GITHUB_OUTPUT"):
        try:
            write_outputs(Path(env["GITHUB_OUTPUT"]), outputs_for(artefact, report_path))
        except (OSError, ValueError) as exc:
            result.problems.append(f"could not write the step outputs: {exc}")
    return result
