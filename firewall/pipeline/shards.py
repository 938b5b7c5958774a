"""Affected-only runs sharded (`firewall probe --shard I/N`, then `firewall gate`): what a
probe part keeps for its gate, and what the gate makes of it.

A part keeps the files its workers noted (by eval target), the digests of the
variables the evals' ``env`` names as its job saw them, its ``--k``, and, when it
was affected-only, the evals it carried. The gate hashes its own checkout's content
of those files (``affected.stamp``), so that a sharded default-branch run leaves
fingerprints a later pull request can carry from; and it decides again, on the
history and its checkout, whether each eval a part says it carried is carried
(``affected.choose``): a part can name files and claim a carry, never make one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence

from firewall.artefact import Artefact
from firewall.errors import ArtefactError
from firewall.fingerprint import ENV, parts_of
from firewall.pipeline.affected import (
    Choice,
    carried_reports,
    choose,
    latest_probes,
    merge,
    stamp,
)
from firewall.pipeline.context import Context
from firewall.runner.reads import Reads
from firewall.spec import EvalSpec
from firewall.store.parts import Probed


def evidence(
    part: Probed,
    candidates: Sequence[EvalSpec],
    choice: Choice | None,
    reads: Reads,
    env: Mapping[str, str],
    *,
    k: int | None,
) -> Probed:
    """A probe part with what its gate needs to fingerprint the evals and to check what
    was carried: the files the workers noted, the digests of the variables the evals'
    ``env`` names as the probe saw them, its ``--k``, and the evals it carried."""
    return part.model_copy(
        update={
            "k": k,
            "reads": {target: sorted(files) for target, files in sorted(reads.items())},
            "env": env_digests(candidates, env),
            "carried": None if choice is None else sorted(choice.carried),
        }
    )


def env_digests(specs: Iterable[EvalSpec], env: Mapping[str, str]) -> dict[str, str]:
    """The fingerprint's part of each variable the evals' ``env`` names, by name."""
    found: dict[str, str] = {}
    for spec in specs:
        for name, value in parts_of(spec, {}, env).items():
            if name.startswith(ENV):
                found[name.removeprefix(ENV)] = value
    return dict(sorted(found.items()))


def gated(
    ctx: Context,
    artefact: Artefact,
    parts: Sequence[Probed],
    carried: Sequence[EvalSpec],
    *,
    allow_partial: bool,
) -> Artefact:
    """The gate's decided parts fingerprinted, and the evals their affected-only probes
    carried added as `run` adds them.

    A part names the files its workers read; their content is this checkout's, hashed
    here, and nothing of a part that was probed on another commit is fingerprinted. A
    variable in ``env`` counts as the probe's jobs saw it: where a part's digest differs
    from this job's, the evals naming it get no fingerprint and cannot be carried. What a
    part says it carried is decided again here, on the history and this checkout, as a
    run would: an eval that would not be carried was probed by no one, and the gate
    refuses it (with ``allow_partial``: leaves it undecided, and says so).
    """
    unlike = _differing_env(ctx, parts, carried)
    artefact = _fingerprinted(ctx, artefact, parts, unlike)
    if all(part.carried is None for part in parts):
        return artefact
    probed = [spec for part in parts for spec in part.specs]
    choice, refused = _carried_again(ctx, carried, probed, unlike)
    said = [
        f"eval {eval_id!r} was carried by its probe, but here it would be probed: {why}"
        for eval_id, why in refused.items()
    ]
    if said and not allow_partial:
        raise ArtefactError(
            f"{'; '.join(said)}: no part probed it, so the gate cannot decide it; probe "
            "it (`firewall probe --all`), or pass --allow-partial to leave it undecided"
        )
    kept = [spec for spec in carried if spec.id not in refused]
    mine = Choice(
        branch=choice.branch,
        carried={spec.id: choice.carried[spec.id] for spec in kept},
        why={spec.id: choice.why[spec.id] for spec in probed if spec.id in choice.why},
    )
    if said:
        run = artefact.run.model_copy(update={"partial": [*artefact.run.partial, *said]})
        artefact = artefact.model_copy(update={"run": run})
    return merge(artefact, mine, carried_reports(ctx, mine, kept))


def _differing_env(ctx: Context, parts: Sequence[Probed], carried: Sequence[EvalSpec]) -> set[str]:
    """The variables of the evals' ``env`` whose digest differs between a part's job and
    this gate's, each said."""
    ours = env_digests([*(s for p in parts for s in p.specs), *carried], ctx.env)
    unlike = {name for part in parts for name, value in part.env.items() if ours.get(name) != value}
    for name in sorted(unlike):
        ctx.notice(
            f"${name} differs between the probe's jobs and this gate's: the evals naming it "
            "in `env` get no fingerprint and are not carried; set it alike in every job"
        )
    return unlike


def _fingerprinted(
    ctx: Context, artefact: Artefact, parts: Sequence[Probed], unlike: set[str]
) -> Artefact:
    """The artefact's evals fingerprinted from this checkout's content of the files the
    parts' workers read: only parts probed on this commit, only evals naming no variable
    that differs between the jobs."""
    head = ctx.git.sha
    reads: Reads = {}
    stampable: list[EvalSpec] = []
    for part in parts:
        if head is not None and part.git_sha != head:
            continue  # --allow-stale: this checkout's files are not the ones it read
        for target, files in part.reads.items():
            reads.setdefault(target, set()).update(files)
        stampable += [spec for spec in part.specs if not unlike & set(spec.env)]
    evals = stamp(artefact.evals, stampable, reads, ctx.cwd, ctx.env)
    return artefact.model_copy(update={"evals": evals})


def _carried_again(
    ctx: Context, carried: Sequence[EvalSpec], probed: Sequence[EvalSpec], unlike: set[str]
) -> tuple[Choice, dict[str, str]]:
    """What a run here would carry, decided on the history and this checkout, and why each
    eval a part says it carried would not be (by eval)."""
    branch = ctx.checkout.default_branch
    if branch is None:
        unknown = {spec.id: "the default branch is not known here" for spec in carried}
        return Choice(branch="", carried={}, why={}), unknown
    max_age = ctx.settings.affected.max_age_days
    since = ctx.clock() - dt.timedelta(days=max_age)
    ids = [spec.id for spec in [*carried, *probed]]
    latest = latest_probes(ctx.history, ids, branch=branch, since=since)
    choice = choose(
        [*carried, *probed], latest, branch=branch, max_age_days=max_age, root=ctx.cwd, env=ctx.env
    )
    refused: dict[str, str] = {}
    for spec in carried:
        if spec.id in choice.why:
            refused[spec.id] = choice.why[spec.id]
        elif unlike & set(spec.env):
            refused[spec.id] = "a variable in its `env` differs between the jobs"
    return choice, refused
