"""The job summary file (contract §7): Markdown appended to ``$GITHUB_STEP_SUMMARY``.

What the summary says is ``firewall.report.markdown``'s; this module only hands
it to the runner.
"""

from __future__ import annotations

from pathlib import Path

from firewall.store.atomic import append_whole


def append_summary(path: Path, markdown: str) -> None:
    """Append ``markdown`` to the ``$GITHUB_STEP_SUMMARY`` file at ``path``: whole, or not
    at all (a write that fails part-way is cut back); the ``WriteError`` names the file."""
    if markdown and not markdown.endswith("\n"):
        markdown += "\n"
    append_whole(path, markdown.encode("utf-8"), what="job summary")
