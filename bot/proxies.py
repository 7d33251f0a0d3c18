"""Which proxy reaches a server: the bot's own setting, else the standard environment variables.

``TELEGRAM_PROXY`` and ``LLM_PROXY`` win; without them, ``HTTPS_PROXY``/``HTTP_PROXY``
(by the server's scheme), then ``ALL_PROXY`` apply, lower-case names first, and
``NO_PROXY`` exempts hosts, as curl and Python's urllib read them. Both clients
connect through aiohttp-socks, so a proxy may be HTTP (CONNECT) or SOCKS 4/5,
with a user and password in its URL.
"""

from collections.abc import Mapping
from urllib.parse import urlsplit

# What aiohttp-socks understands, and the spellings curl users write for the same.
_SCHEMES = {"http": "http", "socks5": "socks5", "socks5h": "socks5", "socks4": "socks4"}
_SCHEMES["socks4a"] = "socks4"

PROXY_URL_HINT = "expected http://host:port or socks5://user:password@host:port"


class ProxyURLError(ValueError):
    """A proxy URL the clients cannot use; the message never quotes the URL."""


def normalise_proxy_url(url: str) -> str:
    """``url`` in the form aiohttp-socks takes; raises :class:`ProxyURLError`.

    A URL without a scheme is an HTTP proxy (as curl reads ``HTTPS_PROXY=host:3128``).
    """
    text = url.strip()
    if "://" not in text:
        text = f"http://{text}"
    parts = urlsplit(text)
    scheme = _SCHEMES.get(parts.scheme.lower())
    try:
        port = parts.port
    except ValueError as error:
        raise ProxyURLError(PROXY_URL_HINT) from error
    if scheme is None or not parts.hostname or port is None:
        raise ProxyURLError(PROXY_URL_HINT)
    return parts._replace(scheme=scheme, path="", query="", fragment="").geturl()


def environment_proxy(target_url: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The standard variable that applies to ``target_url`` and its value, or ``None``."""
    proxies: dict[str, tuple[str, str]] = {}
    # Upper case first so that the lower-case spelling overrides it, as urllib does.
    for name in sorted(environ, key=lambda key: key.islower()):
        value = environ[name]
        lower = name.lower()
        if value and lower.endswith("_proxy"):
            proxies[lower.removesuffix("_proxy")] = (name, value)
    parts = urlsplit(target_url)
    chosen = proxies.get(parts.scheme.lower()) or proxies.get("all")
    if chosen is None:
        return None
    no_proxy = proxies.get("no")
    if no_proxy is not None and _bypassed(parts.hostname or "", no_proxy[1]):
        return None
    return chosen


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` exempts ``host``: ``*``, the host itself, or a domain suffix."""
    host = host.lower().rstrip(".")
    for entry in no_proxy.split(","):
        name = entry.strip().lower().lstrip(".").rstrip(".")
        if name == "*":
            return True
        # An entry may carry a port (host:port); a bracketed IPv6 address keeps its colons.
        if ":" in name and not name.startswith("[") and name.count(":") == 1:
            name = name.split(":", 1)[0]
        if name and (host == name.strip("[]") or host.endswith("." + name)):
            return True
    return False


def proxy_for(target_url: str, configured: str | None, environ: Mapping[str, str]) -> str | None:
    """The proxy URL for ``target_url``, or ``None`` to connect directly.

    ``configured`` is the bot's own setting; a bad URL from the environment
    raises :class:`ProxyURLError` naming the variable (never its value).
    """
    if configured is not None:
        return normalise_proxy_url(configured)
    found = environment_proxy(target_url, environ)
    if found is None:
        return None
    name, value = found
    try:
        return normalise_proxy_url(value)
    except ProxyURLError as error:
        raise ProxyURLError(f"{name} is not a usable proxy URL: {error}") from error
