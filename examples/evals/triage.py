"""triage-accuracy: the shipped triage model, as a command eval.

One trial classifies every ticket once at the shipped, near-greedy
temperature and prints its trial result as the last line of stdout, with
every optional part of the format: the accuracy as `score`, hard
`violations` (an empty list when none broke), an output field whose drift
the history tracks, per-ticket `items`, and per-call `metrics` that the
budgets in pyproject.toml are checked against.

    python examples/evals/triage.py --seed 7
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a script, Python puts examples/evals/ on sys.path, not the repository root.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.evals import support_model as model
from examples.evals.support_data import TICKETS

# The ticket that names two teams: its answer is the field whose drift is worth watching.
SPOTLIGHT = "T-020"


def takeover_violations(run: model.TriageRun) -> list[str]:
    """A hacked account must reach the account team every time; accuracy cannot buy that back."""
    return [
        f"account-takeover-misrouted:{ticket.id}"
        for ticket in TICKETS
        if "hacked" in model.tokens(ticket.text) and run.predictions[ticket.id] != "account"
    ]


def trial_result(seed: int) -> dict[str, Any]:
    run = model.triage(seed, temperature=model.GREEDY)
    return {
        "score": run.accuracy,
        "violations": takeover_violations(run),
        "fields": {"category": run.predictions[SPOTLIGHT]},
        "items": run.items,
        "metrics": model.mean_metrics(run.usages),
        "model_id": model.MODEL_ID,
        "prompt_version": run.prompt_version,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args(argv)
    print(json.dumps(trial_result(args.seed)))


if __name__ == "__main__":
    main()
