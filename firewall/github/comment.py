"""The pull request's one comment: found by its marker, created once, edited on every run.

What it says is ``report.comment``'s; this module only finds, creates and edits
it. A pull request's conversation comments are issue comments on its number
(they work even where issues are disabled). The comment is the one whose first
line is the job's marker (``report.comment.marker``: its workflow, job id and
shard, so that each job on a pull request keeps a comment of its own); a person
quoting it starts with ``>`` and is never taken for it. A job that finds no
comment of its own takes over one with the bare marker, from before comments
were kept per job. Of two (two runs at once each created one) the oldest is
edited and the others are deleted.

Like issues it never changes a decision: a read-only token (a fork's pull
request), a rate limit, an outage, an answer that is not GitHub's JSON or the end
of the run's time for GitHub is one warning, and the next run edits the comment.
PyGithub's objects are reached through ``client.Session``; nothing here imports it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping

from firewall.artefact import Artefact
from firewall.errors import IssueError
from firewall.github.budget import Budget, BudgetSpent, spent_warning
from firewall.github.client import Session, session_from_environment
from firewall.github.transport import DEFAULT_TRANSPORT, Transport
from firewall.policy import Status
from firewall.report.comment import MARKER, describe, render_comment
from firewall.secrets import Secrets

__all__ = ["GitHubComment", "Posted", "job_of", "publish_comment", "summary_url"]

_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


@dataclasses.dataclass(frozen=True)
class Posted:
    url: str
    created: bool  # False: the comment was there and was edited (or already said this)


class GitHubComment(Session):
    """The firewall's comment on a pull request, through PyGithub."""

    def post(self, number: int, body: str) -> Posted:
        """Edit this job's firewall comment on the pull request to say ``body`` (whose first
        line is the job's marker), or create it."""
        text = self.outgoing(body)
        mark = text.lstrip().split("\n", 1)[0]
        where = f"pull request #{number}"
        with self.calling(f"find the firewall's comment on {where}"):
            pull = self._call(lambda: self._client.get_repo(self.repository).get_pull(number))
            comments = self._call(lambda: list(pull.get_issue_comments()))
        ours = [c for c in comments if _marked(c.body or "", mark)]
        if not ours and mark != MARKER:  # a comment from before comments were kept per job
            ours = [c for c in comments if _marked(c.body or "", MARKER)][:1]
        if not ours:
            with self.calling(f"comment on {where}"):
                made = self._call(lambda: pull.create_issue_comment(text))
            return Posted(url=made.html_url, created=True)
        first, *twins = ours
        if first.body != text:
            with self.calling(f"edit the firewall's comment on {where}"):
                self._call(lambda: first.edit(text))
        for twin in twins:
            with self.calling(f"delete a second firewall comment on {where}"):
                self._call(twin.delete)
        return Posted(url=first.html_url, created=False)


def publish_comment(
    artefact: Artefact,
    *,
    pull: int,
    before: Mapping[str, Status],
    default_branch: str | None,
    env: Mapping[str, str],
    dry_run: bool,
    echo: Callable[[str], None],
    budget: Budget | None = None,
    transport: Transport = DEFAULT_TRANSPORT,
) -> list[str]:
    """Post the run's comment on pull request #``pull``; the warnings to report.

    ``before``: the default branch's latest status of each eval. ``dry_run``: say what
    would be posted (through ``echo``) and call nothing. Without a token and a
    repository nothing is posted and nothing said, as for issues. The secrets of
    ``env`` are taken out of the artefact before the comment quotes it (a reason cut
    to a cell's width would keep half of one) and out of the comment as it is sent.
    """
    secrets = Secrets.from_env(env)
    artefact = secrets.scrub_model(artefact)
    if dry_run:
        summary = secrets.scrub(describe(artefact, before, default_branch))
        echo(f"would comment on pull request #{pull}, or edit the firewall's comment: {summary}")
        return []
    body = render_comment(
        artefact,
        before,
        default_branch=default_branch,
        summary_url=summary_url(env),
        job=job_of(env, artefact.run.shard),
    )
    try:
        poster = session_from_environment(GitHubComment, env, transport=transport, budget=budget)
        if poster is not None:
            poster.post(pull, body)
    except BudgetSpent as exc:
        return [spent_warning(exc, "the pull request's comment")]
    except IssueError as exc:
        return [
            f"{exc}; the decision and exit code stand, and the next run updates the pull "
            "request's comment"
        ]
    return []


def summary_url(env: Mapping[str, str]) -> str | None:
    """The workflow run's page (this attempt's), where GitHub shows the job summary."""
    server = env.get("GITHUB_SERVER_URL", "").rstrip("/")
    repository, run = env.get("GITHUB_REPOSITORY", ""), env.get("GITHUB_RUN_ID", "")
    if not server.startswith(("https://", "http://")) or not _REPOSITORY.fullmatch(repository):
        return None
    if not run.isdigit():
        return None
    url = f"{server}/{repository}/actions/runs/{run}"
    attempt = env.get("GITHUB_RUN_ATTEMPT", "")
    return f"{url}/attempts/{attempt}" if attempt.isdigit() else url


def job_of(env: Mapping[str, str], shard: str | None = None) -> str | None:
    """Which job a run's comment belongs to: its workflow and job id, and its shard; None
    outside Actions (or where neither is set)."""
    parts = [env.get(name, "").strip() for name in ("GITHUB_WORKFLOW", "GITHUB_JOB")]
    named = " / ".join(part for part in parts if part)
    if not named:
        return None
    return f"{named} (shard {shard})" if shard else named


def _marked(body: str, mark: str) -> bool:
    """Whether a comment opens with exactly this marker line (a quote opens with ``>``)."""
    return body.lstrip().split("\n", 1)[0].rstrip() == mark
