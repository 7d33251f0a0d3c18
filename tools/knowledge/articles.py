"""Help-center articles: Markdown files with optional front matter, split into passages.

An article is one ``.md`` file. Its first ``#`` heading is the title. An
optional front matter block between two ``---`` lines gives ``id`` (default:
the file name without ``.md`` and without a language suffix), ``lang`` (one of
:data:`LANGUAGES`; default: the file name's language suffix, else
:data:`DEFAULT_LANGUAGE`), ``url`` and ``tags`` (comma-separated). The body is
split into passages at its ``##`` and ``###`` headings, so that a search names
the part of a long article that answers.

Translations of one article share its ``id``: ``returns-how.md`` (Russian) and
``returns-how.en.md`` (``lang: en``) are one topic in two languages, and a
search returns one of them.

The front matter is parsed by the few lines below (``key: value`` per line):
the format needs nothing of YAML, and a parser of ours can say exactly which
line is wrong.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ARTICLE_SUFFIX = ".md"
# A longer article is refused: it is a manual, not an answer, and a passage of it is
# all a search could give anyway. Split it into articles.
MAX_ARTICLE_CHARS = 20_000
# UTF-8 spends at most 4 bytes a character: a file longer than this is too long unread.
MAX_ARTICLE_BYTES = MAX_ARTICLE_CHARS * 4
# Ids appear in URLs, the audit and the model's citations: keep them plain.
_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,79}")
_FRONT_MATTER_KEYS = frozenset({"id", "lang", "url", "tags"})
# The languages the search can analyse (a Snowball stemmer each).
LANGUAGES = ("ru", "en")
# An article that does not say its language: the help center was Russian before
# languages existed, so existing and third-party articles keep working.
DEFAULT_LANGUAGE = "ru"
_HEADING = re.compile(r"^(#{1,3})\s+(.+?)\s*#*\s*$")
_FENCE = "---"


class ArticleError(ValueError):
    """An article that cannot be used; ``str()`` is one line for the author."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Passage:
    """A part of an article: its text under one heading (``heading`` is empty for the intro)."""

    article_id: str
    heading: str
    text: str
    lang: str = DEFAULT_LANGUAGE


@dataclass(frozen=True, slots=True, kw_only=True)
class Article:
    """One parsed article."""

    article_id: str
    title: str
    url: str | None
    tags: tuple[str, ...]
    passages: tuple[Passage, ...]
    source: str
    lang: str = DEFAULT_LANGUAGE


def parse_article(text: str, *, source: str) -> Article:
    """The article in ``text`` (``source`` is its file name); raises :class:`ArticleError`."""
    if len(text) > MAX_ARTICLE_CHARS:
        raise ArticleError(
            f"too long: {len(text)} characters, at most {MAX_ARTICLE_CHARS}; split it"
        )
    lines = text.lstrip("\ufeff").splitlines()
    meta, body_start = _front_matter(lines)
    stem, suffix_lang = _name_parts(source)
    lang = meta.get("lang", suffix_lang or DEFAULT_LANGUAGE)
    if lang not in LANGUAGES:
        raise ArticleError(f"lang {lang!r} must be one of: {', '.join(LANGUAGES)}")
    if suffix_lang is not None and lang != suffix_lang:
        raise ArticleError(
            f"lang {lang!r} contradicts the file name's '.{suffix_lang}{ARTICLE_SUFFIX}'"
        )
    article_id = meta.get("id", stem)
    if _ID.fullmatch(article_id) is None:
        raise ArticleError(
            f"id {article_id!r} must be lower-case latin letters, digits, '-' or '_'"
        )
    url = meta.get("url") or None
    if url is not None and not url.startswith(("https://", "http://")):
        raise ArticleError(f"url {url!r} must start with https:// or http://")
    tags = tuple(tag.strip() for tag in meta.get("tags", "").split(",") if tag.strip())
    title, passages = _passages(article_id, lang, lines[body_start:])
    return Article(
        article_id=article_id,
        title=title,
        url=url,
        tags=tags,
        passages=passages,
        source=source,
        lang=lang,
    )


def _name_parts(source: str) -> tuple[str, str | None]:
    """The file name without ``.md`` and its language suffix, and that suffix if any.

    ``returns-how.en.md`` is ``("returns-how", "en")``; ``returns-how.md`` is
    ``("returns-how", None)``.
    """
    stem = Path(source).stem
    base, dot, suffix = stem.rpartition(".")
    if dot and suffix in LANGUAGES:
        return base, suffix
    return stem, None


def _front_matter(lines: list[str]) -> tuple[dict[str, str], int]:
    """The ``key: value`` pairs and the index of the first body line."""
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or lines[first].strip() != _FENCE:
        return {}, 0
    meta: dict[str, str] = {}
    for number in range(first + 1, len(lines)):
        line = lines[number].strip()
        if line == _FENCE:
            return meta, number + 1
        if not line:
            continue
        if _HEADING.match(line):
            raise ArticleError(
                f"front matter is not closed by a '---' line before line {number + 1}"
            )
        key, colon, value = line.partition(":")
        key = key.strip().lower()
        if not colon or key not in _FRONT_MATTER_KEYS:
            raise ArticleError(
                f"front matter line {number + 1}: expected 'id:', 'lang:', 'url:' or 'tags:', "
                f"got {line[:40]!r}"
            )
        if key in meta:
            raise ArticleError(f"front matter line {number + 1}: {key!r} given twice")
        meta[key] = value.strip().strip("\"'")
    raise ArticleError("front matter is not closed by a '---' line")


def _passages(article_id: str, lang: str, lines: list[str]) -> tuple[str, tuple[Passage, ...]]:
    title = ""
    heading = ""
    current: list[str] = []
    passages: list[Passage] = []

    def close() -> None:
        body = "\n".join(current).strip()
        if body:
            passages.append(Passage(article_id=article_id, heading=heading, text=body, lang=lang))
        current.clear()

    for line in lines:
        match = _HEADING.match(line)
        if match is None:
            current.append(line)
        elif len(match.group(1)) == 1 and not title:
            title = match.group(2)
            # Text above the title is not part of any passage.
            current.clear()
        else:
            close()
            heading = match.group(2)
    close()
    if not title:
        raise ArticleError("no title: the article needs a first-level '# Title' heading")
    if not passages:
        raise ArticleError("empty: the article has a title but no text")
    return title, tuple(passages)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArticleProblem:
    """A file that was skipped, and why (one line)."""

    source: str
    problem: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ArticleSet:
    """The usable articles of a directory and the files that were skipped."""

    articles: tuple[Article, ...]
    problems: tuple[ArticleProblem, ...]


def article_files(directory: Path) -> list[Path]:
    """The article files of ``directory`` (``*.md``, not hidden), sorted by name."""
    return sorted(
        path
        for path in directory.glob(f"*{ARTICLE_SUFFIX}")
        if not path.name.startswith(".") and path.is_file()
    )


def read_articles(directory: Path) -> ArticleSet:
    """Parse every article of ``directory``; a broken one is skipped and reported.

    Of two files with the same id and language the first by name is kept. Raises ``OSError``
    only when the directory itself cannot be listed.
    """
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory} is not a directory")
    root = directory.resolve(strict=True)
    return collect_articles(_read_each(root, article_files(directory)))


def _inside(root: Path, path: Path) -> Path | ArticleProblem:
    """``path`` with every link resolved, if that stays inside ``root`` (itself resolved).

    A link out of the directory (to a ``.env``, a key, ``/etc/passwd``) is never
    read: whatever is indexed, the model may quote to a customer.
    """
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError) as error:
        # RuntimeError: a loop of links.
        reason = error.strerror if isinstance(error, OSError) and error.strerror else "a link loop"
        return ArticleProblem(source=printable_name(path.name), problem=f"cannot be read: {reason}")
    if not real.is_relative_to(root):
        return ArticleProblem(
            source=printable_name(path.name),
            problem="links outside the help center directory: not read",
        )
    return real


def printable_name(name: str) -> str:
    """``name`` with every unprintable character escaped (``\\n``, ``\\u202e``).

    A file name may hold a line break or a direction override; shown as it is, it
    would split a log line in two or turn it around.
    """
    return "".join(
        char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
        for char in name
    )


def _read_each(root: Path, paths: Iterable[Path]) -> Iterable[tuple[str, str | ArticleProblem]]:
    for path in paths:
        yield _read_one(root, path)


def _read_one(root: Path, path: Path) -> tuple[str, str | ArticleProblem]:
    """``(source, text or problem)`` of one article file; the source is printable."""
    source = printable_name(path.name)
    real = _inside(root, path)
    if isinstance(real, ArticleProblem):
        return source, real
    try:
        # The resolved path is read, not the link: a link swapped after the check
        # cannot lead the read elsewhere.
        text = _read_bounded(real)
    except UnicodeDecodeError:
        return source, ArticleProblem(source=source, problem="not UTF-8 text")
    except OSError as error:
        return source, ArticleProblem(
            source=source, problem=f"cannot be read: {error.strerror or error}"
        )
    if text is None:
        return source, ArticleProblem(
            source=source,
            problem=f"too long: over {MAX_ARTICLE_BYTES} bytes "
            f"(at most {MAX_ARTICLE_CHARS} characters); split it",
        )
    return source, text


def _read_bounded(path: Path) -> str | None:
    """The file's UTF-8 text, or ``None`` when it is over :data:`MAX_ARTICLE_BYTES`.

    At most one byte past the limit is read: a huge file (a log, an export dropped
    into the directory) never enters memory whole.
    """
    with path.open("rb") as file:
        raw = file.read(MAX_ARTICLE_BYTES + 1)
    if len(raw) > MAX_ARTICLE_BYTES:
        return None
    return raw.decode("utf-8")


def collect_articles(texts: Iterable[tuple[str, str | ArticleProblem]]) -> ArticleSet:
    """Parse ``(source, text)`` pairs in order; duplicates of an id in one language are problems."""
    articles: dict[tuple[str, str], Article] = {}
    problems: list[ArticleProblem] = []
    for source, text in texts:
        if isinstance(text, ArticleProblem):
            problems.append(text)
            continue
        try:
            article = parse_article(text, source=source)
        except ArticleError as error:
            problems.append(ArticleProblem(source=source, problem=str(error)))
            continue
        key = (article.article_id, article.lang)
        if (first := articles.get(key)) is not None:
            problems.append(
                ArticleProblem(
                    source=source,
                    problem=f"duplicate id {article.article_id!r} in lang {article.lang!r} "
                    f"(also in {first.source})",
                )
            )
            continue
        articles[key] = article
    return ArticleSet(articles=tuple(articles.values()), problems=tuple(problems))
