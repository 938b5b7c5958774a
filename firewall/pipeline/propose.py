"""`firewall propose`: the nightly's registry changes as one rolling pull request.

In CI the registry is the reviewed truth. The nightly writes the changes a
reviewer must see (an adoption, a release, an edited entry) into the job's copy
of ``quarantine.json``; this stage compares that copy with the default branch's
and carries the difference to a fixed branch (``firewall/quarantine``) as one
commit on top of the default branch, then opens the pull request from it or
updates the open one. Night after night the same branch and the same pull
request are reused, and nothing is pushed when nothing a reviewer should see
has changed. When nothing is left to propose, the branch is deleted (GitHub
then closes its pull request). A proposal the maintainers closed without merging
is their answer: the same change set (the same evals to adopt, release and edit,
``fingerprint``, kept in the pull request's marker) is not proposed again, and
the branch is left as it is, so the pull request can still be reopened; a change
set that differs is proposed anew.

Git does the pushing, without touching the work tree; GitHub's API only opens or
edits the pull request. Both use one token: ``GITHUB_TOKEN`` (the action hands it
its `github-token` input), sent to an https remote on GitHub's host as the header
that `actions/checkout` persists (``store.git.push_auth``), in the environment of the push
alone: never on a command line, never in ``.git/config``. So a personal or App
token pushes the branch too, and the proposal's checks run night after night (a
push made with the job's GITHUB_TOKEN starts no workflow), and the push works
with `persist-credentials: false`. Other remotes (ssh, a path) push as git would.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from firewall.errors import GitError, ProposalRefused, PullRequestNotPermitted, UsageError
from firewall.lifecycle import Entry, reviewed_change
from firewall.pipeline.context import Context
from firewall.store.git import Git, StateError, push_auth
from firewall.store.registry import parse_registry, render
from firewall.text import fmt

if TYPE_CHECKING:
    from firewall.github.proposals import Closed, Proposal, PullRequests

PROPOSAL_BRANCH = "firewall/quarantine"
ChangeKind = Literal["adopt", "release", "edit"]


@dataclasses.dataclass(frozen=True)
class RegistryChange:
    eval_id: str
    kind: ChangeKind
    entry: Entry  # the proposed entry; for a release, the one that leaves


@dataclasses.dataclass(frozen=True)
class ProposalResult:
    changes: list[RegistryChange]
    base: str
    branch: str
    pushed: bool  # False: nothing changed since the branch was last pushed (or a dry run)
    deleted: bool = False  # nothing left to propose: the branch was removed
    number: int | None = None
    url: str | None = None
    declined: Closed | None = None  # the same change set's proposal, closed without merging


def propose(
    ctx: Context, *, base: str | None = None, pulls: PullRequests | None, dry_run: bool = False
) -> ProposalResult:
    """Carry the job's registry changes to the rolling pull request."""
    try:
        return _propose(ctx, base, pulls, dry_run=dry_run)
    except StateError as exc:
        raise GitError(f"firewall propose: {exc}") from None


def _propose(
    ctx: Context, base: str | None, pulls: PullRequests | None, *, dry_run: bool
) -> ProposalResult:
    remote = ctx.settings.state.remote or "origin"
    git = Git(ctx.cwd, ctx.env)
    base = base or ctx.checkout.default_branch
    if base is None:  # the same answer every command has: never a guess at `main`
        raise UsageError(
            f"cannot tell the repository's default branch to propose against "
            f"({ctx.checkout.default_source}); pass --base BRANCH"
        )
    path = _repo_path(git, ctx.cwd / ctx.settings.registry)
    base_tip = git.fetch_tip(remote, base, "refs/firewall/base")
    if base_tip is None:
        raise UsageError(f"{remote} has no branch {base!r} to propose against; pass --base")
    reviewed = _entries_at(git, base_tip, path)
    proposed = ctx.registry.read()
    changes = diff(reviewed, proposed)
    existing = git.fetch_tip(remote, PROPOSAL_BRANCH, "refs/firewall/proposal")
    auth = push_auth(git, remote, ctx.env)
    if not changes:
        if existing is not None and not dry_run:
            git.out("push", "--quiet", remote, f":refs/heads/{PROPOSAL_BRANCH}", extra_env=auth)
        return ProposalResult([], base, PROPOSAL_BRANCH, pushed=False, deleted=existing is not None)
    if existing is not None:
        changes = _keep_waiting(_entries_at(git, existing, path), reviewed, proposed, changes)
    closed = pulls.last_closed(head=PROPOSAL_BRANCH, base=base) if pulls is not None else None
    if closed is not None and _proposed_in(closed.body) == fingerprint(changes):
        return ProposalResult(changes, base, PROPOSAL_BRANCH, pushed=False, declined=closed)
    blob = git.blob(render(proposed))
    if dry_run or (existing is not None and git.carries(existing, base_tip, path, blob)):
        return ProposalResult(changes, base, PROPOSAL_BRANCH, pushed=False)
    commit = git.commit_file(base_tip, path, blob, message=title(changes))
    push = f"{commit}:refs/heads/{PROPOSAL_BRANCH}"
    git.out("push", "--quiet", "--force", remote, push, extra_env=auth)
    if pulls is None:
        return ProposalResult(changes, base, PROPOSAL_BRANCH, pushed=True)
    opened = _open(
        git, pulls, changes, remote=remote, base=base, path=path, auth=auth, existed=existing
    )
    if opened.number:
        _link_issues(ctx, changes, opened.number)
    return ProposalResult(
        changes, base, PROPOSAL_BRANCH, pushed=True, number=opened.number, url=opened.url
    )


def _keep_waiting(
    waiting: dict[str, Entry],
    reviewed: dict[str, Entry],
    proposed: dict[str, Entry],
    changes: list[RegistryChange],
) -> list[RegistryChange]:
    """An adoption already waiting for review stays as the reviewer first saw it: tonight's
    probe of the same candidate would only restate it with other numbers."""
    for change in changes:
        if change.kind == "adopt" and change.eval_id in waiting:
            proposed[change.eval_id] = waiting[change.eval_id]
    return diff(reviewed, proposed)


def _open(
    git: Git,
    pulls: PullRequests,
    changes: list[RegistryChange],
    *,
    remote: str,
    base: str,
    path: str,
    auth: dict[str, str],
    existed: str | None,
) -> Proposal:
    """Open the pushed branch's pull request, or update the open one; a refusal deletes a
    branch this run created, so that none is left orphaned."""
    try:
        return pulls.propose(
            head=PROPOSAL_BRANCH, base=base, title=title(changes), body=body(changes, path)
        )
    except PullRequestNotPermitted as exc:
        if existed is None:
            git.out("push", "--quiet", remote, f":refs/heads/{PROPOSAL_BRANCH}", extra_env=auth)
        raise ProposalRefused(str(exc)) from None


def _link_issues(ctx: Context, changes: list[RegistryChange], number: int) -> None:
    """Each adopted or released eval's issue names the pull request that carries it."""
    from firewall.pipeline import effects

    effects.publish_proposal(
        ctx,
        {
            c.eval_id: (number, "release" if c.kind == "release" else "adoption")
            for c in changes
            if c.kind != "edit"
        },
    )


def diff(reviewed: dict[str, Entry], proposed: dict[str, Entry]) -> list[RegistryChange]:
    """What a reviewer must see between the default branch's registry and the proposed one."""
    changes = []
    for eval_id in sorted(set(reviewed) | set(proposed)):
        before, after = reviewed.get(eval_id), proposed.get(eval_id)
        if not reviewed_change(before, after):
            continue
        if after is None:
            assert before is not None
            changes.append(RegistryChange(eval_id, "release", before))
        else:
            changes.append(RegistryChange(eval_id, "adopt" if before is None else "edit", after))
    return changes


def title(changes: list[RegistryChange]) -> str:
    counts = {kind: sum(c.kind == kind for c in changes) for kind in ("adopt", "release", "edit")}
    parts = [
        f"{counts['adopt']} to quarantine" if counts["adopt"] else "",
        f"{counts['release']} to release" if counts["release"] else "",
        f"{counts['edit']} changed" if counts["edit"] else "",
    ]
    return "Flakiness firewall: " + ", ".join(part for part in parts if part)


def body(changes: list[RegistryChange], path: str) -> str:
    """The pull request's description: one line per change, with the numbers behind it."""
    lines = [
        f"The nightly re-probe proposes these changes to `{path}`, the reviewed registry of "
        "quarantined evals. Merge to apply them; the next nightly updates this pull request "
        "in place.",
        "",
    ]
    for change in changes:
        entry = change.entry
        numbers = ", ".join(
            part
            for part in (
                f"median {fmt(entry.median)}" if entry.median is not None else "",
                f"iqr {fmt(entry.iqr)}" if entry.iqr is not None else "",
                f"k={entry.k}" if entry.k else "",
            )
            if part
        )
        issue = f" (#{entry.issue})" if entry.issue else ""
        verb = {"adopt": "quarantine", "release": "release", "edit": "update"}[change.kind]
        reason = json.dumps(entry.reason)[1:-1].replace("`", "'")
        lines.append(
            f"- **{verb}** `{change.eval_id}`{issue}: {reason}"
            + (f"; {numbers}" if numbers else "")
        )
    lines += ["", f"<!-- firewall:proposal changes={fingerprint(changes)} -->"]
    return "\n".join(lines) + "\n"


def fingerprint(changes: list[RegistryChange]) -> str:
    """What a change set proposes, as a reviewer decides on it: which evals are adopted,
    released or edited. Not the entries' numbers: a closed proposal stays declined
    while tonight's probe only restates it."""
    said = json.dumps(sorted([change.kind, change.eval_id] for change in changes))
    return hashlib.sha256(said.encode()).hexdigest()[:16]


_PROPOSED = re.compile(r"^<!-- firewall:proposal changes=([0-9a-f]{16}) -->$", re.MULTILINE)


def _proposed_in(body: str) -> str | None:
    found = _PROPOSED.search(body)
    return found.group(1) if found else None  # an older release's proposal: none


def _repo_path(git: Git, registry: Path) -> str:
    top = Path(git.out("rev-parse", "--show-toplevel")).resolve()
    try:
        return registry.resolve().relative_to(top).as_posix()
    except ValueError:
        raise UsageError(f"{registry}: the registry is outside the repository at {top}") from None


def _entries_at(git: Git, commit: str, path: str) -> dict[str, Entry]:
    text = git.file_at(commit, path)
    if text is None:
        return {}  # no registry on the default branch yet
    return parse_registry(text, source=f"{path} on the default branch")


def pull_requests_for(ctx: Context, *, dry_run: bool) -> PullRequests | None:
    """Who opens the pull request: nobody in a dry run (it says what it would do), GitHub
    when the job has a token and a repository, else nobody (the branch is still pushed)."""
    from firewall import output
    from firewall.github.proposals import RecordingPullRequests

    if dry_run:
        return RecordingPullRequests(echo=output.note)
    from firewall.github.client import pull_requests_from_environment
    from firewall.pipeline import effects

    return pull_requests_from_environment(ctx.env, budget=effects.github_budget(ctx))
