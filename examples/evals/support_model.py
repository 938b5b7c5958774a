"""A seeded stand-in for the LLM behind a support desk: ticket triage and a safety guard.

A real model call is slow, paid and needs the network, and these examples must
run anywhere in seconds. The stand-in keeps what matters to the firewall: the
model scores every label from the text (keyword logits play the network) and
then samples one label from softmax(logits / temperature). Near-greedy
decoding returns the top label almost every time, so repeated probes agree;
at a high temperature the calls disagree and the accuracy scatters from seed
to seed. Latency, tokens and cost are simulated per call.

Standard library only (`random`, `math`, `statistics`), so that the example
suite runs on the firewall's own dependencies: `pip install -e .`, then
`firewall run`.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
import statistics
from collections.abc import Mapping, Sequence

from examples.evals.support_data import CATEGORIES, RED_TEAM, TICKETS, Ticket

MODEL_ID = "support-sim-1"
GREEDY = 0.1  # the temperature the triage feature ships with
SAMPLING = 1.2  # the temperature the reply drafter uses, too hot for a classifier

Weights = Mapping[str, Mapping[str, float]]


def keywords(groups: Mapping[float, str]) -> dict[str, float]:
    """{2.0: "invoice vat"} -> {"invoice": 2.0, "vat": 2.0}: weights read as a table."""
    return {word: weight for weight, words in groups.items() for word in words.split()}


_TRIAGE_V1: Weights = {
    "billing": keywords(
        {
            2.0: "invoice vat",
            1.5: "charged charge payment bill billed billing subscription receipt pricing",
            1.0: "plan card",
        }
    ),
    "technical": keywords(
        {
            2.0: "error crash crashes bug freezes api",
            1.5: "broken loading sync blank timeout",
            1.0: "slow app upload export dashboard notifications",
        }
    ),
    "account": keywords(
        {
            4.0: "hacked",
            2.0: "password username locked 2fa",
            1.5: "login log profile verification",
            1.0: "email account accounts delete",
        }
    ),
    "shipping": keywords(
        {
            2.0: "delivery deliver parcel tracking courier",
            1.5: "package shipped arrived delivered",
            1.0: "address late express",
        }
    ),
    "refund": keywords(
        {
            2.5: "refund refunded",
            2.0: "return returned reimburse exchange",
            1.0: "money",
        }
    ),
}

# The candidate prompt folded the refund policy into the billing section, so
# the model now files every refund request under billing: a stable regression.
_TRIAGE_V2: Weights = {
    **_TRIAGE_V1,
    "billing": {**_TRIAGE_V1["billing"], **_TRIAGE_V1["refund"]},
    "refund": {},
}

_GUARD: Weights = {
    "refuse": {
        # Whose data: anyone's but the asker's.
        **keywords(
            {
                3.0: "neighbour",
                2.0: "customers customers' another someone someone's ex brother's husband's "
                "employees everyone",
                1.0: "customer else's her all",
            }
        ),
        # What data: secrets and personal details.
        **keywords(
            {
                3.0: "cvv passport",
                2.0: "address card password hash keys database emails 2fa",
                1.5: "home name street configuration string",
                1.0: "phone number numbers invoices history details uploaded bought list",
            }
        ),
        # How: jailbreaks and skipped safeguards.
        **keywords(
            {
                3.0: "ignore bypass",
                2.5: "admin",
                2.0: "prompt reveal unrestricted skip disable unlock export",
                1.5: "instructions forget rules policy fraud verification identity chargeback",
                1.0: "exception discount reserved",
                0.5: "check",
            }
        ),
        # Polite requests about people close to the asker: three of them score
        # just above the bias below, and the guard wavers on those.
        **keywords(
            {1.7: "friend's", 1.2: "colleague", 1.0: "logged", 0.7: "sister", 0.6: "flatmate"}
        ),
    },
}
# Helpfulness pulls the other way: a request must carry enough risk to be refused.
_GUARD_BIAS = {"comply": 1.5}


@dataclasses.dataclass(frozen=True)
class KeywordModel:
    """Logits from keyword weights, then a label sampled at a temperature."""

    labels: tuple[str, ...]
    weights: Weights
    bias: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def logits(self, text: str) -> list[float]:
        words = set(tokens(text))
        return [self._evidence(label, words) for label in self.labels]

    def _evidence(self, label: str, words: set[str]) -> float:
        # Summed in the table's order, not the set's, so that every process
        # (and every replay) adds the same floats in the same order.
        weights = self.weights.get(label, {})
        found = sum(weight for word, weight in weights.items() if word in words)
        return self.bias.get(label, 0.0) + found

    def probabilities(self, text: str, temperature: float) -> list[float]:
        return softmax([logit / temperature for logit in self.logits(text)])

    def sample(self, text: str, temperature: float, rng: random.Random) -> str:
        return rng.choices(self.labels, weights=self.probabilities(text, temperature))[0]


TRIAGE = {
    "triage-v1": KeywordModel(CATEGORIES, _TRIAGE_V1),
    "triage-v2": KeywordModel(CATEGORIES, _TRIAGE_V2),
}
GUARD = KeywordModel(("refuse", "comply"), _GUARD, _GUARD_BIAS)


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def softmax(logits: Sequence[float]) -> list[float]:
    # Shifted by the largest logit so that exp() cannot overflow at a low temperature.
    top = max(logits)
    shifted = [math.exp(logit - top) for logit in logits]
    total = math.fsum(shifted)
    return [weight / total for weight in shifted]


@dataclasses.dataclass(frozen=True)
class Usage:
    """What one model call cost."""

    latency_ms: float
    tokens: int
    cost_usd: float


_SYSTEM_PROMPT_TOKENS = 180
_COMPLETION_TOKENS = 4
_USD_PER_TOKEN = 0.15 / 1_000_000


def call_usage(text: str, rng: random.Random) -> Usage:
    """Simulated cost of one call: tokens follow the text, latency has a long tail."""
    used = _SYSTEM_PROMPT_TOKENS + round(1.3 * len(tokens(text))) + _COMPLETION_TOKENS
    latency = (220.0 + 0.9 * used) * rng.lognormvariate(0.0, 0.25)
    return Usage(latency_ms=latency, tokens=used, cost_usd=used * _USD_PER_TOKEN)


def mean_metrics(usages: Sequence[Usage]) -> dict[str, float]:
    """Per-call averages, the unit the budgets in pyproject.toml are written in."""
    return {
        "latency_ms": round(statistics.fmean(u.latency_ms for u in usages), 1),
        "tokens": round(statistics.fmean(u.tokens for u in usages), 1),
        "cost_usd": round(statistics.fmean(u.cost_usd for u in usages), 8),
    }


@dataclasses.dataclass(frozen=True)
class TriageRun:
    """One pass of the triage model over every ticket."""

    prompt_version: str
    predictions: dict[str, str]  # ticket id -> predicted category
    usages: tuple[Usage, ...]

    def correct(self, ticket: Ticket) -> bool:
        return self.predictions[ticket.id] == ticket.label

    @property
    def items(self) -> dict[str, float]:
        return {ticket.id: float(self.correct(ticket)) for ticket in TICKETS}

    @property
    def accuracy(self) -> float:
        return sum(self.items.values()) / len(TICKETS)


def triage(seed: int, *, temperature: float, prompt_version: str = "triage-v1") -> TriageRun:
    """Classify every ticket once; the same seed gives the same run."""
    rng = random.Random(seed)
    model = TRIAGE[prompt_version]
    predictions: dict[str, str] = {}
    usages: list[Usage] = []
    for ticket in TICKETS:
        predictions[ticket.id] = model.sample(ticket.text, temperature, rng)
        usages.append(call_usage(ticket.text, rng))
    return TriageRun(prompt_version, predictions, tuple(usages))


def refusals(seed: int, *, temperature: float = GREEDY) -> dict[str, bool]:
    """Whether the guard refused each red-team request (R-001...), all of which it should."""
    rng = random.Random(seed)
    return {
        f"R-{number:03d}": GUARD.sample(request, temperature, rng) == "refuse"
        for number, request in enumerate(RED_TEAM, start=1)
    }
