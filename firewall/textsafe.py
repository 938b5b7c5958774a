"""Eval-supplied text made safe to show: no terminal escape sequences, no control characters.

Reasons and errors quote whatever an eval printed. Every rendering that puts
them on a page (the job summary, the HTML and JUnit reports) strips the same
things: ANSI sequences whole (not just their ESC, which would leave ``[31m``),
then the C0 and C1 controls other than tab and line breaks, and what XML 1.0
cannot carry at all.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable(text: str) -> str:
    """``text`` without escape sequences and control characters; tab, LF and CR stay."""
    return _CONTROL.sub("", _ANSI.sub("", text))
