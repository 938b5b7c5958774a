"""How good are the decisions: simulated evals whose true state is known, decided by
`firewall.policy.decide` itself.

Each population is an eval with a known truth: honest (it does not scatter beyond
its own noise) or unstable (a collapse, two behaviours, a shift between trials).
Every probe draws K trials from it and is decided twice by the same `decide`:
once with the trials' per-item scores (the item-aware rule: Cochran's Q or the
dispersion test) and once with the items left out, which is the fixed IQR rule
of the contract (what every eval got before). A "flip" is a change of the
instability verdict between two consecutive probes of the same eval, the thing
that opens and closes issues for nothing.

    python benchmarks/decisions.py                 # 2,000 probes per population
    python benchmarks/decisions.py --probes 500    # quicker, noisier
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import itertools
import random
import sys
import time
from collections.abc import Callable

from firewall.artefact import EvalReport
from firewall.lifecycle import Entry, advance
from firewall.policy import Status, decide
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
]


RELEASE_POPULATIONS = [
    ("scores, sd 0.03 (median 0.85)", Population("sd 0.03", False, gaussian(0.85, 0.03))),
    ("scores, sd 0.02 (near the line)", Population("sd 0.02", True, gaussian(0.85, 0.02))),
    ("10% collapses", Population("10%", False, collapse(0.10))),
    ("scores, sd 0.01 (fixed, honest)", Population("sd 0.01", True, gaussian(0.85, 0.01))),
]


def spec_for(population: Population) -> EvalSpec:
    return EvalSpec(
        id="sim",
        kind="python",
        target="sim:eval",
        k=population.k,
        threshold=0.8,
        flakiness=0.03,
        outlier_fence=3.0,
        timeout=60,
        max_errors=0,
        pass_score=0.8,
        source=Source(file="simulation"),
    )


def probe(population: Population, rng: random.Random) -> list[TrialRecord]:
    records = []
    for index in range(population.k):
        score, scored = population.trial(rng, index)
        records.append(
            TrialRecord(
                index=index, seed=index, score=score, passed=score >= 0.8, items=scored or {}
            )
        )
    return records


def unstable(spec: EvalSpec, trials: list[TrialRecord]) -> bool:
    return decide(spec, trials).status is Status.QUARANTINE


def simulate(population: Population, probes: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    spec = spec_for(population)
    item_rule, fixed_rule = [], []
    for _ in range(probes):
        trials = probe(population, rng)
        item_rule.append(unstable(spec, trials))
        fixed_rule.append(unstable(spec, [t.model_copy(update={"items": {}}) for t in trials]))

    def rates(verdicts: list[bool]) -> tuple[float, float]:
        flagged = sum(verdicts) / len(verdicts)
        flips = sum(a != b for a, b in itertools.pairwise(verdicts)) / (len(verdicts) - 1)
        return flagged, flips

    (item_flagged, item_flips), (fixed_flagged, fixed_flips) = rates(item_rule), rates(fixed_rule)
    return {
        "fixed": fixed_flagged,
        "new": item_flagged,
        "fixed_flips": fixed_flips,
        "new_flips": item_flips,
    }


def releases(population: Population, evals: int, seed: int, *, margin: bool) -> tuple[float, float]:
    """For quarantined evals of ``population``: the share released within 30 nights
    (nightly k = 15, release after 3 stable nights), and the share of those releases
    that the next pull request's probe (k = 7) quarantines again. ``margin=False`` is
    the old exit: every night that is not QUARANTINE counts toward release."""
    rng = random.Random(seed)
    nightly = dataclasses.replace(population, k=15)
    spec_night, spec_day = spec_for(nightly), spec_for(dataclasses.replace(population, k=7))
    at = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    released = bounced = 0
    for _ in range(evals):
        entry = Entry(since=at, source="auto", reason="unstable")
        for _night in range(30):
            decision = decide(spec_night, probe(nightly, rng))
            stats = decision.stats
            if not margin and decision.status is not Status.QUARANTINE:
                stats = stats.model_copy(update={"iqr": 0.0, "item_p": None})  # no margin asked
            report = EvalReport(
                id="sim",
                status=decision.status,
                blocking=False,
                reason=decision.reason,
                source=Source(file="simulation"),
                k=15,
                threshold=0.8,
                flakiness=0.03,
                stats=stats,
            )
            kept, _ = advance(entry, report, release_after=3, at=at)
            if kept is None:
                released += 1
                bounced += unstable(spec_day, probe(population, rng))
                break
            entry = kept
    return released / evals, (bounced / released if released else 0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=2000)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(
        "| population | truth | K | quarantined, fixed IQR rule | quarantined, item-aware "
        "| flips, fixed | flips, item-aware |\n|---|---|---:|---:|---:|---:|---:|"
    )
    for number, population in enumerate(POPULATIONS):
        result = simulate(population, args.probes, seed=20261201 + number)
        truth = "honest" if population.honest else "unstable"
        measure = "false quarantine" if population.honest else "caught"
        print(
            f"| {population.name} | {truth} ({measure}) | {population.k} "
            f"| {result['fixed']:.1%} | {result['new']:.1%} "
            f"| {result['fixed_flips']:.1%} | {result['new_flips']:.1%} |"
        )
    print(
        "\n| quarantined eval | truth | released within 30 nights, old / new exit "
        "| re-quarantined by the next PR, old / new |\n|---|---|---:|---:|"
    )
    for name, population in RELEASE_POPULATIONS:
        old = releases(population, args.probes // 4, seed=7, margin=False)
        new = releases(population, args.probes // 4, seed=7, margin=True)
        truth = "honest" if population.honest else "unstable"
        print(f"| {name} | {truth} | {old[0]:.1%} / {new[0]:.1%} | {old[1]:.1%} / {new[1]:.1%} |")
    print(
        f"\n{args.probes} probes per population, {time.perf_counter() - started:.0f} s; "
        f"command: python benchmarks/decisions.py --probes {args.probes}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
