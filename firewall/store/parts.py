"""Probe parts: the trials of one shard of a probe, written for a later `firewall gate`.

`firewall probe --shard I/N --out part-I.json` runs the trials of shard I and
writes them as a ``Probed`` part; `firewall gate part-*.json` reads the parts
back, each eval in one part only, and decides as `firewall run` would.

A part is evidence, not authority: the gate decides every eval on the
configuration's settings (``firewall.pipeline.trust``), so a part can say which
trials ran and what they scored, never what they are held to. What can be
checked of the evidence itself is checked here: every trial's seed derives from
the part's base seed (contract §3), and the part was probed on the commit under
gate. The specs the pytest plugin writes (``plugin_spec``) are built here too, so
that the gate can build the same spec from its own configuration.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from firewall.config import EvalEntry, Settings
from firewall.constants import MAX_K, MIN_K
from firewall.discovery import Shard
from firewall.errors import ArtefactError
from firewall.runner.seeds import trial_seed
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec, Source
from firewall.store.atomic import write_atomic
from firewall.store.jsonfile import read_versioned
from firewall.testids import from_nodeid
from firewall.timeutil import Timestamp

PART_SCHEMA_VERSION = 1
_REPLAY = "python -m pytest --firewall-replay {seed} "


class Probed(BaseModel):
    """The trials of one probe stage: what `firewall probe` writes and `firewall gate` reads."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = PART_SCHEMA_VERSION
    kind: Literal["firewall-probe-part"] = "firewall-probe-part"
    base_seed: int
    started_at: Timestamp
    finished_at: Timestamp
    complete: bool
    shard: str | None = None
    git_sha: str | None = None
    git_ref: str | None = None
    specs: list[EvalSpec]
    trials: dict[str, list[TrialRecord]]
    skipped: list[str] = []
    # What the gate needs to fingerprint the evals and check what an affected-only probe
    # carried (``firewall.pipeline.affected``); evidence, as the trials are:
    k: int | None = None  # the probe's --k, which its carried evals were planned at too
    reads: dict[str, list[str]] = {}  # eval target -> the project files its workers noted
    env: dict[str, str] = {}  # a variable some eval's `env` names -> its value's digest
    carried: list[str] | None = None  # affected-only: the evals left to the default branch

    def write(self, path: Path) -> None:
        write_atomic(path, self.model_dump_json(indent=1) + "\n")


def load_parts(paths: Sequence[Path], *, allow_partial: bool = False) -> list[Probed]:
    """The probe parts at ``paths``, refusing an eval probed in more than one of them,
    and a set with a shard missing or of mixed base seeds unless ``allow_partial``."""
    parts = [load_part(path) for path in paths]
    problems = gaps(paths, parts)
    if problems and not allow_partial:
        raise ArtefactError(
            f"{'; '.join(problems)}: these parts are not one whole probe; pass every part "
            "of one probe, or `--allow-partial` to decide the ones you have"
        )
    seen: dict[str, Path] = {}
    for path, part in zip(paths, parts, strict=True):
        for eval_id in part.trials:
            if eval_id in seen:
                raise ArtefactError(
                    f"{path}: eval {eval_id!r} was already probed in {seen[eval_id]}; "
                    "give each eval to one shard only"
                )
            seen[eval_id] = path
    return parts


def load_part(path: Path) -> Probed:
    return read_versioned(
        path,
        Probed,
        what="probe part",
        version=PART_SCHEMA_VERSION,
        kind="firewall-probe-part",
        hint=" (write one with `firewall probe --out`)",
    )


def gaps(paths: Sequence[Path], parts: Sequence[Probed]) -> list[str]:
    """What a set of parts lacks to be one whole probe: shards not among them, base
    seeds that differ. A shard whose artefact did not download must not pass for green."""
    problems = []
    counts: dict[int, set[int]] = {}
    for part in parts:
        if part.shard:
            shard = Shard.parse(part.shard)
            counts.setdefault(shard.count, set()).add(shard.index)
    if len(counts) > 1:
        problems.append(
            f"the parts split the evals {' and '.join(f'{n} ways' for n in sorted(counts))}"
        )
    for total, seen in sorted(counts.items()):
        missing = [f"{i}/{total}" for i in range(1, total + 1) if i not in seen]
        if missing:
            problems.append(f"shard {', '.join(missing)} is missing")
    seeds = {part.base_seed for part in parts}
    if len(seeds) > 1:
        each = ", ".join(
            f"{part.base_seed} in {path}" for path, part in zip(paths, parts, strict=True)
        )
        problems.append(f"the parts ran with different base seeds ({each})")
    return problems


def underived(part: Probed, spec: EvalSpec) -> str | None:
    """Why the trials of ``spec`` in ``part`` are not the ones its base seed makes, or None.

    Trial ``i`` of eval ``E`` has the seed ``trial_seed(B, E, i)`` (a suite's case: its
    suite's, since one command run serves every case), each index once and below the
    eval's ``max_k``: a trial that is not so was not run by this probe as it says.
    """
    seeded = spec.suite or spec.id
    seen: set[int] = set()
    for record in part.trials.get(spec.id, []):
        if record.index in seen:
            return f"trial {record.index} is there twice"
        seen.add(record.index)
        if not 0 <= record.index < spec.max_k:
            return f"trial {record.index} is outside the eval's {spec.max_k} trials (max_k)"
        expected = trial_seed(part.base_seed, seeded, record.index)
        if record.seed != expected:
            return (
                f"trial {record.index} has the seed {record.seed}, not the {expected} that the "
                f"base seed {part.base_seed} gives it"
            )
    return None


def off_commit(paths: Sequence[Path], parts: Sequence[Probed], head: str | None) -> list[str]:
    """The parts probed on another commit than ``head`` (the checkout's), each said once.
    Without a commit of its own (no git, no ``GITHUB_SHA``) nothing can be compared."""
    if head is None:
        return []
    return [
        f"{path} was probed at {part.git_sha[:12] if part.git_sha else 'an unknown commit'}, "
        f"not at the checkout's {head[:12]}"
        for path, part in zip(paths, parts, strict=True)
        if part.git_sha != head
    ]


def replay_command(nodeid: str) -> str:
    """The command that runs one trial of a pytest test again, as a command eval would."""
    return _REPLAY + shlex.quote(nodeid)


def plugin_nodeid(spec: EvalSpec) -> str | None:
    """The pytest node id of a spec the plugin wrote (``plugin_spec``), or None when the
    spec is not one: the gate builds such a spec from its own configuration instead."""
    if (spec.kind, spec.result, spec.identity, spec.suite) != (
        "command",
        "exit-code",
        "nodeid",
        None,
    ):
        return None
    if not spec.target.startswith(_REPLAY):
        return None
    rest = spec.target[len(_REPLAY) :]
    if shlex.quote(rest) == rest:
        # One word that needs no quoting, as most node ids are: what shlex.split would
        # make of it, without its tokenizer (a gate of 500 tests split 500 of them).
        words = [rest]
    else:
        try:
            words = shlex.split(rest)
        except ValueError:
            return None
    if len(words) != 1 or replay_command(words[0]) != spec.target:
        return None
    try:
        return words[0] if from_nodeid(words[0]) == spec.id else None
    except ValueError:
        return None


def plugin_spec(
    eval_id: str, nodeid: str, *, k: int, settings: Settings, source: Source
) -> EvalSpec:
    """A pytest test probed by `pytest --firewall-k K` as an eval: a plain test command held
    to the configuration's global settings, at the K the command line chose. It is resolved
    as every configured eval is (``EvalSpec.resolve``), so that a setting added there
    reaches pytest's probes too."""
    if not MIN_K <= k <= MAX_K:
        raise ValueError(f"expected {MIN_K} to {MAX_K} trials, got {k}")
    entry = EvalEntry(
        id=eval_id,
        command=replay_command(nodeid),
        result="exit-code",
        k=k,
        adaptive=False,  # K trials were parametrized at collection: the fixed-K rule
        max_k=k,
    )
    spec = EvalSpec.resolve(entry, settings, source)
    # The same test as a pytest suite's case of it (testids): known by its node id.
    return spec.model_copy(update={"identity": "nodeid"})
