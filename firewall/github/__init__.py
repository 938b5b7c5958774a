"""GitHub: annotations, step outputs, the summary file, issues. The only place that talks to it."""

from firewall.output import in_actions

__all__ = ["in_actions"]
