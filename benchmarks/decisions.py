"""How good are the decisions: simulated evals whose true state is known, decided by
the firewall's own rule (`firewall.policy.decide`, `firewall.adaptive`).

Each population is an eval with a known truth: honest (it does not scatter beyond
its own noise) or unstable (a collapse, two behaviours, a shift between trials).
Every probe is decided three ways:

- **fixed IQR**: K trials, the items left out: the contract's fixed rule, what
  every eval got before the item-aware rule;
- **item-aware**: K trials, with the per-item scores (Cochran's Q or the
  dispersion test for evals over binary items);
- **adaptive**: the default, the item-aware rule with adaptive K: trials drawn
  one at a time while `firewall.adaptive.wanted` asks for more (stopping once the
  decision is settled, extending near a line up to max_k = 15).

A "flip" is a change of the instability verdict between two consecutive probes
of the same eval, the thing that opens and closes issues for nothing. The
release table follows quarantined evals through 30 nights (nightly k = 15) and
re-probes each released one as the next pull request would (k = 7).

Two more tables (issue 23): pull requests against the default branch, decided
by `firewall.regression` as `firewall run` looks (a first look at k = 7, trials
to max_k = 15 where it asks for them, a second look), for tolerated drops,
unchanged pull requests under drift and real drops; and quarantined evals
through 90 nights of the release test (`firewall.lifecycle.advance`). Every
rate carries its Monte Carlo standard error.

    python benchmarks/decisions.py                 # 2,000 probes per population
    python benchmarks/decisions.py --probes 500    # quicker, noisier
    python benchmarks/decisions.py --only regression --prs 4000
    python benchmarks/decisions.py --only release --release-evals 400
    python benchmarks/decisions.py --json docs/data/decisions.json   # also the tables as JSON
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime as dt
import io
import itertools
import json
import math
import os
import random
import re
import statistics
import sys
import time
from collections.abc import Callable

from firewall import adaptive, regression
from firewall.artefact import EvalReport
from firewall.lifecycle import RELEASE_LLR, Entry, advance, weigh
from firewall.policy import Decision, Status, decide
from firewall.regression import Judgement, RunMean
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec, Source

Trial = Callable[[random.Random, int], tuple[float, dict[str, float] | None]]


@dataclasses.dataclass(frozen=True)
class Population:
    name: str
    honest: bool
    trial: Trial  # (rng, trial index) -> (score, items or None)
    k: int = 7


def gaussian(median: float, sd: float) -> Trial:
    def draw(rng: random.Random, index: int) -> tuple[float, None]:
        return min(1.0, max(0.0, rng.gauss(median, sd))), None

    return draw


def student(median: float, sd: float, df: float = 3.0) -> Trial:
    """Heavy tails: Student's t on ``df`` degrees of freedom, scaled to standard deviation
    ``sd`` (3 df: an IQR of 0.88 sd, and a trial beyond 5 sd in 1 of 130)."""
    scale = sd / math.sqrt(df / (df - 2))

    def draw(rng: random.Random, index: int) -> tuple[float, None]:
        t = rng.gauss(0, 1) / math.sqrt(rng.gammavariate(df / 2, 2) / df)
        return min(1.0, max(0.0, median + scale * t)), None

    return draw


def collapse(rate: float, median: float = 0.9, sd: float = 0.01) -> Trial:
    def draw(rng: random.Random, index: int) -> tuple[float, None]:
        score = rng.gauss(median, sd) if rng.random() >= rate else rng.uniform(0.0, 0.3)
        return min(1.0, max(0.0, score)), None

    return draw


def bimodal(low: float, high: float) -> Trial:
    def draw(rng: random.Random, index: int) -> tuple[float, None]:
        return (high if rng.random() < 0.5 else low) + rng.gauss(0, 0.005), None

    return draw


def items(p: float, n: int, *, fixed: bool = True, shift: float = 0.0) -> Trial:
    """Accuracy over ``n`` binary items; with ``shift``, half the trials run at p - shift."""

    def draw(rng: random.Random, index: int) -> tuple[float, dict[str, float]]:
        level = p - shift if shift and rng.random() < 0.5 else p
        ids = range(n) if fixed else rng.sample(range(10 * n), n)
        scored = {f"case-{i}": float(rng.random() < level) for i in ids}
        return sum(scored.values()) / n, scored

    return draw


def clustered(
    p: float,
    icc: float,
    *,
    clusters: int = 10,
    size: int = 5,
    fixed: bool = False,
    named: bool = True,
    shift: float = 0.0,
) -> Trial:
    """Accuracy over ``clusters`` groups of ``size`` binary checks (a document's questions):
    each group's pass rate drawn from a Beta with mean ``p`` whose intra-cluster correlation
    is ``icc`` (Beta(a, b), a + b = 1 / icc - 1), its checks independent given it. Sampled
    (each trial draws its own documents from 10,000) or ``fixed`` (the same documents in
    every trial, each drawing its rate anew in each trial: a misread document fails its
    checks together). Ids ``doc-7/q2`` when ``named``, else ``doc-7-q2``. With ``shift``,
    half the trials run every group ``shift`` lower."""
    total = 1 / icc - 1
    a, b = p * total, (1 - p) * total
    slash = "/" if named else "-"

    def draw(rng: random.Random, index: int) -> tuple[float, dict[str, float]]:
        offset = shift if shift and rng.random() < 0.5 else 0.0
        docs = range(clusters) if fixed else rng.sample(range(10_000), clusters)
        scored = {}
        for doc in docs:
            rate = max(0.0, rng.betavariate(a, b) - offset)
            for q in range(size):
                scored[f"doc-{doc}{slash}q{q}"] = float(rng.random() < rate)
        return sum(scored.values()) / len(scored), scored

    return draw


def judged(n: int, noise: float, *, shift: float = 0.0) -> Trial:
    """A judge's continuous scores over ``n`` fixed items, each at its own level with
    ``noise`` per scoring; with ``shift``, half the trials are that much lower as a whole."""
    levels = [0.6 + 0.35 * (i / max(1, n - 1)) for i in range(n)]

    def draw(rng: random.Random, index: int) -> tuple[float, dict[str, float]]:
        offset = shift if shift and rng.random() < 0.5 else 0.0
        scored = {
            f"case-{i}": min(1.0, max(0.0, level - offset + rng.gauss(0, noise)))
            for i, level in enumerate(levels)
        }
        return sum(scored.values()) / n, scored

    return draw


POPULATIONS = [
    *(
        Population(f"gaussian sd {sd} (median 0.85)", True, gaussian(0.85, sd))
        for sd in (0.005, 0.01, 0.015)
    ),
    Population("gaussian sd 0.06 (median 0.85)", False, gaussian(0.85, 0.06)),
    Population("10% collapses", False, collapse(0.10)),
    Population("20% collapses", False, collapse(0.20)),
    Population("bimodal 0.6 / 0.9", False, bimodal(0.6, 0.9)),
    *(Population(f"items n={n} p=0.9", True, items(0.9, n)) for n in (20, 50, 200)),
    Population("items n=50 p=0.9, sampled ids", True, items(0.9, 50, fixed=False)),
    Population("items n=50 p=0.9, K=15", True, items(0.9, 50), k=15),
    Population("items n=50, half the trials 0.3 lower", False, items(0.9, 50, shift=0.3)),
    Population("judge over 20 items, noise 0.15", True, judged(20, 0.15)),
    Population("judge over 20 items, half 0.1 lower", False, judged(20, 0.15, shift=0.1)),
]


RELEASE_POPULATIONS = [
    ("scores, sd 0.03 (median 0.85)", Population("sd 0.03", False, gaussian(0.85, 0.03))),
    ("scores, sd 0.02 (near the line)", Population("sd 0.02", True, gaussian(0.85, 0.02))),
    ("10% collapses", Population("10%", False, collapse(0.10))),
    ("scores, sd 0.01 (fixed, honest)", Population("sd 0.01", True, gaussian(0.85, 0.01))),
]


def spec_for(population: Population, *, adaptive: bool = False, k: int | None = None) -> EvalSpec:
    k = population.k if k is None else k
    return EvalSpec(
        id="sim",
        kind="python",
        target="sim:eval",
        k=k,
        max_k=max(k, 15),
        adaptive=adaptive,
        threshold=0.8,
        flakiness=0.03,
        outlier_fence=3.0,
        timeout=60,
        max_errors=0,
        pass_score=0.8,
        source=Source(file="simulation"),
    )


def draw(population: Population, rng: random.Random, index: int) -> TrialRecord:
    score, scored = population.trial(rng, index)
    return TrialRecord(
        index=index, seed=index, score=score, passed=score >= 0.8, items=scored or {}
    )


def probe(population: Population, rng: random.Random, k: int | None = None) -> list[TrialRecord]:
    return [draw(population, rng, index) for index in range(population.k if k is None else k)]


def adaptive_probe(
    spec: EvalSpec, population: Population, rng: random.Random
) -> tuple[Decision, list[TrialRecord]]:
    """Trials as `firewall.runner.Schedule` hands them out when many evals are in flight
    (one result in before the next trial of the eval starts; an extension's trials all in
    before it is judged), and the decision they end in."""
    trials: list[TrialRecord] = []
    target = spec.k
    while len(trials) < target:
        trials.append(draw(population, rng, len(trials)))
        if len(trials) < spec.k or len(trials) == target:
            target = adaptive.wanted(spec, trials)
    concluded = adaptive.conclude(spec, trials)
    assert concluded is not None
    return concluded[0], trials


def unstable(decision: Decision) -> bool:
    return decision.status is Status.QUARANTINE


def simulate(population: Population, probes: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    fixed_spec, adaptive_spec = spec_for(population), spec_for(population, adaptive=True)
    verdicts: dict[str, list[bool]] = {"fixed": [], "items": [], "adaptive": []}
    counts = []
    for _ in range(probes):
        trials = probe(population, rng)
        verdicts["items"].append(unstable(decide(fixed_spec, trials)))
        bare = [t.model_copy(update={"items": {}}) for t in trials]
        verdicts["fixed"].append(unstable(decide(fixed_spec, bare)))
        decision, taken = adaptive_probe(adaptive_spec, population, rng)
        verdicts["adaptive"].append(unstable(decision))
        counts.append(len(taken))
    result = {"trials": statistics.fmean(counts)}
    for rule, flagged in verdicts.items():
        result[rule] = sum(flagged) / len(flagged)
        result[f"{rule}_flips"] = sum(a != b for a, b in itertools.pairwise(flagged)) / (
            len(flagged) - 1
        )
    return result


NIGHTS, RELEASE_AFTER = 30, 3


def releases(population: Population, evals: int, seed: int, *, new: bool) -> tuple[float, float]:
    """For quarantined evals of ``population``: the share released within 30 nights
    (nightly k = 15), and the share of those releases that the next pull request's
    probe (k = 7) quarantines again.

    ``new=False`` is the old exit: every night that is not QUARANTINE counts, and 3
    in a row release. ``new=True`` is today's: adaptive probes, and
    ``firewall.lifecycle.advance`` (a margin below the entry line, and 59 clean
    trials since the last unstable night).
    """
    rng = random.Random(seed)
    night = spec_for(population, adaptive=new, k=15)
    day = spec_for(population, adaptive=new, k=7)
    at = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    released = bounced = 0
    for _ in range(evals):
        entry, streak = Entry(since=at, source="auto", reason="unstable"), 0
        for _night in range(NIGHTS):
            if not new:
                streak = 0 if unstable(decide(night, probe(population, rng, 15))) else streak + 1
                out = streak >= RELEASE_AFTER
            else:
                decision, trials = adaptive_probe(night, population, rng)
                report = EvalReport(
                    id="sim",
                    status=decision.status,
                    blocking=False,
                    reason=decision.reason,
                    source=Source(file="simulation"),
                    k=15,
                    threshold=0.8,
                    flakiness=0.03,
                    stats=decision.stats,
                    trials=trials,
                )
                kept, _ = advance(entry, report, release_after=RELEASE_AFTER, at=at)
                out, entry = kept is None, kept or entry
            if out:
                released += 1
                if new:
                    bounced += unstable(adaptive_probe(day, population, rng)[0])
                else:
                    bounced += unstable(decide(day, probe(population, rng, 7)))
                break
    return released / evals, (bounced / released if released else 0.0)


# --- regression against the default branch (issue 23, item 1) -------------------------

MAX_DROP = 0.01


@dataclasses.dataclass(frozen=True)
class PullRequests:
    name: str
    drop: float  # the true drop of the pull request's level
    drift: float  # sd of the run-to-run drift, on main and on the pull request alike
    sd: float = 0.03  # sd of one trial around its run's level


REGRESSION_POPULATIONS = [
    *(
        PullRequests(f"tolerated drop {label} (drift 0.005)", drop, 0.005)
        for label, drop in (("D/2", 0.005), ("3D/4", 0.0075), ("D", 0.01))
    ),
    PullRequests("tolerated drop D (drift 0.01)", 0.01, 0.01),
    *(PullRequests(f"unchanged, drift {d}", 0.0, d) for d in (0.01, 0.015, 0.02)),
    PullRequests("unchanged, no drift, sd 0.012", 0.0, 0.0, sd=0.012),
    PullRequests("drop 3D (drift 0.005)", 0.03, 0.005),
    PullRequests("drop 8D (drift 0.01)", 0.08, 0.01),
]


def pull_request(population: PullRequests, rng: random.Random) -> tuple[str, int]:
    """One pull request as `firewall run` decides it (`firewall.pipeline.run`): ten runs
    of main (k = 7) in the history, a first look at k = 7 at half the level, and where it
    marks the eval for them, trials up to max_k = 15 from the same run and a second look
    with the other half. Returns the verdict and the trials it took."""
    baseline = []
    for _ in range(10):
        level = 0.85 + rng.gauss(0, population.drift)
        scores = [rng.gauss(level, population.sd) for _ in range(7)]
        baseline.append(RunMean(statistics.fmean(scores), statistics.stdev(scores), 7))
    level = 0.85 - population.drop + rng.gauss(0, population.drift)
    trials = [rng.gauss(level, population.sd) for _ in range(7)]

    def look() -> Judgement:
        current = RunMean(statistics.fmean(trials), statistics.stdev(trials), len(trials))
        comparison = regression.compare(current, baseline, MAX_DROP)
        return regression.judge({"e": comparison}, "main", max_k={"e": 15})["e"]

    judgement = look()
    if judgement.more_trials:
        trials += [rng.gauss(level, population.sd) for _ in range(15 - len(trials))]
        judgement = look()
    return judgement.verdict, len(trials)


def regression_rates(population: PullRequests, prs: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    outcomes = [pull_request(population, rng) for _ in range(prs)]
    counted = collections.Counter(verdict for verdict, _ in outcomes)
    rates = {verdict: counted[verdict] / prs for verdict in ("regression", "ok", "unclear")}
    rates["extended"] = sum(n > 7 for _, n in outcomes) / prs
    rates["trials"] = statistics.fmean(n for _, n in outcomes)
    return rates


# --- release as a sequential test (issue 23, item 2) -----------------------------------

RELEASE_NIGHTS = 90
SEQUENTIAL_POPULATIONS = [
    ("collapses in 5% of trials", False, collapse(0.05)),
    ("collapses in 10% of trials", False, collapse(0.10)),
    ("collapses in 1% of trials (honest, H0's edge)", True, collapse(0.01)),
    ("never collapses, sd 0.01 (honest)", True, gaussian(0.85, 0.01)),
]


def release_nights(trial: Trial, evals: int, seed: int) -> list[int | None]:
    """The night each quarantined eval is released, through `firewall.policy.decide` (k =
    15, fixed: the nightly's adaptive probe may stop a few trials early) and
    `firewall.lifecycle.advance` with release_after = 3; None: still held after 90."""
    rng = random.Random(seed)
    population = Population("release", False, trial, k=15)
    spec = spec_for(population, k=15)
    at = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    nights: list[int | None] = []
    for _ in range(evals):
        entry, out = Entry(since=at, source="auto", reason="unstable"), None
        for night in range(1, RELEASE_NIGHTS + 1):
            trials = probe(population, rng, 15)
            decision = decide(spec, trials)
            report = EvalReport(
                id="sim",
                status=decision.status,
                blocking=False,
                reason=decision.reason,
                source=Source(file="simulation"),
                k=15,
                threshold=0.8,
                flakiness=0.03,
                stats=decision.stats,
                trials=trials,
            )
            kept, _ = advance(entry, report, release_after=RELEASE_AFTER, at=at)
            if kept is None:
                out = night
                break
            entry = kept
        nights.append(out)
    return nights


def sprt_only(rate: float, evals: int, seed: int) -> float:
    """The release test's arithmetic alone (`firewall.lifecycle.weigh`), each trial
    collapsing with probability ``rate``: the share released within 90 nights."""
    rng = random.Random(seed)
    released = 0
    for _ in range(evals):
        llr = 0.0
        for night in range(1, RELEASE_NIGHTS + 1):
            llr = weigh(llr, sum(rng.random() < rate for _ in range(15)), 15)
            if night >= RELEASE_AFTER and llr <= RELEASE_LLR:
                released += 1
                break
    return released / evals


# --- the spread rule near F, and the fence under heavy tails (issue 23, item 4) ----------

SPREAD_POPULATIONS = [
    ("normal, sd 0.01 (iqr 0.45 F)", True, gaussian(0.85, 0.01)),
    ("normal, sd 0.015 (iqr 0.67 F)", True, gaussian(0.85, 0.015)),
    ("normal, sd 0.02 (iqr 0.9 F)", True, gaussian(0.85, 0.02)),
    ("normal, sd 0.0222 (iqr = F)", True, gaussian(0.85, 0.03 / 1.349)),
    ("Student t 3 df, sd 0.02 (iqr 0.59 F)", True, student(0.85, 0.02)),
    ("normal, sd 0.03 (iqr 1.35 F)", False, gaussian(0.85, 0.03)),
    ("normal, sd 0.045 (iqr 2 F)", False, gaussian(0.85, 0.045)),
    ("normal, sd 0.06 (iqr 2.7 F)", False, gaussian(0.85, 0.06)),
    ("10% collapses (sd 0.01)", False, collapse(0.10)),
]


def fenced(decision: Decision) -> bool:
    """Whether the collapse fence's check failed (whatever rule decided the probe)."""
    return any(check.name == "collapse fence" and not check.ok for check in decision.checks)


def spread_rates(trial: Trial, probes: int, seed: int) -> dict[str, float]:
    """Quarantine rates of one population at fixed k = 7, fixed k = 15 and adaptive K
    (k = 7, max_k = 15, as `firewall run` probes), with the adaptive probes' mean trials
    and flips between consecutive adaptive probes; and how often the fence alone fired."""
    rng = random.Random(seed)
    population = Population("spread", True, trial)
    fixed7, fixed15 = spec_for(population, k=7), spec_for(population, k=15)
    fixed7 = fixed7.model_copy(update={"max_k": 7})
    fixed15 = fixed15.model_copy(update={"max_k": 15})
    adaptive_spec = spec_for(population, adaptive=True)
    counts: collections.Counter[str] = collections.Counter()
    trials_taken, verdicts = [], []
    for _ in range(probes):
        d7 = decide(fixed7, probe(population, rng, 7))
        d15 = decide(fixed15, probe(population, rng, 15))
        da, taken = adaptive_probe(adaptive_spec, population, rng)
        counts["k7"] += unstable(d7)
        counts["k15"] += unstable(d15)
        counts["adaptive"] += unstable(da)
        counts["fence7"] += fenced(d7)
        counts["fence15"] += fenced(d15)
        verdicts.append(unstable(da))
        trials_taken.append(len(taken))
    rates = {key: value / probes for key, value in counts.items()}
    rates["trials"] = statistics.fmean(trials_taken)
    rates["flips"] = sum(a != b for a, b in itertools.pairwise(verdicts)) / (probes - 1)
    return rates


def fence_rates(trial: Trial, probes: int, seed: int) -> dict[int, float]:
    """How often the collapse fence fires on probes of K trials (fixed), for K = 7, 15, 30."""
    rng = random.Random(seed)
    population = Population("fence", True, trial)
    rates: dict[int, float] = {}
    for k in (7, 15, 30):
        spec = spec_for(population, k=k).model_copy(update={"max_k": max(k, 15)})
        fired = sum(fenced(decide(spec, probe(population, rng, k))) for _ in range(probes))
        rates[k] = fired / probes
    return rates


def print_spread(probes: int) -> None:
    print(
        "\n| score-only eval (F = 0.03, median 0.85) | truth | quarantined: k = 7 fixed "
        "| k = 15 fixed | adaptive 7 -> 15 | trials, adaptive | flips, adaptive |"
        "\n|---|---|---:|---:|---:|---:|---:|"
    )
    for number, (name, honest, trial) in enumerate(SPREAD_POPULATIONS):
        r = spread_rates(trial, probes, seed=20261601 + number)
        truth = "honest" if honest else "unstable"
        print(
            f"| {name} | {truth} | {mc(r['k7'], probes)} | {mc(r['k15'], probes)} "
            f"| {mc(r['adaptive'], probes)} | {r['trials']:.1f} | {r['flips']:.1%} |"
        )
    print("\n| honest eval | collapse fence fired, k = 7 | k = 15 | k = 30 |\n|---|---:|---:|---:|")
    for number, (name, trial) in enumerate(
        (
            ("Student t 3 df, sd 0.02", student(0.85, 0.02)),
            ("Student t 3 df, sd 0.03", student(0.85, 0.03)),
            ("normal, sd 0.02", gaussian(0.85, 0.02)),
        )
    ):
        fired = fence_rates(trial, probes * 2, seed=20261701 + number)
        print(f"| {name} | " + " | ".join(mc(fired[k], probes * 2) for k in (7, 15, 30)) + " |")


# --- items in groups (issue 23, item 3) ----------------------------------------------------

GROUP_POPULATIONS = (
    [
        (
            f"{design} documents, icc {icc}, ids {ids}",
            True,
            clustered(0.9, icc, fixed=fixed, named=named),
        )
        for icc in (0.33, 0.09)
        for design, fixed in (("sampled", False), ("fixed", True))
        for ids, named in (("doc-7/q2", True), ("doc-7-q2", False))
    ]
    + [
        (
            f"{design} documents, icc 0.33, half the trials 0.3 lower",
            False,
            clustered(0.9, 0.33, fixed=fixed, shift=0.3),
        )
        for design, fixed in (("sampled", False), ("fixed", True))
    ]
    + [
        (
            "sampled documents, icc 0.09, half the trials 0.15 lower",
            False,
            clustered(0.9, 0.09, shift=0.15),
        ),
    ]
)


def group_rates(trial: Trial, probes: int, seed: int) -> dict[str, float]:
    """Quarantine rates at fixed k = 7 and adaptive K (k = 7, max_k = 15), with the
    adaptive probes' mean trials, and the share of quarantines whose reason says the ids
    look grouped."""
    rng = random.Random(seed)
    population = Population("groups", True, trial)
    fixed, adaptive_spec = spec_for(population), spec_for(population, adaptive=True)
    counts: collections.Counter[str] = collections.Counter()
    taken = []
    for _ in range(probes):
        d7 = decide(fixed, probe(population, rng, 7))
        da, trials = adaptive_probe(adaptive_spec, population, rng)
        counts["k7"] += unstable(d7)
        counts["adaptive"] += unstable(da)
        counts["hinted"] += unstable(d7) and "look grouped" in d7.reason
        taken.append(len(trials))
    rates = {key: value / probes for key, value in counts.items()}
    rates["trials"] = statistics.fmean(taken)
    return rates


def print_groups(probes: int) -> None:
    print(
        "\n| items in groups (10 documents of 5 checks per trial, p 0.9) | truth "
        "| quarantined: k = 7 fixed | adaptive 7 -> 15 | trials, adaptive "
        "| of k = 7 quarantines, reason says the ids look grouped |"
        "\n|---|---|---:|---:|---:|---:|"
    )
    for number, (name, honest, trial) in enumerate(GROUP_POPULATIONS):
        r = group_rates(trial, probes, seed=20261801 + number)
        truth = "honest" if honest else "unstable"
        hinted = r.get("hinted", 0.0) / r["k7"] if r.get("k7") else 0.0
        print(
            f"| {name} | {truth} | {mc(r.get('k7', 0.0), probes)} "
            f"| {mc(r.get('adaptive', 0.0), probes)} | {r['trials']:.1f} | {hinted:.0%} |"
        )


# --- the pass-rate gate's extension (issue 23, item 2) ---------------------------------------

GATES = [(7, 7, 0.5), (7, 14, 0.5), (7, 15, 0.6), (10, 20, 0.6), (20, 40, 0.8), (30, 60, 0.8)]


def gate_spec(k: int, max_k: int, bar: float) -> EvalSpec:
    population = Population("gate", True, gaussian(0.5, 0.0), k=k)
    return spec_for(population, adaptive=True, k=k).model_copy(
        update={"max_k": max_k, "min_pass_rate": bar, "threshold": 0.0, "pass_score": 0.5}
    )


def gate_rates(spec: EvalSpec, rate: float, probes: int, seed: int) -> tuple[float, float]:
    """The share of runs a pass-rate gate passes when each trial passes with ``rate``, as
    the runner hands out trials and ``firewall.adaptive`` decides; and the mean trials."""
    rng = random.Random(seed)

    def draw(rng: random.Random, index: int) -> tuple[float, None]:
        return (1.0 if rng.random() < rate else 0.0), None

    population = Population("gate", True, draw, k=spec.k)
    passed, taken = 0, []
    for _ in range(probes):
        decision, trials = adaptive_probe(spec, population, rng)
        passed += decision.status is Status.PASS
        taken.append(len(trials))
    return passed / probes, statistics.fmean(taken)


def print_gates(probes: int) -> None:
    exact = getattr(adaptive, "gate_power", None)  # the closed form, where the code has one
    print(
        "\n| pass-rate gate (trials pass at min_pass_rate) | false passes (nominal 2.5%) "
        "| exact | trials | power at bar + 3/4 (1 - bar) | exact |"
        "\n|---|---:|---:|---:|---:|---:|"
    )
    for number, (k, max_k, bar) in enumerate(GATES):
        spec = gate_spec(k, max_k, bar)
        false, trials = gate_rates(spec, bar, probes, seed=20261901 + number)
        good = bar + 0.75 * (1 - bar)
        power, _ = gate_rates(spec, good, probes, seed=20262001 + number)
        at_bar = f"{exact(spec, bar):.2%}" if exact else "-"
        at_good = f"{exact(spec, good):.1%}" if exact else "-"
        print(
            f"| k = {k}, max_k = {max_k}, min_pass_rate {bar} | {mc(false, probes)} | {at_bar} "
            f"| {trials:.1f} | {mc(power, probes)} | {at_good} |"
        )


def mc(rate: float, n: int) -> str:
    """A rate with its Monte Carlo standard error."""
    return f"{rate:.1%} ± {math.sqrt(rate * (1 - rate) / n):.1%}"


def print_regression(prs: int) -> None:
    print(
        f"\n| pull requests (max_drop D = {MAX_DROP}, trial sd 0.03 unless said, 10 runs of "
        "main) | fail (regression) | ok | unclear | extended to max_k | trials |"
        "\n|---|---:|---:|---:|---:|---:|"
    )
    for number, population in enumerate(REGRESSION_POPULATIONS):
        r = regression_rates(population, prs, seed=20261301 + number)
        print(
            f"| {population.name} | {mc(r['regression'], prs)} | {r['ok']:.1%} "
            f"| {r['unclear']:.1%} | {r['extended']:.1%} | {r['trials']:.1f} |"
        )


def print_release(evals: int) -> None:
    print(
        "\n| quarantined eval | released within 90 nights: decide + advance "
        f"({evals} evals) / the test alone (20,000) | nights to release: median / 95th |"
        "\n|---|---:|---:|"
    )
    for number, (name, _honest, trial) in enumerate(SEQUENTIAL_POPULATIONS):
        nights = release_nights(trial, evals, seed=20261401 + number)
        out = sorted(n for n in nights if n is not None)
        share = len(out) / evals
        rate = {"5%": 0.05, "10%": 0.10, "1%": 0.01}.get(name.split()[2], 0.0)
        alone = sprt_only(rate, 20_000, seed=20261501 + number)
        at95 = min(len(out) - 1, math.ceil(0.95 * len(out)) - 1)
        spread = f"{out[(len(out) - 1) // 2]} / {out[at95]}" if out else "-"
        print(f"| {name} | {mc(share, evals)} / {mc(alone, 20_000)} | {spread} |")


def write_json(path: str, argv: list[str]) -> int:
    """Run the tables as asked, print them, and write them to ``path`` as JSON: every
    table as printed (its columns and rows of cells), with the command, the load
    average before and after, and the seconds taken. tests/test_docs.py checks the
    error-rate page's tables against this file."""
    load_before = os.getloadavg()
    started = time.perf_counter()
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        status = main(argv)
    text = captured.getvalue()
    sys.stdout.write(text)
    tables = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.splitlines() if line.startswith("|")]
        if len(lines) >= 2:
            cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
            tables.append({"columns": cells[0], "rows": cells[2:]})
    record = {
        "command": " ".join(["python", "benchmarks/decisions.py", *argv]),
        "written": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - started, 1),
        "load_average": {"before": load_before[0], "after": os.getloadavg()[0]},
        "tables": tables,
    }
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return status


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg == "--json" or arg.startswith("--json=") for arg in argv):
        at = next(i for i, arg in enumerate(argv) if arg.startswith("--json"))
        path = argv[at].partition("=")[2] if "=" in argv[at] else argv[at + 1]
        rest = argv[:at] + argv[at + (1 if "=" in argv[at] else 2) :]
        return write_json(path, rest)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=2000)
    parser.add_argument("--prs", type=int, default=4000, help="pull requests per population")
    parser.add_argument("--release-evals", type=int, default=400, help="evals per population")
    parser.add_argument(
        "--only",
        choices=("probes", "regression", "release", "spread", "groups", "gates"),
        help="one table group only",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the tables, as JSON, to PATH")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.only == "regression":
        print_regression(args.prs)
        return 0
    if args.only == "release":
        print_release(args.release_evals)
        return 0
    if args.only == "spread":
        print_spread(args.probes)
        return 0
    if args.only == "groups":
        print_groups(args.probes)
        return 0
    if args.only == "gates":
        print_gates(args.probes * 5)
        return 0
    print(
        "| population | truth | K | quarantined: fixed IQR / item-aware / adaptive "
        "| flips: fixed / adaptive | trials per decision, adaptive |\n"
        "|---|---|---:|---:|---:|---:|"
    )
    for number, population in enumerate(POPULATIONS):
        r = simulate(population, args.probes, seed=20261201 + number)
        truth = "honest (false quarantine)" if population.honest else "unstable (caught)"
        print(
            f"| {population.name} | {truth} | {population.k} "
            f"| {r['fixed']:.1%} / {r['items']:.1%} / {mc(r['adaptive'], args.probes)} "
            f"| {r['fixed_flips']:.1%} / {r['adaptive_flips']:.1%} | {r['trials']:.1f} |"
        )
    print(
        "\n| quarantined eval | truth | released within 30 nights, old / new exit "
        "| re-quarantined by the next PR, old / new |\n|---|---|---:|---:|"
    )
    for name, population in RELEASE_POPULATIONS:
        old = releases(population, args.probes // 4, seed=7, new=False)
        new = releases(population, args.probes // 4, seed=7, new=True)
        truth = "honest" if population.honest else "unstable"
        evals = args.probes // 4
        print(
            f"| {name} | {truth} | {mc(old[0], evals)} / {mc(new[0], evals)} "
            f"| {old[1]:.1%} / {new[1]:.1%} |"
        )
    if args.only is None:
        print_spread(args.probes)
        print_groups(args.probes)
        print_gates(args.probes * 5)
        print_regression(args.prs)
        print_release(args.release_evals)
    print(
        f"\n{args.probes} probes per population, {time.perf_counter() - started:.0f} s; "
        f"command: python benchmarks/decisions.py --probes {args.probes}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
