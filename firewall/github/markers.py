"""The markers the firewall leaves in issues, and GitHub's limit on a body's length.

GitHub renders Markdown without its HTML comments, so they carry what the
firewall reads back: whose issue it is (``<!-- firewall:eval=ID -->``, or
``<!-- firewall:eval=ID config=SCOPE -->`` for a configuration that is not the
repository root's, see ``config_scope``), the status block and its state,
candidates and dismissals with their numbers, the pull request that proposes
a change, and why the firewall closed an issue. Eval text cannot forge any
of them: ``issue_text.neutralise`` breaks every ``<!--`` it quotes, and the
JSON inside a marker has ``<``, ``>``, ``&`` and ``@`` escaped, so no value
can end the comment (``-->``, ``--!>``) or mention anyone. A person can write
them by hand, in an issue or comment of their own: ``tracker`` reads them only
from what the firewall wrote.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

MAX_BODY = 65_536
"""Characters GitHub keeps in an issue body or a comment; a longer one is refused with a 422."""

JsonMarker = Literal["candidate", "dismissed", "proposed"]
Closing = Literal["released", "dismissed", "duplicate"]

_EVAL = re.compile(
    r"^<!-- firewall:eval=([A-Za-z0-9._/-]+)(?: config=([A-Za-z0-9._/-]+))? -->$", re.MULTILINE
)
_NOT_IN_SCOPE = re.compile(r"[^A-Za-z0-9._/-]")
ROOT_CONFIGS = ("pyproject.toml", "firewall.toml")
"""The configuration files at the repository root whose issues have the default scope."""
_STATUS_BLOCK = re.compile(r"<!-- firewall:status -->.*?<!-- /firewall:status -->", re.DOTALL)
_STATE = re.compile(r"<!-- firewall:state=([a-z]+) -->")
# `>` is escaped inside the JSON, so the first "} -->" is the marker's own end.
_JSON = re.compile(r"<!-- firewall:(candidate|dismissed|proposed) (\{.*?\}) -->")
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "@": "\\u0040"}
_FENCE = re.compile(r"^ {0,3}(`{3,})")

Model = TypeVar("Model", bound=BaseModel)


def config_scope(config: Path | None, root: Path | None) -> str | None:
    """The scope of a configuration's issues: None (the default) for the repository root's
    ``pyproject.toml`` or ``firewall.toml`` (or no file, or no repository), else the file's
    path relative to the root, e.g. ``services/api/firewall.toml``.

    Two configurations in one repository each keep their own issues, even under one
    label; the issues of a root configuration keep the marker they had before scopes
    existed, so a single configuration sees no change.
    """
    if config is None or root is None:
        return None
    try:
        relative = config.resolve().relative_to(root.resolve())
    except ValueError:  # a configuration outside the repository: one scope of its own
        return scope_name(config.name)
    if relative.as_posix() in ROOT_CONFIGS:
        return None
    return scope_name(relative.as_posix())


def scope_name(text: str) -> str:
    """``text`` as a marker may hold it: what a marker cannot hold becomes ``-``."""
    return _NOT_IN_SCOPE.sub("-", text)


def eval_marker(eval_id: str, scope: str | None = None) -> str:
    where = f" config={scope}" if scope else ""
    return f"<!-- firewall:eval={eval_id}{where} -->"


def marked_eval(body: str, scope: str | None = None) -> str | None:
    """The eval whose issue this body says it is, in ``scope`` (None: the default scope,
    which a marker without ``config=`` has); None if it is no issue of that scope."""
    match = _EVAL.search(body)
    if match is None or match.group(2) != (scope or None):
        return None
    return match.group(1)


def with_scope(body: str, scope: str | None) -> str:
    """The body with its (first) eval marker scoped to ``scope``."""
    if not scope:
        return body
    return _EVAL.sub(lambda m: eval_marker(m.group(1), scope), body, count=1)


def has_status(body: str) -> bool:
    """Whether the body holds a status block: a quarantine's issue, not (yet) a candidate's."""
    return _STATUS_BLOCK.search(body) is not None


def recorded_state(body: str) -> str:
    match = _STATE.search(body)
    return match.group(1) if match else "unstable"  # what an issue starts as


def replace_status(body: str, block: str) -> str:
    """The body with its status block replaced in place, or appended if someone removed it."""
    if _STATUS_BLOCK.search(body):
        return _STATUS_BLOCK.sub(lambda _: block.strip(), body, count=1)
    return f"{body.rstrip()}\n\n{block.strip()}\n"


def closing_marker(why: Closing) -> str:
    return f"<!-- firewall:closed={why} -->"


def json_marker(kind: JsonMarker, value: BaseModel | dict[str, Any]) -> str:
    """``<!-- firewall:KIND {...} -->`` on one line, no value able to end the comment."""
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    text = json.dumps(data, ensure_ascii=True, separators=(", ", ": "))
    for char, escape in _ESCAPES.items():  # outside strings JSON holds none of these
        text = text.replace(char, escape)
    return f"<!-- firewall:{kind} {text} -->"


def read_markers(kind: JsonMarker, text: str, model: type[Model]) -> Iterator[Model]:
    """Every well-formed marker of this kind, in order; a damaged one is skipped."""
    for match in _JSON.finditer(text):
        if match.group(1) != kind:
            continue
        try:
            yield model.model_validate(json.loads(match.group(2)))
        except (ValueError, ValidationError):
            continue


def replace_marker(body: str, kind: JsonMarker, marker: str) -> str:
    """The body with its (first) marker of this kind replaced, or the marker appended."""
    for match in _JSON.finditer(body):
        if match.group(1) == kind:
            return body[: match.start()] + marker + body[match.end() :]
    return f"{body.rstrip()}\n\n{marker}\n"


def fit(text: str, limit: int = MAX_BODY) -> str:
    """``text`` cut to GitHub's limit, saying so where it was cut.

    What the firewall reads back sits at the end of a body (the status block,
    the markers): that trailer is kept whole and the text before it is cut at
    a line, with any code fence the cut left open closed again.
    """
    if len(text) <= limit:
        return text
    starts = [m.start() for m in (_STATUS_BLOCK.search(text), _JSON.search(text)) if m]
    split = min(starts) if starts else len(text)
    head, trailer = text[:split], text[split:]
    if len(trailer) > limit // 2:  # never in practice: then the trailer is cut too
        head, trailer = text, ""
    note = (
        "\n\n_… {n} characters cut here: GitHub keeps at most 65,536 in an issue or a "
        "comment; the run's JSON report has everything._\n\n"
    )
    room = limit - len(trailer) - len(note.format(n=len(text)))
    while True:
        kept = head[: head.rfind("\n", 0, room) + 1 or room]
        fence = _open_fence(kept)
        closing = f"{fence}\n" if fence else ""
        cut = f"{kept}{closing}{note.format(n=len(head) - len(kept))}{trailer}"
        if len(cut) <= limit:
            return cut
        room -= len(closing) + 1


def _open_fence(text: str) -> str | None:
    """The backtick fence still open at the end of ``text``, if any."""
    open_fence: str | None = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if match is None:
            continue
        if open_fence is None:
            open_fence = match.group(1)
        elif line.strip().startswith(open_fence) and not line.strip().strip("`"):
            open_fence = None
    return open_fence
