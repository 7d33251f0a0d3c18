"""Secrets kept out of what is shown: a Redis URL with its password masked.

A module of its own so that the audit CLI can use it without importing the
composition root (which pulls in openai and aiogram and slows its start).
"""


def redacted_url(url: str) -> str:
    """The URL with its password replaced by ``***``, for logs and error lines.

    Works on the text, never parses the URL: a password may hold ``#``, ``?``,
    ``/`` or ``@``, which a URL parser reads as the end of the authority and so
    would leave the password in a fragment, query or path. The userinfo ends at
    the last ``@``, since a host never contains one. It never fails on a URL that
    the Redis client would refuse and keeps the rest as written.
    """
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    userinfo, at, host_and_rest = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host_and_rest}"
