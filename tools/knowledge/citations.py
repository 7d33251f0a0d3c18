"""Links in an answer that look like the help center's must name an article that exists.

The model cites articles by their URL (front matter ``url``). A link on one of
the help center's hosts that is not an article's URL was invented: it would
send the customer to a page that does not exist (or to whatever an attacker
later puts there). Such a link is taken out before the answer reaches anyone: a
Markdown link keeps its words, a bare URL goes. Links to other hosts are not
the help center's business and stay as they are.
"""

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

# A Markdown link whose target is an http(s) URL: ``[words](https://...)``.
_MARKDOWN_LINK = re.compile(r"\[([^\]\n]*)\]\((https?://[^\s)]+)\)")
# A bare URL; characters that usually close a sentence are trimmed off its end.
_BARE_URL = re.compile(r"https?://[^\s<>()\[\]«»\"'`]+", re.IGNORECASE)
_TRAILING = ".,;:!?…"
# Where a bare URL was taken out (a character no answer holds), and what to tidy there:
# the spaces before it, a second punctuation mark («См. <url>.» becomes «См.»), and the
# spaces after it at the start of a line.
_GONE = "\x00"
_SPACES_BEFORE_GONE = re.compile(rf"[ \t]*{_GONE}")
_PUNCTUATION_TWICE = re.compile(rf"([.,;:!?]){_GONE}[.,;:!?]")
_GONE_AT_LINE_START = re.compile(rf"^{_GONE}[ \t]*", re.MULTILINE)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckedText:
    """The text with invented help-center links taken out, and how many were."""

    text: str
    removed: int


def _host(url: str) -> str:
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return ""
    return host.lower().removeprefix("www.")


def _normal(url: str) -> str:
    """What two URLs of one page share: host, path without a trailing slash, query."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    path = parts.path.rstrip("/")
    query = f"?{parts.query}" if parts.query else ""
    return f"{_host(url)}{path}{query}"


class CitationCheck:
    """Checks answers against the help center's article URLs (read afresh at each check).

    ``article_urls`` returns the URLs of the articles in use now: a help center
    reloaded with new articles is cited correctly at once.
    """

    def __init__(self, article_urls: Callable[[], Iterable[str]]) -> None:
        self._article_urls = article_urls
        # The hosts and pages of the last URLs seen: parsed again only when they change.
        self._parsed: tuple[tuple[str, ...], frozenset[str], frozenset[str]] = (
            (),
            frozenset(),
            frozenset(),
        )

    def _hosts_and_pages(self) -> tuple[frozenset[str], frozenset[str]]:
        urls = tuple(self._article_urls())
        seen, hosts, known = self._parsed
        if urls != seen:
            hosts = frozenset(host for host in map(_host, urls) if host)
            known = frozenset(_normal(url) for url in urls)
            self._parsed = (urls, hosts, known)
        return hosts, known

    def __call__(self, text: str) -> CheckedText:
        """``text`` without links to help-center pages that do not exist."""
        # Most answers hold no link at all: nothing to parse.
        if "://" not in text:
            return CheckedText(text=text, removed=0)
        hosts, known = self._hosts_and_pages()
        if not hosts:
            return CheckedText(text=text, removed=0)
        removed = 0

        def invented(url: str) -> bool:
            return _host(url) in hosts and _normal(url) not in known

        def markdown(match: re.Match[str]) -> str:
            nonlocal removed
            words, url = match.group(1), match.group(2)
            if not invented(url):
                return match.group(0)
            removed += 1
            return words

        def bare(match: re.Match[str]) -> str:
            nonlocal removed
            url = match.group(0)
            kept = url.rstrip(_TRAILING)
            if not invented(kept):
                return url
            removed += 1
            return _GONE + url[len(kept) :]

        checked = _BARE_URL.sub(bare, _MARKDOWN_LINK.sub(markdown, text.replace(_GONE, "")))
        if _GONE in checked:
            checked = _SPACES_BEFORE_GONE.sub(_GONE, checked)
            checked = _PUNCTUATION_TWICE.sub(r"\1", checked)
            checked = _GONE_AT_LINE_START.sub("", checked).replace(_GONE, "")
        return CheckedText(text=checked, removed=removed)
