"""The model's scatter told from the judge's: a one-way random-effects split of K x J scores.

An eval with a judge (contract §4, "A judge apart") has K outputs, each judged J
times. Its scores scatter for two reasons with opposite fixes: the outputs differ
(the model under test: its sampling, its prompt) or the judge scores the same output
differently (the instrument: its temperature, its rubric, its model snapshot).

The split is the one-way random-effects analysis of variance, outputs as groups:

    MS_between = sum_i n_i (m_i - m)^2 / (K - 1)
    MS_within  = sum_i sum_j (x_ij - m_i)^2 / (N - K)
    judge = MS_within                       (the variance of one judgement of one output)
    model = max(0, (MS_between - MS_within) / n0),  n0 = (N - sum_i n_i^2 / N) / (K - 1)

(n0 is J when every output has J judgements.) With binary items (each judgement marks
each item right or wrong) the split is made per item and the items' components are
summed, on the scale of the score (their mean): an item's between-output and
within-output variance are what a 0/1 answer has to give, and pooling the 0/1 answers
of different items into one score first would hide which of them flips.
``tests/test_judging.py`` checks the components against statsmodels' REML fit.

The judge alone scatters beyond ``flakiness`` when the IQR its own variance gives a
single judgement (1.349 standard deviations, a normal's IQR) exceeds F: then the eval is
unstable whatever the model does, and the reason names the judge.

Pure: no I/O, nothing above ``runner.trial``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

from firewall._stats import EPSILON
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec
from firewall.text import fmt

IQR_PER_SD = 1.349
"""A normal distribution's IQR in standard deviations: the judge's variance as an IQR."""

Source = Literal["model", "judge"]

PIN = (
    "pin the judge: temperature 0, an anchored rubric (a scale whose every point says what "
    "earns it, with examples), and the judge's model by its dated snapshot"
)
"""What an issue says to do when the judge is the larger source of the scatter."""


@dataclasses.dataclass(frozen=True)
class Split:
    """The variance of one judgement of one output, split into the model's and the judge's."""

    model: float  # between outputs
    judge: float  # within an output
    outputs: int
    judgements: int  # in all
    most: int  # the most judgements of one output
    widest: tuple[float, float, int]  # the output judged least alike: low, high, judgements
    means: tuple[float, float]  # the outputs' mean scores: lowest, highest
    per_item: bool = False

    @property
    def total(self) -> float:
        return self.model + self.judge

    def share(self, source: Source) -> float:
        """The source's share of the variance, 0 to 1 (0.5 each when there is none)."""
        if self.total <= 0:
            return 0.5
        return (self.model if source == "model" else self.judge) / self.total

    @property
    def dominant(self) -> Source:
        """The larger source; the model on a tie (the judge is blamed on evidence only)."""
        return "judge" if self.judge > self.model else "model"

    @property
    def judge_iqr(self) -> float:
        """The IQR the judge alone gives one judgement of one output."""
        return IQR_PER_SD * math.sqrt(self.judge)

    def text(self) -> str:
        """``judge: 71% of the variance (the same output scored 0.55-0.9 across 3
        judgements); model: 29%``: the larger source first, with what shows it."""
        first = self.dominant
        other: Source = "model" if first == "judge" else "judge"
        if first == "judge":
            low, high, count = self.widest
            shown = f"the same output scored {fmt(low)}-{fmt(high)} across {count} judgements"
        else:
            low, high = self.means
            shown = f"the {self.outputs} outputs' mean scores ranged {fmt(low)}-{fmt(high)}"
        items = ", per item" if self.per_item else ""
        return (
            f"{first}: {self.share(first):.0%} of the variance ({shown}{items}); "
            f"{other}: {self.share(other):.0%}"
        )


def judged_trials(trials: Sequence[TrialRecord]) -> list[TrialRecord]:
    """The trials whose output was judged and scored."""
    return [t for t in trials if t.error is None and t.judged is not None and t.judged.scores]


def rejudged(trials: Sequence[TrialRecord]) -> bool:
    """Whether any output of the probe was judged more than once."""
    return any(t.judged is not None and len(t.judged.judgements) > 1 for t in trials)


def split(trials: Sequence[TrialRecord]) -> Split | None:
    """The split of a probe's judged trials, or None when no output was judged twice
    (nothing to tell the judge's variance by) or fewer than two outputs were."""
    judged = judged_trials(trials)
    groups = [t.judged.scores for t in judged if t.judged is not None]
    if len(groups) < 2 or max(len(g) for g in groups) < 2:
        return None
    per_item = _binary_items(judged)
    if per_item is not None:
        components = [one_way(groups_of_item) for groups_of_item in per_item]
        if any(c is None for c in components):
            return None
        scale = len(per_item) ** 2
        model = math.fsum(c[0] for c in components if c is not None) / scale
        judge = math.fsum(c[1] for c in components if c is not None) / scale
    else:
        found = one_way(groups)
        if found is None:
            return None
        model, judge = found
    widest = max(groups, key=lambda g: (max(g) - min(g), len(g)))
    means = [math.fsum(g) / len(g) for g in groups]
    return Split(
        model=model,
        judge=judge,
        outputs=len(groups),
        judgements=sum(len(g) for g in groups),
        most=max(len(g) for g in groups),
        widest=(min(widest), max(widest), len(widest)),
        means=(min(means), max(means)),
        per_item=per_item is not None,
    )


def one_way(groups: Sequence[Sequence[float]]) -> tuple[float, float] | None:
    """(between, within) variance components of a one-way random-effects ANOVA, by the
    method of moments (the between component floored at 0); None without the degrees
    of freedom for both."""
    groups = [g for g in groups if g]
    count = sum(len(g) for g in groups)
    k = len(groups)
    if k < 2 or count - k < 1:
        return None
    grand = math.fsum(x for g in groups for x in g) / count
    means = [math.fsum(g) / len(g) for g in groups]
    between = math.fsum(len(g) * (m - grand) ** 2 for g, m in zip(groups, means, strict=True))
    within = math.fsum((x - m) ** 2 for g, m in zip(groups, means, strict=True) for x in g)
    ms_between, ms_within = between / (k - 1), within / (count - k)
    n0 = (count - math.fsum(len(g) ** 2 for g in groups) / count) / (k - 1)
    return max(0.0, (ms_between - ms_within) / n0), ms_within


def _binary_items(judged: Sequence[TrialRecord]) -> list[list[list[float]]] | None:
    """Per item, per output, its judgements' 0/1 marks; None unless every judgement of
    every output marked the same items, each 0 or 1."""
    keys: set[str] | None = None
    for trial in judged:
        assert trial.judged is not None
        for judgement in trial.judged.judgements:
            if judgement.score is None or not judgement.items:
                return None
            if keys is None:
                keys = set(judgement.items)
            if set(judgement.items) != keys:
                return None
            if any(v not in (0.0, 1.0) for v in judgement.items.values()):
                return None
    if not keys:
        return None
    return [
        [
            [j.items[key] for j in t.judged.judgements if j.score is not None]
            for t in judged
            if t.judged is not None
        ]
        for key in sorted(keys)
    ]


def judge_scatters(flakiness: float, found: Split) -> bool:
    """Whether the judge alone scatters beyond ``flakiness``."""
    return found.judge_iqr > flakiness + EPSILON


def judge_leads(spec: EvalSpec, trials: Sequence[TrialRecord]) -> bool:
    """Whether the judge is the larger source of an eval's scatter, as far as is known."""
    if spec.judge is None:
        return False
    found = split(trials)
    return found is not None and found.dominant == "judge"


def judge_reason(flakiness: float, found: Split, count: str) -> str:
    """The reason of an eval quarantined for its judge alone (``count``: its trials)."""
    return (
        f"the judge scatters alone: its iqr on one output {fmt(found.judge_iqr)} > flakiness "
        f"{fmt(flakiness)} ({count}); {found.text()}"
    )


def judgements_wanted(
    judge: str | None, repeats_max: int, trials: Sequence[TrialRecord], *, unclear: bool
) -> int:
    """How many more judgements each output should get: up to ``repeats_max`` when the
    probe ended ``unclear`` (unstable, or near a line), else none."""
    if judge is None or not unclear:
        return 0
    judged = judged_trials(trials)
    if not judged:
        return 0
    fewest = min(len(t.judged.judgements) for t in judged if t.judged is not None)
    return max(0, repeats_max - fewest)


def attributed(reason: str, spec: EvalSpec, trials: Sequence[TrialRecord]) -> str:
    """An instability's reason with the split of its scatter, when the eval has a judge
    and its outputs were judged more than once (a reason the judge rule wrote has it)."""
    if spec.judge is None or "of the variance" in reason:
        return reason
    found = split(trials)
    return reason if found is None else f"{reason}; {found.text()}"
