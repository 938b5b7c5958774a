"""GitHub: annotations, step outputs, the summary file, issues, the rolling pull request.

The only place that talks to it; PyGithub is imported in ``client`` alone.
"""

from firewall.output import in_actions

__all__ = ["in_actions"]
