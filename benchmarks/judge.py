"""Does the firewall tell the model's scatter from its judge's? Simulated evals with a
judge, the model's and the judge's variance known, decided by the firewall's own code.

Each probe is an eval with a judge at the defaults (k = 7, adaptive K up to max_k = 15,
flakiness 0.03, judge_repeats 1, judge_repeats_max 3). Output i has a true quality
m_i ~ N(0.7, model_sd); each judgement of it scores m_i + N(0, judge_sd). The total
variance model_sd^2 + judge_sd^2 is fixed per row group and the model's share of it
runs from 0% to 100%.

The probe runs as the pipeline runs it: trials one at a time while
`firewall.adaptive.wanted` asks for more (each trial one generation and one
judgement), then `firewall.pipeline.rejudge.wanted` says which outputs to judge
again (an unstable or near-a-line probe: up to judge_repeats_max judgements per
output, no new generation), then `firewall.pipeline.stages.judge` decides. The source
named is the first of "model:" / "judge:" in the reason.

Reported per share: how often the probe ends unstable, how often an unstable probe names
the larger true source, the extra judge calls per probe against the bound J x K
(judge_repeats_max x the trials it ran), and the generations (never more than the probe
ran without re-judging: re-judging adds none). A stable group (total sd 0.005) shows
what a stable eval with a judge costs: one judgement per trial.

Target (issue 26): the right source named in at least 90% of unstable probes where one
source holds at least 75% of the variance, at no more than J x K judge calls and no
extra generations.

    python benchmarks/judge.py                  # 400 probes per row
    python benchmarks/judge.py --probes 100     # quicker, noisier
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time

from firewall import adaptive
from firewall.pipeline import rejudge
from firewall.pipeline.stages import judge as decide
from firewall.policy import Status
from firewall.runner import judged
from firewall.runner.judgement import Judged, Judgement
from firewall.runner.trial import TrialRecord, record_from_payload
from firewall.spec import EvalSpec, Source

SHARES = (0.0, 0.1, 0.2, 0.25, 0.4, 0.5, 0.6, 0.75, 0.8, 0.9, 1.0)
TOTAL_SDS = (0.04, 0.08, 0.15)
STABLE_SD = 0.005
MEAN = 0.7
SPEC = EvalSpec(
    id="judged",
    kind="python",
    target="bench:generate",
    k=7,
    threshold=0.5,
    pass_score=0.5,
    flakiness=0.03,
    outlier_fence=3.0,
    timeout=60,
    max_errors=0,
    judge="bench:judge",
    judge_repeats=1,
    judge_repeats_max=3,
    source=Source(file="bench"),
)


@dataclasses.dataclass
class Probe:
    status: Status
    named: str | None  # "model", "judge" or None (the reason names neither)
    generations: int
    judge_calls: int
    extra_judge_calls: int


def _judgement(rng: random.Random, quality: float, judge_sd: float, seed: int) -> Judgement:
    score = min(1.0, max(0.0, quality + rng.gauss(0.0, judge_sd)))
    return Judgement(seed=seed, score=score, passed=score >= SPEC.pass_score)


def _trial(index: int, quality: float, judge_sd: float, rng: random.Random) -> TrialRecord:
    made = Judged(judge=SPEC.judge or "", output=f"output {index}")
    made.judgements = [_judgement(rng, quality, judge_sd, 0)]
    payload, _ = judged.combined({}, made)
    record = record_from_payload(
        payload, index=index, seed=index, pass_score=SPEC.pass_score, duration_s=0.0, in_flight=1
    )
    return record.model_copy(update={"judged": made})


def probe(model_sd: float, judge_sd: float, rng: random.Random) -> Probe:
    qualities: list[float] = []
    trials: list[TrialRecord] = []
    target = SPEC.k
    while len(trials) < target:  # one generation and one judgement per trial
        qualities.append(rng.gauss(MEAN, model_sd))
        trials.append(_trial(len(trials), qualities[-1], judge_sd, rng))
        target = adaptive.wanted(SPEC, trials)
    generations = len(trials)
    extra = 0
    for _, record, more in rejudge.wanted([SPEC], {SPEC.id: trials}):
        made = [_judgement(rng, qualities[record.index], judge_sd, n + 1) for n in range(more)]
        trials[record.index] = judged.rejudged(record, made, SPEC)
        extra += more
    report = decide(SPEC, trials)
    reason = report.reason
    at = {source: reason.find(f"{source}:") for source in ("model", "judge")}
    found = {source: where for source, where in at.items() if where >= 0}
    named = min(found, key=lambda source: found[source]) if found else None
    return Probe(report.status, named, generations, generations + extra, extra)


def row(total_sd: float, share: float, probes: int, seed: int) -> dict[str, float | str]:
    rng = random.Random(seed)
    model_sd, judge_sd = (share * total_sd**2) ** 0.5, ((1 - share) * total_sd**2) ** 0.5
    results = [probe(model_sd, judge_sd, rng) for _ in range(probes)]
    unstable = [p for p in results if p.status is Status.QUARANTINE]
    truth = "model" if share > 0.5 else "judge" if share < 0.5 else "tie"
    right = sum(p.named == truth for p in unstable)
    over_bound = sum(p.judge_calls > SPEC.judge_repeats_max * p.generations for p in results)
    return {
        "total_sd": total_sd,
        "model_share": share,
        "truth": truth,
        "unstable": len(unstable) / probes,
        "right": right / len(unstable) if unstable and truth != "tie" else float("nan"),
        "generations": sum(p.generations for p in results) / probes,
        "extra_judge_calls": sum(p.extra_judge_calls for p in results) / probes,
        "judge_calls_bound": SPEC.judge_repeats_max * sum(p.generations for p in results) / probes,
        "over_bound": over_bound,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=400, help="probes per row")
    parser.add_argument("--seed", type=int, default=26)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = [
        row(total, share, args.probes, args.seed + n)
        for n, (total, share) in enumerate((t, s) for t in TOTAL_SDS for s in SHARES)
    ]
    stable = row(STABLE_SD, 0.5, args.probes, args.seed - 1)
    print(
        "| total sd | model share | true source | unstable | right source named "
        "| generations | extra judge calls | bound J x K |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in [*rows, stable]:
        right = "-" if r["right"] != r["right"] else f"{float(r['right']):.0%}"
        print(
            f"| {r['total_sd']} | {float(r['model_share']):.0%} | {r['truth']} "
            f"| {float(r['unstable']):.0%} | {right} | {float(r['generations']):.2f} "
            f"| {float(r['extra_judge_calls']):.2f} | {float(r['judge_calls_bound']):.2f} |"
        )
    clear = [
        r
        for r in rows
        if (float(r["model_share"]) >= 0.75 or float(r["model_share"]) <= 0.25)
        and r["right"] == r["right"]
    ]
    weighted = sum(float(r["right"]) * float(r["unstable"]) for r in clear) / sum(
        float(r["unstable"]) for r in clear
    )
    worst = min(float(r["right"]) for r in clear)
    over = sum(int(r["over_bound"]) for r in rows)
    print()
    print(
        f"one source >= 75% of the variance: right source named in {weighted:.1%} of unstable "
        f"probes (worst row {worst:.0%}); probes over J x K judge calls: {over}; stable eval "
        f"(total sd {STABLE_SD}): {float(stable['extra_judge_calls']):.2f} extra judge calls, "
        f"{float(stable['generations']):.2f} generations per probe; "
        f"{time.perf_counter() - started:.0f} s"
    )
    met = weighted >= 0.9 and over == 0 and float(stable["extra_judge_calls"]) == 0
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
