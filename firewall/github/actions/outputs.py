"""Step outputs (contract §7): the run's result appended to ``$GITHUB_OUTPUT``.

Every value is written in the file command's heredoc form, as @actions/core
``file-command.ts`` (``prepareKeyValueMessage``) writes it, so a value may hold
any text, line breaks included, without being able to set a second output.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from firewall.artefact import Artefact
from firewall.store.atomic import append_whole


def outputs_for(artefact: Artefact, report_path: Path | str) -> dict[str, str]:
    """The outputs of a decided run, every value a string as GitHub stores them."""
    summary = artefact.summary
    return {
        "status": summary.result,
        "exit-code": str(summary.exit_code),
        "pass": str(summary.pass_),
        "fail": str(summary.fail),
        "quarantine": str(summary.quarantine),
        "quarantined": str(summary.quarantined),
        "error": str(summary.error),
        "report": str(report_path),
    }


def key_value_message(
    name: str, value: str, *, delimiters: Callable[[], str] = lambda: f"ghadelimiter_{uuid.uuid4()}"
) -> str:
    """``name<<DELIMITER``, the value, the delimiter: one output in heredoc form.

    The delimiter is random and checked against the name and the value, as
    the toolkit does (with its error messages), so a value cannot end its own
    heredoc early and inject an output. ``delimiters`` makes one (tests pass a fixed one).
    """
    # The runner reads the name up to the first '=' or '<<' of the line.
    if not name or any(bad in name for bad in ("=", "<<", "\r", "\n")):
        raise ValueError(
            f"output name {name!r} must be non-empty, on one line, without '=' or '<<'"
        )
    delimiter = delimiters()
    if delimiter in name:
        raise ValueError(f'Unexpected input: name should not contain the delimiter "{delimiter}"')
    if delimiter in value:
        raise ValueError(f'Unexpected input: value should not contain the delimiter "{delimiter}"')
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def write_outputs(
    path: Path, values: Mapping[str, str], *, delimiters: Callable[[], str] | None = None
) -> None:
    """Append ``values`` to the ``$GITHUB_OUTPUT`` file at ``path``: every output, or none.

    The runner fails the step on a heredoc cut before its closing delimiter, so
    the block goes in one write that is cut back if it fails part-way; the
    ``WriteError`` names the file.
    """
    # Build every message first: a bad name or value then writes nothing at all.
    made = {} if delimiters is None else {"delimiters": delimiters}
    text = "".join(key_value_message(name, value, **made) for name, value in values.items())
    # Bytes as written: the runner splits on LF, and on Windows a translated CRLF
    # would also change the values themselves.
    append_whole(path, text.encode("utf-8"), what="step outputs")
