"""Affected-only runs: a pull request probes the evals its change can reach, and carries
the rest from the default branch (contract §4, ``[affected]``).

Every run records what each eval's outcome depended on (``firewall.fingerprint``):
its settings, the firewall's version, the project files its worker imported or
opened (the worker notes them, ``firewall/runner/_worker.py``), the files its
``inputs`` globs match and the variables its ``env`` names. An affected-only run
reads each eval's latest default-branch probe from the history and hashes the
same inputs in this checkout. Equal: the eval is *carried* (not probed; its row
shows the default branch's decision, never blocking by itself). Different, or
unknown: it is probed, and the run says which input made it so.

Never a carry that a user could not foresee: an eval is probed when it is new
(or renamed), when its last default-branch probe is older than ``max_age_days``,
errored, was quarantined or recorded no fingerprint, when its inputs cannot be
known (a command eval without ``inputs``), and when any part of its fingerprint
differs. What is beyond it: a file read by a process the eval starts, or chosen
at random by a seed the default branch did not draw; declare those in ``inputs``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

from firewall._stats import Stats
from firewall.artefact import Artefact, Carried, EvalReport, Saved
from firewall.fingerprint import changes, combine, digest, files_in, parts_from, unknowable
from firewall.pipeline.context import Context
from firewall.policy import Status
from firewall.spec import EvalSpec
from firewall.store.history import HistoryRow, HistoryStore

CARRIED_STATUSES = (Status.PASS, Status.FAIL)  # a decision the default branch took, and kept
_NOT_PROJECT = (".git/",)


# ------------------------------------------------------------------ fingerprints


def expand(globs: Iterable[str], root: Path) -> set[str]:
    """The project files the globs match, relative to the root (``dir/**``: every file in it)."""
    matched: set[str] = set()
    for glob in globs:
        pattern = f"{glob}/*" if glob.endswith("**") else glob
        for path in root.glob(pattern):
            relative = path.relative_to(root).as_posix()
            if path.is_file() and not relative.startswith(_NOT_PROJECT):
                matched.add(relative)
    return matched


def inputs_of(spec: EvalSpec, reads: Mapping[str, set[str]], root: Path) -> set[str] | None:
    """The project files the eval's outcome depends on as this run sees them; None when
    they cannot be known (``unknowable``), or its worker noted nothing (it never loaded)."""
    if unknowable(spec) is not None:
        return None
    files = expand(spec.inputs, root)
    if spec.kind == "python":
        noted = reads.get(spec.target)
        if not noted:
            return None
        files |= noted
    if spec.judge is not None:  # its module and what it opens (a rubric) count as the eval's
        judged = reads.get(spec.judge)
        if not judged:
            return None
        files |= judged
    elif spec.kind == "inspect":
        files.add(spec.target.partition("@")[0])
    return files


def hashed(
    spec: EvalSpec,
    files: Collection[str],
    root: Path,
    env: Mapping[str, str],
    *,
    digests: FileDigests | None = None,
) -> dict[str, str]:
    """The named parts of the eval's fingerprint, the files read from this checkout;
    ``digests``: the files already hashed for other evals of the same run."""
    known = digests if digests is not None else FileDigests(root)
    return parts_from(
        spec, {name: known.of(name) for name in files}, {name: env.get(name) for name in spec.env}
    )


class FileDigests:
    """The digest of each project file as this checkout has it, read and hashed once: a
    thousand evals in one module would otherwise hash that module a thousand times (half
    of what stamping a run cost). One per pass over the evals, so that a file
    edited between two runs of one process is read again."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._known: dict[str, str | None] = {}

    def of(self, name: str) -> str | None:
        """The file's digest (``firewall.fingerprint.digest``), None when it is not there."""
        if name not in self._known:
            self._known[name] = self._read(name)
        return self._known[name]

    def _read(self, name: str) -> str | None:
        try:
            content = (self.root / name).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:  # unreadable: a part no checkout will match
            content = f"unreadable: {exc.errno}".encode()
        return digest(content)


def stamp(
    reports: Sequence[EvalReport],
    specs: Sequence[EvalSpec],
    reads: Mapping[str, set[str]],
    root: Path,
    env: Mapping[str, str],
) -> list[EvalReport]:
    """The probed evals' reports with their fingerprints, for the artefact and the history."""
    by_id = {spec.id: spec for spec in specs}
    digests = FileDigests(root)
    stamped = []
    for report in reports:
        spec = by_id.get(report.id)
        files = None if spec is None or not report.trials else inputs_of(spec, reads, root)
        if spec is not None and files is not None:
            parts = hashed(spec, files, root, env, digests=digests)
            report = report.model_copy(update={"fingerprint": combine(parts), "inputs": parts})
        stamped.append(report)
    return stamped


# ------------------------------------------------------------------ which evals to carry


def plan(ctx: Context, specs: Sequence[EvalSpec], *, asked: bool | None) -> Choice | None:
    """The affected-only plan of a run that would probe ``specs`` (as they would be
    probed), or None when this run probes them all: ``asked`` is ``--affected`` (True)
    or ``--all`` (False); by default a pull request's run is affected-only unless
    ``[affected] enabled = false``. A run on the default branch probes everything
    unless asked, so that the numbers it carries stay fresh."""
    settings = ctx.settings.affected
    wanted = asked if asked is not None else settings.enabled and _on_pull_request(ctx)
    if not wanted or not specs:
        return None
    branch = ctx.checkout.default_branch
    if branch is None:
        ctx.notice(
            "affected-only run: every eval is probed, since the default branch is not "
            f"known ({ctx.checkout.default_source})"
        )
        return None
    since = ctx.clock() - dt.timedelta(days=settings.max_age_days)
    latest = latest_probes(ctx.history, [spec.id for spec in specs], branch=branch, since=since)
    return choose(
        specs,
        latest,
        branch=branch,
        max_age_days=settings.max_age_days,
        root=ctx.cwd,
        env=ctx.env,
    )


def _on_pull_request(ctx: Context) -> bool:
    return ctx.checkout.pull_request is not None


def carried_reports(ctx: Context, choice: Choice, specs: Sequence[EvalSpec]) -> list[EvalReport]:
    """The carried evals' reports, in the order of ``specs``."""
    return [
        carry(spec, choice.carried[spec.id], choice.branch, now=ctx.clock())
        for spec in specs
        if spec.id in choice.carried
    ]


@dataclasses.dataclass(frozen=True)
class Choice:
    """An affected-only run's plan: the evals carried, and why each other one is probed."""

    branch: str
    carried: dict[str, HistoryRow]
    why: dict[str, str]


def latest_probes(
    history: HistoryStore, eval_ids: Collection[str], *, branch: str, since: dt.datetime
) -> dict[str, HistoryRow]:
    """Each eval's latest probe by a run or gate on ``branch`` built at ``since`` or later."""
    latest: dict[str, HistoryRow] = {}
    for row in history.recent(eval_ids, since=since):
        if row.git_ref != f"refs/heads/{branch}" or row.mode not in ("run", "gate"):
            continue
        if row.eval_id not in latest or row.build_ts >= latest[row.eval_id].build_ts:
            latest[row.eval_id] = row
    return latest


def choose(
    specs: Sequence[EvalSpec],
    latest: Mapping[str, HistoryRow],
    *,
    branch: str,
    max_age_days: int,
    root: Path,
    env: Mapping[str, str],
) -> Choice:
    """Carry each eval whose fingerprint equals its latest default-branch probe's; say why
    every other one is probed. ``specs`` are the evals as they would be probed."""
    carried: dict[str, HistoryRow] = {}
    why: dict[str, str] = {}
    digests = FileDigests(root)
    for spec in specs:
        row = latest.get(spec.id)
        reason = unknowable(spec)
        if reason is None and row is None:
            reason = f"new: no probe on {branch} in the last {max_age_days} days"
        elif reason is None and row is not None:
            reason = _differs(spec, row, branch, digests, env)
        if reason is None and row is not None:
            carried[spec.id] = row
        else:
            why[spec.id] = str(reason)
    return Choice(branch=branch, carried=carried, why=why)


def _differs(
    spec: EvalSpec, row: HistoryRow, branch: str, digests: FileDigests, env: Mapping[str, str]
) -> str | None:
    if row.status not in {status.value for status in CARRIED_STATUSES}:
        return f"its last probe on {branch} was {row.status.upper() or 'unknown'}"
    if _when(row.build_ts) is None:
        return f"its last probe on {branch} has no time"
    if row.fingerprint is None or combine(row.inputs) != row.fingerprint:
        return f"its last probe on {branch} recorded no fingerprint"
    files = set(files_in(row.inputs)) | expand(spec.inputs, digests.root)
    if spec.kind == "inspect":
        files.add(spec.target.partition("@")[0])
    differ = changes(row.inputs, hashed(spec, files, digests.root, env, digests=digests))
    if not differ:
        return None
    more = f" (and {len(differ) - 3} more)" if len(differ) > 3 else ""
    return "; ".join(differ[:3]) + more


def carry(spec: EvalSpec, row: HistoryRow, branch: str, *, now: dt.datetime) -> EvalReport:
    """The eval as its latest default-branch probe decided it: shown, never blocking."""
    probed_at = _when(row.build_ts) or now
    sha = f" at {row.git_sha[:7]}" if row.git_sha else ""
    return EvalReport(
        id=spec.id,
        status=Status(row.status),
        blocking=False,
        reason=(
            f"carried from {branch}{sha}, probed {_age(now - probed_at)} ago: nothing it "
            "reads changed"
        ),
        source=spec.source,
        k=row.k,
        threshold=spec.threshold,
        flakiness=spec.flakiness,
        stats=Stats(median=row.median, iqr=row.iqr, mean=row.mean, pass_rate=row.pass_rate),
        tags=list(spec.tags),
        owner=spec.owner,
        fingerprint=row.fingerprint,
        inputs=dict(row.inputs),
        carried=Carried(branch=branch, git_sha=row.git_sha, probed_at=probed_at),
    )


def _when(text: str) -> dt.datetime | None:
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _age(delta: dt.timedelta) -> str:
    hours = delta.total_seconds() / 3600
    if hours < 1:
        return f"{max(0, round(hours * 60))} min"
    return f"{hours:.0f} h" if hours < 48 else f"{hours / 24:.0f} days"


def merge(artefact: Artefact, choice: Choice, carried: Sequence[EvalReport]) -> Artefact:
    """The decided run with the carried evals added, each probed one saying why it was,
    and the run saying what carrying saved. The summary's counts and exit code stay the
    probed evals': a carried eval blocks nothing, and its status is the default branch's."""
    reports = [
        report.model_copy(update={"affected": choice.why[report.id]})
        if report.id in choice.why
        else report
        for report in artefact.evals
    ]
    rows = [choice.carried[report.id] for report in carried]
    costs = [row.cost_usd for row in rows if row.cost_usd is not None]
    saved = Saved(
        evals=len(rows),
        trials=sum(row.trials or row.n for row in rows),
        seconds=sum(row.seconds or 0.0 for row in rows),
        cost_usd=sum(costs) if costs else None,
    )
    run = artefact.run.model_copy(update={"saved": saved})
    return artefact.model_copy(update={"evals": [*reports, *carried], "run": run})
