"""An example eval: replace the body with a call to your model and a grader.

`firewall run` calls it once per trial with a different seed. Return a score
in [0, 1], a dict with "score" plus optional "fields", "items", "metrics" and
"violations", or raise: an exception is an error, never a low score.
"""

from __future__ import annotations

import random

import firewall


@firewall.eval(threshold=0.8, tags=["example"])
def example_accuracy(seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    cases = {f"case-{n:03d}": rng.random() < 0.997 for n in range(40)}
    return {
        "score": sum(cases.values()) / len(cases),
        "items": {case: float(ok) for case, ok in cases.items()},
        "metrics": {"latency_ms": rng.uniform(200, 400)},
    }
