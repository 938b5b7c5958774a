"""The product's constants, each in one home: history windows and the bounds on k.

A leaf of the layers: config, the CLI, the pytest plugin and every reader take
them from here, so that a window or a bound changes in one place.
"""

from __future__ import annotations

import datetime as dt

# --- how many trials -------------------------------------------------------------------

MIN_K = 3
"""The fewest trials a probe may take (`k`, `max_k`, `--k`, `pytest --firewall-k`):
below three, neither a median nor an IQR says anything about a spread."""

MAX_K = 10_000
"""The most: past it a probe is a load test, and a typo (`k = 70000`) is refused."""

DEFAULT_MAX_K = 15
"""How far adaptive K may go when `max_k` is not set (never below the eval's own k)."""

# --- how far back the history is read ---------------------------------------------------

TREND_DAYS = 14
"""The window of every trend: the job summary's, `firewall status`'s and the HTML
report's charts."""

TREND_POINTS = 14
"""A sparkline's width: the runs of each eval the job summary's trend reads."""

TREND_RUNS = 30
"""The most runs an HTML trend chart draws."""

RECENT_RUNS = 30
"""The state branch keeps each eval's newest runs whole (``recent.jsonl``) and rolls
older ones up by week. Thirty covers every reader that needs runs, not weeks: a
sparkline (``TREND_POINTS``), an HTML trend (``TREND_RUNS``) and the regression
baseline (``BASELINE_RUNS``); a count, so the tip grows with the evals, not with
how often CI runs."""

ROLL_UP_EVERY = 10
"""An eval's line in ``recent.jsonl`` holds up to ``ROLL_UP_EVERY - 1`` runs more than
``RECENT_RUNS``, and at the eval's turn, one push in ``ROLL_UP_EVERY``, the oldest roll
up together. The turns are staggered by the evals' ids, so a suite whose evals all run
each time rolls up a tenth of them at every push: the cost of a roll-up (cutting 5,000
lines' oldest values, merging them into their week) is spread over every push, and no
push pays it alone (``firewall.store.recentfold``)."""

BASELINE_WINDOW = dt.timedelta(days=30)
"""How far back the default branch's runs are read for a comparison (the regression
stage, the pull request comment): a month, and a read that stays short."""

BASELINE_RUNS = 20
"""The default branch's most recent runs an eval is compared with, within that window."""
