"""GitHub's refusals in words: one line that says what happened and what to do.

Pure functions of what an answer holds (status, JSON body, headers), so that
``client`` (which has the PyGithub exception) stays small and these are read
and tested alone. Error bodies are shaped as GitHub's REST API sends them,
e.g. ``{"message": "Validation Failed", "errors": [{"message": "..."}]}``.
"""

from __future__ import annotations

import datetime as dt
import http
from collections.abc import Mapping

import requests


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


def network_problem(exc: requests.RequestException, timeout: int) -> str:
    text = str(exc)
    if isinstance(exc, requests.Timeout) or "timed out" in text.lower():
        return f"no answer within {timeout} s"
    return f"{type(exc).__name__}: {text[:300]}"


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
