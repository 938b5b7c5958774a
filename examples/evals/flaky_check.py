"""checkout-timeout: a plain flaky test, of the kind every CI has.

The test calls a (simulated) payment service and asserts that the answer
arrives within the client's 2-second timeout. The service's latency has a
long tail: about one call in six takes longer, so the test fails about one
run in six on the very same code. Exit status 0 is a pass and 1 a failure
(`result = "exit-code"`). A probe in which most trials pass and one fails
trips the collapse rule, and the test is quarantined instead of turning
builds red at random.

It imports nothing beyond the standard library, not even the stand-in
model: each of its forty trials starts a fresh interpreter.

    python examples/evals/flaky_check.py --seed 7; echo $?
"""

from __future__ import annotations

import argparse
import math
import random
import sys

TIMEOUT_MS = 2000.0
MEDIAN_LATENCY_MS = 1200.0
LATENCY_SPREAD = 0.53  # lognormal sigma: P(latency > 2000 ms) is about 1/6


def payment_latency_ms(seed: int) -> float:
    return random.Random(seed).lognormvariate(math.log(MEDIAN_LATENCY_MS), LATENCY_SPREAD)


def test_checkout_within_timeout(seed: int) -> None:
    latency = payment_latency_ms(seed)
    assert latency <= TIMEOUT_MS, f"payment service took {latency:.0f} ms > {TIMEOUT_MS:.0f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        test_checkout_within_timeout(args.seed)
    except AssertionError as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
