"""GitHub's refusals in words: one line that says what happened and what to do.

Pure functions of what an answer holds (status, JSON body, headers) or of what
reading it raised, so that ``client`` (which has the PyGithub exception) stays
small and these are read and tested alone. Error bodies are shaped as GitHub's REST API sends them,
e.g. ``{"message": "Validation Failed", "errors": [{"message": "..."}]}``.
"""

from __future__ import annotations

import datetime as dt
import http
import json
from collections.abc import Mapping

import requests

from firewall.errors import IssueError, IssueGone, IssueRefused


def message_of(data: object) -> str:
    return str(data.get("message") or "") if isinstance(data, dict) else ""


def http_problem(status: int, data: object, headers: Mapping[str, str] | None) -> str:
    message = message_of(data)
    lowered = message.lower()
    values = {key.lower(): str(value) for key, value in (headers or {}).items()}
    text = f"{status} {message or _phrase(status)}"
    if "rate limit" in lowered or values.get("x-ratelimit-remaining") == "0" or status == 429:
        return f"{text} ({_rate_limit_hint(values)}; not waiting: the next run tries again)"
    if status == 401:
        return f"{text} (is GITHUB_TOKEN valid and unexpired?)"
    if status == 403 and "not accessible by integration" in lowered:
        return (
            f"{text} (a read-only token on a fork PR? the workflow needs `permissions: "
            f"issues: write`)"
        )
    if status == 403 and "locked" in lowered:
        return f"{text} (someone locked the issue; unlock it to let the firewall comment again)"
    if status == 410 and "disabled" in lowered:
        return (
            f"{text} (enable issues under Settings -> General -> Features, or turn the "
            "firewall's issues off with `[github] issues = false`)"
        )
    if status == 404:
        return f"{text} (does GITHUB_REPOSITORY name the repository, and can the token see it?)"
    if status == 422:
        details = _validation_errors(data)
        return f"{text}: {details}" if details else text
    if status >= 500:
        return f"{text} (GitHub is having trouble; the next run tries again)"
    return text


def refusal(
    action: str,
    status: int,
    data: object,
    headers: Mapping[str, str] | None,
    *,
    eval_id: str | None,
    number: int | None,
) -> IssueError:
    """Which IssueError a refusal is: one issue's (with ``eval_id``) or everything's."""
    message = message_of(data)
    said = f"GitHub refused to {action}: {http_problem(status, data, headers)}"
    if eval_id is None:
        return IssueError(said)
    gone = (status == 410 and "deleted" in message.lower()) or (status == 404 and number)
    if gone:
        which = f"issue #{number}" if number else "the number of the issue"
        return IssueGone(
            f"{said}; the firewall forgets {which} for {eval_id} and finds the eval's issue "
            "again by its marker, or opens a new one",
            eval_id=eval_id,
            number=number,
        )
    if (status == 403 and "locked" in message.lower()) or status == 422:
        return IssueRefused(said, eval_id=eval_id, number=number)
    return IssueError(said)


def not_permitted(repository: str) -> str:
    return (
        f"GitHub Actions may not open pull requests in {repository}: allow it under Settings "
        '-> Actions -> General -> Workflow permissions -> "Allow GitHub Actions to create and '
        "approve pull requests\" (and in the organisation's settings), or pass a GitHub App "
        "token or a fine-grained personal access token as the action's `github-token` input, "
        "which also makes the proposal's own checks run (a pull request opened with "
        "GITHUB_TOKEN starts no workflow runs)"
    )


def network_problem(exc: requests.RequestException, timeout: int) -> str:
    text = str(exc)
    if isinstance(exc, requests.Timeout) or "timed out" in text.lower():
        return f"no answer within {timeout} s"
    if isinstance(exc, requests.exceptions.ChunkedEncodingError) or "IncompleteRead" in text:
        return "the answer was cut off before its end (the connection closed early)"
    return f"{type(exc).__name__}: {text[:300]}"


def unreadable(action: str, problem: str, base_url: str) -> str:
    return (
        f"GitHub's answer to the request to {action} was not what its REST API sends "
        f"({problem}): is a proxy or a sign-on page answering in its place? check that "
        f"GITHUB_API_URL ({base_url}) is the API and that the runner reaches it"
    )


def answer_problem(exc: Exception) -> str:
    """What was wrong with an answer PyGithub could not read, from what it raised."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON: {exc.msg} at character {exc.pos}"
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"not the JSON it expected: {type(exc).__name__}: {first[:200]}"


def _validation_errors(data: object) -> str:
    errors = data.get("errors") if isinstance(data, dict) else None
    if not isinstance(errors, list):
        return ""
    said = []
    for error in errors:
        if isinstance(error, dict):
            said.append(
                str(error.get("message") or f"{error.get('field', '?')} {error.get('code', '')}")
            )
        else:
            said.append(str(error))
    return "; ".join(s.strip() for s in said if s.strip())


def _rate_limit_hint(headers: Mapping[str, str]) -> str:
    if headers.get("retry-after", "").isdigit():
        return f"GitHub asks to wait {headers['retry-after']} s"
    reset = headers.get("x-ratelimit-reset", "")
    if headers.get("x-ratelimit-remaining") != "0" or not reset.isdigit():
        # A secondary limit without Retry-After: GitHub's docs ask for at least a minute.
        return "a secondary rate limit: GitHub asks to wait at least a minute"
    at = dt.datetime.fromtimestamp(int(reset), dt.timezone.utc)
    minutes = max(0, round((at - dt.datetime.now(dt.timezone.utc)).total_seconds() / 60))
    return f"it resets at {at:%H:%M} UTC, in {minutes // 60} h {minutes % 60} min"


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "error"
