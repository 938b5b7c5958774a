"""The job summary file (contract §7): Markdown appended to ``$GITHUB_STEP_SUMMARY``.

What the summary says is ``firewall.report.markdown``'s; this module only hands
it to the runner.
"""

from __future__ import annotations

from pathlib import Path


def append_summary(path: Path, markdown: str) -> None:
    """Append ``markdown`` to the ``$GITHUB_STEP_SUMMARY`` file at ``path``."""
    if markdown and not markdown.endswith("\n"):
        markdown += "\n"
    with path.open("a", encoding="utf-8", newline="") as stream:
        stream.write(markdown)
