"""An Inspect AI task to try `inspect = "file.py@task"` on: support-ticket triage.

It is a task as an Inspect user already has one: a dataset, a system prompt,
``generate()`` and a scorer, run with ``inspect eval examples/inspect/triage.py``.
With ``stand_in=True`` its model is the example suite's seeded stand-in
(``examples/evals/support_model.py``) behind Inspect's ``mockllm``, so that it
runs offline in seconds; leave that out and name a real model in
``firewall.toml`` (``model = "openai/gpt-4o-mini"``) to probe that instead.
"""

from __future__ import annotations

import random

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessage, GenerateConfig, Model, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate, system_message
from inspect_ai.tool import ToolChoice, ToolInfo

from examples.evals.support_data import CATEGORIES, TICKETS
from examples.evals.support_model import GREEDY, MODEL_ID, TRIAGE, call_usage

PROMPT = (
    f"You triage support tickets. Answer with one word, the team the ticket is for: "
    f"{', '.join(CATEGORIES)}."
)


@task
def triage(temperature: float = GREEDY, stand_in: bool = False) -> Task:
    return Task(
        dataset=[
            Sample(id=ticket.id, input=ticket.text, target=ticket.label) for ticket in TICKETS
        ],
        solver=[system_message(PROMPT), generate()],
        scorer=match(),
        config=GenerateConfig(temperature=temperature),
        model=_stand_in() if stand_in else None,
    )


def _stand_in() -> Model:
    """The seeded keyword model, answering as an LLM would: sampled at the temperature,
    reproducibly for the seed Inspect passes on (the trial's)."""

    def answer(
        messages: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        ticket = messages[-1].text
        # One generator per ticket and seed: Inspect runs the samples concurrently.
        rng = random.Random(f"{config.seed}:{ticket}")
        label = TRIAGE["triage-v1"].sample(ticket, config.temperature or GREEDY, rng)
        output = ModelOutput.from_content(MODEL_ID, label)
        # Usage given, so that mockllm does not count tokens (tiktoken would download).
        used = call_usage(ticket, rng).tokens
        output.usage = ModelUsage(input_tokens=used - 1, output_tokens=1, total_tokens=used)
        return output

    return get_model("mockllm/model", custom_outputs=answer)
