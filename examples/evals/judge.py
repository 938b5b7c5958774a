"""reply-helpfulness: an LLM judge grades the bot's replies, and the judge API is overloaded.

The bot answers ten tickets; a judge model grades each reply from 1 to 5.
About one judge call in seven is answered with 503, and when that happens
the trial reports `{"error": ...}` instead of a score: the reply was not
measured, and a missing grade is not a bad grade. Nor is the call retried,
since a retried trial is a different measurement. With `max_errors = 0` a
single such trial makes the eval ERROR.

The result is written to the file named by $FIREWALL_RESULT, the other way
a command can report (stdout is then free for logs); run by hand, without
that variable, it is printed.

    python examples/evals/judge.py --seed 7
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a script, Python puts examples/evals/ on sys.path, not the repository root.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.evals import support_model as model
from examples.evals.support_data import TICKETS, Ticket

REPLIES = TICKETS[::5]  # ten tickets, two per category
OVERLOAD = 0.15  # share of judge calls that get 503 Service Unavailable


class JudgeUnavailable(Exception):
    """The judge API could not grade a reply: there is no grade, not a low one."""


def judge(ticket: Ticket, routed_right: bool, rng: random.Random) -> int:
    """The judge's 1-5 grade; a reply drafted by the wrong team is not much help."""
    if rng.random() < OVERLOAD:
        raise JudgeUnavailable(f"judge API answered 503 Service Unavailable grading {ticket.id}")
    grade = (5 if routed_right else 2) + rng.choice((-1, 0, 0, 1))
    return min(5, max(1, grade))


def trial_result(seed: int) -> dict[str, Any]:
    run = model.triage(seed, temperature=model.GREEDY)
    # The judge draws from its own stream, apart from the bot's: a string seed is
    # hashed (sha512), the same in every process.
    rng = random.Random(f"judge:{seed}")
    grades: dict[str, float] = {}
    for ticket in REPLIES:
        try:
            grade = judge(ticket, run.correct(ticket), rng)
        except JudgeUnavailable as exc:
            return {"error": f"{exc} (reply {len(grades) + 1} of {len(REPLIES)}, not retried)"}
        grades[ticket.id] = (grade - 1) / 4
    return {
        "score": sum(grades.values()) / len(grades),
        "items": grades,
        "model_id": model.MODEL_ID,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args(argv)
    text = json.dumps(trial_result(args.seed))
    destination = os.environ.get("FIREWALL_RESULT")
    if destination:
        Path(destination).write_text(text, encoding="utf-8")
    else:
        print(text)


if __name__ == "__main__":
    main()
