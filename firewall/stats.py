"""The statistics users call from their own evals: ``from firewall.stats import cohen_kappa``.

The public surface is these four names, pinned by ``tests/test_public_api.py``;
everything else the firewall computes lives in ``firewall._stats`` and may change
without notice.
"""

from __future__ import annotations

from firewall._stats import cohen_kappa, drift_rate, iqr, wilson_interval

__all__ = ["cohen_kappa", "drift_rate", "iqr", "wilson_interval"]
