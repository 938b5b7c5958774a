"""The pull request's one comment: found by its marker, created once, edited on every run.

What it says is ``report.comment``'s; this module only finds, creates and edits
it. A pull request's conversation comments are issue comments on its number
(they work even where issues are disabled), and only the issue endpoints are
called: ``issues: write`` (or ``pull-requests: write``) is all the token needs,
where ``GET /pulls/N`` would also need ``pull-requests: read`` in a private
repository. The comment is the one whose first line is the job's marker
(``report.comment.marker``: its workflow, job id, matrix leg and shard, so that
each job on a pull request keeps a comment of its own); a person quoting it
starts with ``>`` and is never taken for it. A job that finds no comment of its
own takes over an older release's: its job's without the matrix leg (the one
the legs used to share), else the bare marker's. Of two (two runs at once each
created one) the oldest is edited and the others are deleted.

Like issues it never changes a decision: a token that may not comment (a fork's
pull request, or a workflow without the permission: the warning says which), a
rate limit, an outage, an answer that is not GitHub's JSON or the end of the
run's time for GitHub is one warning, and the next run edits the comment.
PyGithub's objects are reached through ``client.Session``; nothing here imports it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from firewall.artefact import Artefact
from firewall.errors import IssueError
from firewall.github.budget import Budget, BudgetSpent, spent_warning
from firewall.github.client import Session, session_from_environment
from firewall.github.problems import message_of
from firewall.github.transport import DEFAULT_TRANSPORT, Transport
from firewall.policy import Status
from firewall.report.comment import MARKER, describe, marker, render_comment
from firewall.secrets import Secrets

__all__ = ["GitHubComment", "Posted", "fork_of", "job_of", "publish_comment", "summary_url"]

_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


@dataclasses.dataclass(frozen=True)
class Posted:
    url: str
    created: bool  # False: the comment was there and was edited (or already said this)


class GitHubComment(Session):
    """The firewall's comment on a pull request, through PyGithub's issue endpoints."""

    fork: str | None = None  # the fork a pull request comes from: a 403 is then its token's

    def post(self, number: int, body: str, *, older: Sequence[str] = (MARKER,)) -> Posted:
        """Edit this job's firewall comment on the pull request to say ``body`` (whose first
        line is the job's marker), or create it. With none of its own, the first comment
        found with one of the ``older`` markers, in their order, becomes this job's."""
        text = self.outgoing(body)
        mark = text.lstrip().split("\n", 1)[0]
        where = f"pull request #{number}"
        with self.calling(f"find the firewall's comment on {where}"):
            # `GET /repos/R` needs only the metadata every token reads; no `/pulls/` call.
            conversation = self._call(
                lambda: self._client.get_repo(self.repository).get_issue(number)
            )
            comments = self._call(lambda: list(conversation.get_comments()))
        ours = [c for c in comments if _marked(c.body or "", mark)]
        for previous in older:
            if ours:
                break
            if previous != mark:
                ours = [c for c in comments if _marked(c.body or "", previous)][:1]
        if not ours:
            with self.calling(f"comment on {where}"):
                made = self._call(lambda: conversation.create_comment(text))
            return Posted(url=made.html_url, created=True)
        first, *twins = ours
        if first.body != text:
            with self.calling(f"edit the firewall's comment on {where}"):
                self._call(lambda: first.edit(text))
        for twin in twins:
            with self.calling(f"delete a second firewall comment on {where}"):
                self._call(twin.delete)
        return Posted(url=first.html_url, created=False)

    def _refused(
        self,
        action: str,
        status: int,
        data: object,
        headers: Mapping[str, str] | None,
        eval_id: str | None,
        number: int | None,
    ) -> IssueError:
        message = message_of(data)
        if status != 403 or "not accessible by integration" not in message.lower():
            return super()._refused(action, status, data, headers, eval_id, number)
        if self.fork:
            why = (
                f"a pull request from the fork {self.fork} gets a read-only GITHUB_TOKEN, which "
                "may not comment; the job summary has the same report"
            )
        else:
            why = (
                "the token may not write the pull request's conversation: give the job "
                "`permissions: issues: write` (or `pull-requests: write`), or pass a token "
                "that may as the action's `github-token`"
            )
        return IssueError(f"GitHub refused to {action}: 403 {message} ({why})")


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
    fork: str | None = None,
) -> list[str]:
    """Post the run's comment on pull request #``pull``; the warnings to report.

    ``before``: the default branch's latest status of each eval. ``dry_run``: say what
    would be posted (through ``echo``) and call nothing. Without a token and a
    repository nothing is posted and nothing said, as for issues. ``fork``: the
    repository a pull request from a fork comes from (None: read from the event, see
    ``fork_of``). The secrets of ``env`` are taken out of the artefact before the
    comment quotes it (a reason cut to a cell's width would keep half of one) and out of
    the comment as it is sent.
    """
    secrets = Secrets.from_env(env)
    artefact = secrets.scrub_model(artefact)
    if dry_run:
        summary = secrets.scrub(describe(artefact, before, default_branch))
        echo(f"would comment on pull request #{pull}, or edit the firewall's comment: {summary}")
        return []
    job = job_of(env, artefact.run.shard)
    body = render_comment(
        artefact,
        before,
        default_branch=default_branch,
        summary_url=summary_url(env),
        job=job,
    )
    shared = job_of({**env, JOB_KEY: ""}, artefact.run.shard)  # what matrix legs used to share
    older = [marker(shared)] if shared != job else []
    try:
        poster = session_from_environment(GitHubComment, env, transport=transport, budget=budget)
        if poster is not None:
            poster.fork = fork or fork_of(env)
            poster.post(pull, body, older=[*older, MARKER])
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
    """Which job a run's comment belongs to: its workflow and job id, its matrix leg
    (``JOB_KEY``) and its shard; None outside Actions (or where neither id is set)."""
    parts = [env.get(name, "").strip() for name in ("GITHUB_WORKFLOW", "GITHUB_JOB")]
    named = " / ".join(part for part in parts if part)
    if not named:
        return None
    details = [leg_of(env.get(JOB_KEY, "")), f"shard {shard}" if shard else ""]
    said = ", ".join(detail for detail in details if detail)
    return f"{named} ({said})" if said else named


JOB_KEY = "FIREWALL_JOB_KEY"
"""Set by action.yml from its `job-key` input, whose default is ``toJSON(matrix)``: the legs
of one matrix share their workflow and job id (``GITHUB_JOB``) and differ only in this."""


def leg_of(key: str) -> str:
    """A matrix leg in a few words: ``toJSON(matrix)``'s values as ``name=value`` by name
    (``null`` or ``{}`` outside a matrix: nothing), or a key given by hand, as it is."""
    try:
        matrix = json.loads(key)
    except ValueError:
        return " ".join(key.split())
    if isinstance(matrix, dict):
        return ", ".join(f"{name}={_value(matrix[name])}" for name in sorted(matrix))
    return "" if matrix is None else _value(matrix)


def _value(value: object) -> str:
    if isinstance(value, str):
        return " ".join(value.split())
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def fork_of(env: Mapping[str, str]) -> str | None:
    """The repository a pull request comes from when it is a fork, from the event's payload
    (``pull_request.head.repo.full_name`` is not ``repository.full_name``); else None."""
    path = env.get("GITHUB_EVENT_PATH", "")
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8")) if path else None
    except (OSError, ValueError):
        return None
    if not isinstance(event, dict):
        return None
    pull, repository = event.get("pull_request"), event.get("repository")
    head = pull.get("head") if isinstance(pull, dict) else None
    source = head.get("repo") if isinstance(head, dict) else None
    name = source.get("full_name") if isinstance(source, dict) else None
    base = repository.get("full_name") if isinstance(repository, dict) else None
    if not isinstance(name, str) or not isinstance(base, str):
        return None
    return name if name.lower() != base.lower() else None


def _marked(body: str, mark: str) -> bool:
    """Whether a comment opens with exactly this marker line (a quote opens with ``>``)."""
    return body.lstrip().split("\n", 1)[0].rstrip() == mark
