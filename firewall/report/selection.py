"""Which evals a report gives a row, and which it only counts, once a suite outgrows a screen.

A run of 519 tests that printed 519 PASS rows hid its three failures in the
scroll. Up to ``SCREENFUL`` evals every one has its row, in the run's order.
Beyond, the rows are those that need a look (FAIL, ERROR, QUARANTINE,
QUARANTINED), worst first and at most ``SCREENFUL`` of them, and the rest are
counted by status ("and 497 more PASS"). The terminal table and the job summary
choose alike; ``-v``, ``--format json`` and the report keep every eval.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from firewall.artefact import EvalReport, severity
from firewall.policy import Status

SCREENFUL = 40
"""The most rows a report leads with: a screenful of a terminal, half a page of a summary."""


@dataclasses.dataclass(frozen=True)
class Selection:
    """The evals a report shows, and the ones it counts instead."""

    shown: list[EvalReport]
    rest: list[EvalReport]

    def counted(self) -> str:
        """The rest by status, worst first: "3 more FAIL, 497 more PASS" ("" when none)."""
        counts = Counter(report.status.label for report in self.rest)  # ordered as self.rest
        return ", ".join(f"{count} more {label}" for label, count in counts.items())


def select(reports: Sequence[EvalReport], *, every: bool = False) -> Selection:
    """Every report, or (beyond ``SCREENFUL`` of them, unless ``every``) those that need
    a look, worst first, at most ``SCREENFUL``; the rest are counted."""
    if every or len(reports) <= SCREENFUL:
        return Selection(list(reports), [])
    ordered = sorted(reports, key=severity)  # PASS last: what needs a look comes first
    look = sum(report.status is not Status.PASS for report in ordered)
    shown = min(look, SCREENFUL)
    return Selection(ordered[:shown], ordered[shown:])
