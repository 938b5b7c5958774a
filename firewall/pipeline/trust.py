"""What `firewall gate` takes from a probe part, and what it takes from the configuration.

A part says which trials ran and what they returned; it does not say what they are
held to. Every eval of a part is decided on the spec the gate builds itself, as
`firewall run` would have built it on this checkout:

- an eval of the configuration (an ``[[evals]]`` entry or a decorated function):
  the configuration's spec, at the part's ``k`` when the probe was given ``--k``
  (``stages.plan``'s override, the one thing of its settings a probe may choose);
- a case ``SUITE/case`` of a JUnit suite of the configuration: the suite's spec,
  made that case's as ``suites.expand`` makes it (its place and identity are the
  suite's report's, which the part carries);
- a test probed by `pytest --firewall-k K` (``parts.plugin_spec``): the spec the
  plugin builds, on this configuration's global settings (the defaults without
  one), at the K the command line chose. Such a test has no entry to be found in:
  it is recognised by the spec the plugin writes (a plain test whose command is
  ``pytest --firewall-replay`` of the node id its eval id is made from);
- anything else is not this project's to decide: refused (exit 2), or with
  ``--allow-partial`` left undecided and said so, never counted as passed.

The evidence is checked as far as it can be: each trial's seed derives from the
part's base seed (always refused otherwise), and the part was probed on the
checkout's commit (refused otherwise unless ``--allow-stale``, and the report's
``run.stale`` says so).

What a part says its workers read is evidence too, and names files only: each must
be a path inside the checkout (refused otherwise), and the gate hashes this
checkout's content of it (``shards.gated``). An eval a part says it carried must
be an eval of the configuration (its spec the configuration's, at the part's
``--k``), carried by no other part and probed by none; the gate then decides again
whether it is carried. What no check can see is a file a part leaves out of its
reads: the fingerprint the gate records is then short of it, as a forged trial's
score is wrong; parts are trusted as the jobs that made them are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from firewall.config import Settings
from firewall.errors import ArtefactError
from firewall.spec import EvalSpec
from firewall.store.parts import Probed, off_commit, plugin_nodeid, plugin_spec, underived

# What a spec of the part may differ by without a word: the trials it asked for
# (``--k``), and where the eval was when it was probed.
_QUIET = frozenset({"k", "max_k", "source"})


@dataclasses.dataclass(frozen=True)
class Vouched:
    """The parts with every spec the configuration's, and what the gate says of them."""

    parts: list[Probed]
    unknown: list[str]  # what --allow-partial left undecided: not the configuration's
    stale: list[str]  # what --allow-stale let through: parts of another commit
    overridden: list[str]  # settings a part carried that the configuration's replaced
    carried: list[EvalSpec] = dataclasses.field(default_factory=list)  # affected-only probes'


def vouch(
    paths: Sequence[Path],
    parts: Sequence[Probed],
    known: Sequence[EvalSpec],
    settings: Settings,
    *,
    head: str | None,
    allow_partial: bool = False,
    allow_stale: bool = False,
) -> Vouched:
    """The parts as the configuration decides them (module docstring), or an
    ``ArtefactError`` naming what the gate cannot decide.

    ``known``: the configuration's specs; ``settings``: its global settings, a pytest
    test's; ``head``: the checkout's commit, None when there is none to compare.
    """
    stale = off_commit(paths, parts, head)
    if stale and not allow_stale:
        raise ArtefactError(
            f"{'; '.join(stale)}: a part decides the commit it was probed on; probe this "
            "commit, or pass --allow-stale to decide these parts anyway (the report says so)"
        )
    by_id = {spec.id: spec for spec in known}
    out, unknown, overridden = [], [], []
    for path, part in zip(paths, parts, strict=True):
        specs = []
        for claimed in part.specs:
            trusted = _trusted(claimed, by_id, settings)
            if trusted is None:
                unknown.append(
                    f"{path}: eval {claimed.id!r} is not in the configuration: not decided"
                )
                continue
            problem = underived(part, trusted)
            if problem is not None:
                raise ArtefactError(
                    f"{path}: eval {claimed.id!r}: {problem}: this part's trials are not the "
                    "probe it says they are; probe again"
                )
            overridden.extend(_differences(path, claimed, trusted))
            specs.append(trusted)
        kept = {spec.id for spec in specs}
        trials = {eval_id: runs for eval_id, runs in part.trials.items() if eval_id in kept}
        out.append(part.model_copy(update={"specs": specs, "trials": trials}))
        problem = _unreadable(part.reads)
        if problem is not None:
            raise ArtefactError(f"{path}: {problem}: a part names files of its checkout only")
    carried, unknown_carried = _carried(paths, parts, by_id)
    unknown += unknown_carried
    if unknown and not allow_partial:
        raise ArtefactError(
            f"{'; '.join(unknown).replace(': not decided', '')}: the gate decides the "
            "configuration's evals only, on the configuration's settings; pass "
            "--allow-partial to decide the others and leave these undecided"
        )
    return Vouched(out, unknown, stale, overridden, carried)


def _carried(
    paths: Sequence[Path], parts: Sequence[Probed], known: Mapping[str, EvalSpec]
) -> tuple[list[EvalSpec], list[str]]:
    """The configuration's specs of the evals the parts say they carried, at each part's
    ``--k``; and those not the configuration's (not decided). One carried twice, or
    carried and probed, is refused: the parts are then not one probe."""
    probed = {spec.id: path for path, part in zip(paths, parts, strict=True) for spec in part.specs}
    seen: dict[str, Path] = {}
    carried, unknown = [], []
    for path, part in zip(paths, parts, strict=True):
        for eval_id in part.carried or ():
            other = probed.get(eval_id) or seen.get(eval_id)
            if other is not None:
                raise ArtefactError(
                    f"{path}: eval {eval_id!r} is carried there and was probed or carried in "
                    f"{other} too; give each eval to one shard only"
                )
            seen[eval_id] = path
            own = known.get(eval_id)
            if own is None:
                unknown.append(f"{path}: eval {eval_id!r} is not in the configuration: not decided")
                continue
            carried.append(_at_k(own, part.k if part.k is not None else own.k))
    return carried, unknown


def _unreadable(reads: Mapping[str, Sequence[str]]) -> str | None:
    """Why a file a part says was read is no file of a checkout, or None."""
    for target, files in reads.items():
        for name in files:
            pure = PurePosixPath(name)
            if (
                not name
                or pure.is_absolute()
                or "\\" in name
                or any(step in ("..", ".", "") for step in name.split("/"))
                or pure.parts[0] == ".git"
            ):
                return f"{target!r} read {name!r}, which is not a path inside the checkout"
    return None


def _trusted(
    claimed: EvalSpec, known: Mapping[str, EvalSpec], settings: Settings
) -> EvalSpec | None:
    own = known.get(claimed.id)
    if own is not None and claimed.suite is None:
        return _at_k(own, claimed.k)
    suite = known.get(claimed.suite) if claimed.suite is not None else None
    if suite is not None and suite.result == "junit" and claimed.id.startswith(f"{suite.id}/"):
        # as suites.expand makes a case of its suite
        return _at_k(suite, claimed.k).model_copy(
            update={
                "id": claimed.id,
                "suite": suite.id,
                "adaptive": False,
                "source": claimed.source,
                "identity": claimed.identity,
            }
        )
    nodeid = plugin_nodeid(claimed)
    if nodeid is None or claimed.id in known:
        return None
    try:
        return plugin_spec(
            claimed.id, nodeid, k=claimed.k, settings=settings, source=claimed.source
        )
    except ValueError:
        return None


def _at_k(spec: EvalSpec, k: int) -> EvalSpec:
    """``spec`` probed with ``--k k``, as ``stages.plan`` overrides it."""
    if k == spec.k:
        return spec
    return spec.model_copy(update={"k": k, "max_k": max(k, spec.max_k)})


def _differences(path: Path, claimed: EvalSpec, trusted: EvalSpec) -> list[str]:
    theirs, ours = claimed.model_dump(), trusted.model_dump()
    return [
        f"{path}: eval {claimed.id!r}: {key} {theirs[key]!r} in the part, "
        f"{ours[key]!r} in the configuration"
        for key in ours
        if key not in _QUIET and theirs[key] != ours[key]
    ]
