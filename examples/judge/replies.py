"""A stand-in support-reply model and two stand-in LLM judges, each with noise of its own.

The model writes a reply to a refund request as a list of the steps it covers. Sampled
(temperature 1.0), it covers each of the ten steps a good reply needs with chance 0.8,
so its replies differ from seed to seed; near-greedy (temperature 0.1), it writes the
same reply, nine of the ten steps, every time. A judge scores a reply by the share of
the steps it finds: the steady one to within about 0.02, the noisy one (a judge
sampled at a high temperature against a loose rubric) to within about 0.08.

Two evals, two sources of scatter that `firewall run` tells apart:

- ``reply-sampled-model``: the sampled model, the steady judge. The outputs differ.
- ``reply-noisy-judge``: the near-greedy model, the noisy judge. The same output is
  scored differently each time it is judged.
"""

from __future__ import annotations

import random

import firewall

STEPS = (
    "greet the customer",
    "apologise for the trouble",
    "restate the problem",
    "quote the refund policy",
    "ask for the order number",
    "give a timeline",
    "say who to escalate to",
    "confirm the refund method",
    "sign off by name",
    "offer a follow-up",
)


def write_reply(seed: int, temperature: float) -> str:
    """The model's reply: one line per step it covers."""
    rng = random.Random(seed)
    if temperature < 0.2:  # near-greedy: the most likely reply, every time
        covered = STEPS[:9]
    else:
        covered = tuple(step for step in STEPS if rng.random() < 0.8)
    return "\n".join(f"- {step}" for step in covered)


def _score(output: str, seed: int, noise: float) -> float:
    found = sum(f"- {step}" in output for step in STEPS) / len(STEPS)
    return min(1.0, max(0.0, found + random.Random(seed).gauss(0.0, noise)))


def steady_judge(output: str, seed: int) -> float:
    """A judge pinned down: temperature 0 and an anchored rubric leave a little noise."""
    return _score(output, seed, 0.02)


def noisy_judge(output: str, seed: int) -> float:
    """A judge sampled at temperature 1 against a loose rubric."""
    return _score(output, seed, 0.08)


def sampled_reply(seed: int) -> str:
    """Declared in firewall.toml, with ``judge = "examples.judge.replies:steady_judge"``."""
    return write_reply(seed, temperature=1.0)


@firewall.eval(id="reply-noisy-judge", judge=noisy_judge, threshold=0.6)
def greedy_reply(seed: int) -> str:
    return write_reply(seed, temperature=0.1)
