"""What a run leaves in a GitHub Actions job: annotations, the job summary, step outputs.

Only when ``GITHUB_ACTIONS=true``. Nothing here may change a decision or an
exit code: a summary or output file that cannot be written becomes a warning.
The files are written first, so that the annotations (one budget for the
evals' and the firewall's own warnings) can say what went wrong writing them.

No secret of the job's environment (``firewall.secrets``) reaches the summary,
the outputs or the annotations (which GitHub keeps on the pull request): the
artefact is scrubbed before anything is rendered from it, and each text after.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path

from firewall.artefact import Artefact
from firewall.errors import WriteError
from firewall.github import in_actions
from firewall.github.actions.annotations import MORE_IN, annotations_for
from firewall.github.actions.outputs import outputs_for, write_outputs
from firewall.github.actions.summary import append_summary
from firewall.lifecycle import Entry, overdue
from firewall.report import status as triage
from firewall.report.markdown import render_summary
from firewall.secrets import Secrets


@dataclasses.dataclass
class Publication:
    """The annotations to print (the problems among them), and the problems met."""

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
    problems: Sequence[str] = (),
    said: int = 0,
) -> Publication:
    """The summary and outputs written (unless a dry run), then every annotation to print.

    ``problems`` are what went wrong earlier in the command (GitHub failing):
    they are annotated first, within the step's budget, of which the command's
    notices took ``said`` warnings already.
    """
    if not in_actions(env):
        return Publication(problems=list(problems))
    secrets = Secrets.from_env(env)
    artefact = secrets.scrub_model(artefact)
    late = overdue(dict(entries), at)
    workspace = Path(env["GITHUB_WORKSPACE"]) if env.get("GITHUB_WORKSPACE") else None
    result = Publication(problems=list(problems))
    if report_path is None:  # a dry run changes no file, the step's files included
        more_in = "the output above (a dry run writes no summary or report)"
    elif _write_files(
        artefact, report_path, entries, trends, env, late, issue_links, result, secrets
    ):
        more_in = MORE_IN
    else:
        more_in = "the JSON report"
    result.problems = secrets.scrub_data(result.problems)
    result.annotations = secrets.scrub_data(
        annotations_for(
            artefact,
            overdue=late,
            workspace=workspace,
            problems=result.problems,
            more_in=more_in,
            said=said,
        )
    )
    return result


def _write_files(
    artefact: Artefact,
    report_path: Path,
    entries: Mapping[str, Entry],
    trends: Mapping[str, str],
    env: Mapping[str, str],
    late: Sequence[str],
    issue_links: Mapping[str, str] | None,
    result: Publication,
    secrets: Secrets,
) -> bool:
    """The job summary and the step outputs; whether the summary was written."""
    written = False
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
            append_summary(Path(env["GITHUB_STEP_SUMMARY"]), secrets.scrub(markdown))
        except WriteError as exc:  # names the file and what to do already
            result.problems.append(str(exc))
        except OSError as exc:
            result.problems.append(f"could not write the job summary: {exc}")
        else:
            written = True
    if env.get("GITHUB_OUTPUT"):
        try:
            outputs = secrets.scrub_data(outputs_for(artefact, report_path))
            write_outputs(Path(env["GITHUB_OUTPUT"]), outputs)
        except WriteError as exc:
            result.problems.append(str(exc))
        except (OSError, ValueError) as exc:
            result.problems.append(f"could not write the step outputs: {exc}")
    return written
