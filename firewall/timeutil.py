"""UTC timestamps as every file of the firewall writes them: ISO 8601 with a ``Z``."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from pydantic import AfterValidator, PlainSerializer


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def to_text(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _aware(moment: dt.datetime) -> dt.datetime:
    if moment.tzinfo is None:
        raise ValueError("timestamps must carry a time zone, e.g. 2026-11-29T21:05:00Z")
    try:  # to the second, as every file writes it: what is read is what will be written
        return moment.astimezone(dt.timezone.utc).replace(microsecond=0)
    except OverflowError:  # a time a day from the calendar's ends has no UTC
        raise ValueError(f"{moment.isoformat()} is outside the calendar in UTC") from None


Timestamp = Annotated[
    dt.datetime, AfterValidator(_aware), PlainSerializer(to_text, return_type=str)
]
"""A timezone-aware UTC datetime, written as ``2026-11-29T21:05:00Z``."""
