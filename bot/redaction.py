"""Secrets kept out of what is shown: a Redis URL with its password masked.

A module of its own so that the audit CLI can use it without importing the
composition root (which pulls in openai and aiogram and slows its start).
"""

from urllib.parse import urlsplit, urlunsplit


def redacted_url(url: str) -> str:
    """The URL with its password replaced by ``***``, for logs and error lines.

    Works on the text of the authority, so it never fails on a URL that the
    Redis client would refuse (a bad port, IPv6 brackets) and keeps the rest as written.
    """
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))
