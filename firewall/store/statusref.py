"""What `firewall status` reads of the state branch: a ref of its own, kilobytes, not the tip.

    refs/firewall/<branch>/status     status.jsonl, and the tip's small files (progress.json)

The tip's ``recent.jsonl`` holds every eval's newest runs: ten megabytes at 5,000
evals, which `status` would fetch and inflate to draw the trends of the fifty evals
in quarantine. So every push writes, in the same atomic push as the tip, a parentless
commit of what `status` reads: ``status.jsonl`` is ``recent.jsonl`` cut to the evals
the registry held when the push was made, its header saying which (``watched``), the
newest run's header (``last_run``: its counts) and the tip it was cut from (``tip``);
beside it, the tip's own small files, the same blobs. `status` fetches this ref and
asks the remote for the branch's tip at once (two round trips side by side); it reads
the ref only when that tip is the ref's and every eval it wants is watched, and reads
the tip otherwise (a branch an older firewall pushed last, an eval quarantined since).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Collection, Mapping

from firewall.store.git import Git
from firewall.store.history import RunSummary
from firewall.store.progress import CANDIDATES_PATH, PROGRESS_PATH
from firewall.store.statefiles import (
    FORMAT_VERSION,
    iter_lines,
    line_eval,
    parse_line,
    run_summary,
)

STATUS = "status.jsonl"
FETCHED = "refs/firewall/status"  # where the fetched status commit is kept locally
SMALL_FILES = (PROGRESS_PATH, CANDIDATES_PATH)  # the tip's files a status commit holds too


def remote_ref(branch: str) -> str:
    """Where the remote keeps ``branch``'s status commit."""
    return f"refs/firewall/{branch}/status"


def fetch(git: Git, remote: str, branch: str, *, auth: Mapping[str, str]) -> StatusRead | None:
    """The remote's status commit of ``branch``, read; None when there is none, or it was
    not cut from the tip the remote holds now (a firewall that writes none pushed last).
    The tip is asked for beside the fetch: two round trips at once, not one after the
    other."""
    asked: list[str | None] = []
    ask = threading.Thread(
        target=lambda: asked.append(git.remote_commit(remote, f"refs/heads/{branch}", auth=auth))
    )
    ask.start()
    try:
        fetched = git.fetch_ref(remote, remote_ref(branch), FETCHED, auth=auth)
    finally:
        ask.join()
    if fetched is None or not asked or asked[0] is None:
        return None
    raw = git.objects([f"{fetched}:{name}" for name in (STATUS, *SMALL_FILES)])
    files = {
        name: None if text is None else text.decode("utf-8", "replace")
        for name, text in zip(SMALL_FILES, raw[1:], strict=True)
    }
    read = StatusRead.of(raw[0] or b"", files)
    return read if read is not None and read.tip == asked[0] else None


def status_text(recent: str | bytes | None, watched: Collection[str], last_run: str | None) -> str:
    """``status.jsonl``: ``recent``'s header with the ``watched`` evals and the newest run's
    header (``last_run``, a run file's first line), then the watched evals' lines of
    ``recent`` as they are. Its ``tip`` is stamped when the tip's commit is made
    (``stamped``)."""
    lines = iter_lines(recent or "")
    header = parse_line(next(lines, ""), None) or {"schema_version": FORMAT_VERSION, "runs": {}}
    wanted = set(watched)
    body = [line for line in lines if _eval_of(line) in wanted]
    header["watched"] = sorted(wanted)
    header["last_run"] = None if last_run is None else parse_line(last_run, None)
    return "\n".join([json.dumps(header, separators=(",", ":")), *body]) + "\n"


def stamped(text: str, tip: str) -> str:
    """``status.jsonl`` with the commit of the tip it was cut from said in its header."""
    first, _, rest = text.partition("\n")
    header = parse_line(first, None) or {}
    header["tip"] = tip
    return json.dumps(header, separators=(",", ":")) + "\n" + rest


@dataclasses.dataclass(frozen=True)
class StatusRead:
    """A fetched status commit: what it can answer, and for which tip."""

    text: bytes  # status.jsonl, which the readers of recent.jsonl read as it is
    files: Mapping[str, str | None]  # the tip's small files, path to text (None: it has none)
    tip: str
    watched: frozenset[str]
    last_run: RunSummary | None

    @classmethod
    def of(cls, text: bytes, files: Mapping[str, str | None]) -> StatusRead | None:
        """The read of a status commit's files; None when its header cannot be read."""
        header = parse_line(next(iter_lines(text), ""), None)
        if header is None or header.get("schema_version") != FORMAT_VERSION:
            return None
        tip, watched, last = (header.get(key) for key in ("tip", "watched", "last_run"))
        if not isinstance(tip, str) or not isinstance(watched, list):
            return None
        summary = run_summary(json.dumps(last)) if isinstance(last, dict) else None
        ids = frozenset(eval_id for eval_id in watched if isinstance(eval_id, str))
        return cls(text, dict(files), tip, ids, summary)

    def holds_history(self) -> bool:
        """Whether the tip it was cut from holds any run: a watched eval's, or the last."""
        return self.last_run is not None or bool(_body(self.text))

    def answers(self, eval_ids: Collection[str]) -> bool:
        """Whether it holds every row of these evals that the tip's recent file holds."""
        return all(eval_id in self.watched for eval_id in eval_ids)


def _body(text: bytes) -> list[str]:
    lines = iter_lines(text)
    next(lines, None)
    return [line for line in lines if line]


def _eval_of(line: str) -> str | None:
    """The eval a line of ``recent.jsonl`` is of (None for one that is no eval's line)."""
    if (named := line_eval(line)) is not None:
        return named
    data = parse_line(line, None)
    eval_id = None if data is None else data.get("eval_id")
    return eval_id if isinstance(eval_id, str) else None
