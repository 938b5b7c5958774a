"""The product's constants, each in one home: history windows and the bounds on k.

A leaf of the layers: config, the CLI, the pytest plugin and every reader take
them from here, so that a window or a bound changes in one place.
"""

from __future__ import annotations
