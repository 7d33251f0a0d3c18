"""The ``--since`` time spec: a duration before now or an ISO-8601 time."""

import re
from datetime import UTC, datetime, timedelta

_RELATIVE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class TimeSpecError(ValueError):
    """A ``--since`` value that is neither a duration nor an ISO-8601 time."""


def parse_since(text: str, now: datetime) -> datetime:
    """``1h``, ``30m``, ``2d``, ``1w``, ``45s`` before ``now``, or an ISO-8601 time.

    An ISO time without an offset is local time (what staff read on the table).
    """
    match = _RELATIVE.match(text)
    if match is not None:
        amount, unit = int(match.group(1)), match.group(2)
        return now - timedelta(**{_UNITS[unit]: amount})
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError as error:
        raise TimeSpecError(
            f"--since {text!r}: use a duration such as 15m, 1h, 2d, 1w "
            "or an ISO-8601 time such as 2026-12-01T09:30"
        ) from error
    # astimezone() on a naive time reads it as local time.
    return parsed.astimezone(UTC)
