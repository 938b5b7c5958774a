"""GitHub Actions integration: annotations, job summary, outputs and issues."""

# No `from __future__ import annotations` here: it would bind the name `annotations`
# on this package and shadow the `firewall.github.annotations` module.
from collections.abc import Mapping


def in_actions(env: Mapping[str, str]) -> bool:
    """True inside a GitHub Actions job."""
    return env.get("GITHUB_ACTIONS") == "true"
