"""judge-calibration: does the LLM judge agree with people? Cohen's kappa on a labelled set.

Before a judge's verdicts may gate anything, it is held against human labels:
`examples/data/judge_labels.json` holds 48 replies of the support bot, each
labelled pass or fail by senior agents against a written rubric. Each trial
asks the judge for a verdict on every reply and scores the trial with Cohen's
kappa, the agreement beyond chance; the gate is kappa >= 0.70.

The judge is a seeded stand-in for a model at a low temperature (0.15): it reads
surface cues (a concrete action, a link, numbers; promises it cannot keep)
and, like real judges, it likes long answers. That verbosity bias is where it
parts from the humans: long, polite replies that do nothing get its vote.
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import firewall
from firewall.stats import cohen_kappa

LABELS = Path(__file__).resolve().parents[1] / "data" / "judge_labels.json"
JUDGE_ID = "judge-sim-1"
TEMPERATURE = 0.15

_CONCRETE = re.compile(r"\b(I've|here is|here are|link|steps)\b|\d", re.IGNORECASE)
_PROMISE = re.compile(r"\b(guarantee[d]?|always|never)\b", re.IGNORECASE)


def judge_logit(reply: str) -> float:
    """The judge's leaning toward `pass`, before sampling."""
    concrete = len(_CONCRETE.findall(reply))
    promises = len(_PROMISE.findall(reply))
    verbose = 1.0 if len(reply) > 110 else 0.0  # the bias: length reads as effort
    return 2.0 * min(concrete, 3) - 3.0 * promises + 3.0 * verbose - 1.0


def judge(reply: str, rng: random.Random) -> str:
    p_pass = 1 / (1 + math.exp(-judge_logit(reply) / TEMPERATURE))
    return "pass" if rng.random() < p_pass else "fail"


@firewall.eval(threshold=0.70, tags=["judge"])
def judge_calibration(seed: int) -> firewall.TrialResult:
    replies = json.loads(LABELS.read_text(encoding="utf-8"))["replies"]
    rng = random.Random(seed)
    human = [r["human"] for r in replies]
    verdicts = [judge(r["reply"], rng) for r in replies]
    kappa = cohen_kappa(human, verdicts)
    if kappa is None:  # one label throughout: agreement cannot be told from chance
        return firewall.TrialResult(
            error="kappa is undefined: the judge and the humans used a single label throughout"
        )
    return firewall.TrialResult(
        score=max(0.0, kappa),  # below-chance agreement fails the gate all the same
        items={r["id"]: float(v == h) for r, v, h in zip(replies, verdicts, human, strict=True)},
        fields={"judge_pass_rate": round(verdicts.count("pass") / len(verdicts), 2)},
        model_id=JUDGE_ID,
    )
