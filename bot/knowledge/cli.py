"""``python -m bot knowledge check|search``: for the people who write help-center articles.

``check`` lints the directory the bot would read (``KNOWLEDGE_DIR``, or
``--dir``): one line per broken file (no title, duplicate id, empty, too
long, broken front matter, unreadable), exit status 1 when there is any.
``search`` shows what the bot would find for a question, with scores, so a
new article can be tried before the bot uses it (``--lang`` as the customer's
language; without it the question's own).
"""

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from bot.settings import ToolSettings, describe_settings_error
from tools.knowledge.articles import LANGUAGES, ArticleSet, read_articles
from tools.knowledge.index import SearchIndex

_SNIPPET_PREVIEW = 160


def _directory(given: str | None) -> tuple[Path, int] | tuple[None, int]:
    """``--dir`` or ``KNOWLEDGE_DIR`` with the settings' top-k; exit status 2 on bad settings."""
    try:
        settings = ToolSettings()
    except ValidationError as error:
        for line in describe_settings_error(error):
            print(f"error: {line}", file=sys.stderr)
        return None, 2
    return (Path(given) if given else settings.knowledge_dir), settings.knowledge_top_k


def _articles(directory: Path) -> ArticleSet | None:
    """The articles of ``directory``; ``None``, with the error said, when it cannot be read."""
    try:
        return read_articles(directory)
    except OSError as error:
        print(f"error: {directory} cannot be read: {error.strerror or error}", file=sys.stderr)
        return None


def check(directory: Path) -> int:
    """Lint ``directory``: one line per problem; 1 if any, else 0."""
    found = _articles(directory)
    if found is None:
        return 1
    for problem in found.problems:
        print(f"{directory / problem.source}: {problem.problem}")
    passages = sum(len(article.passages) for article in found.articles)
    languages = Counter(article.lang for article in found.articles)
    by_language = ", ".join(f"{lang} {count}" for lang, count in sorted(languages.items()))
    summary = (
        f"{len(found.articles)} articles, {passages} passages, "
        f"{len(found.problems)} problem(s) in {directory}"
        + (f" (by language: {by_language})" if by_language else "")
    )
    print(summary, file=sys.stderr)
    return 1 if found.problems else 0


def search(directory: Path, query: str, top_k: int, language: str | None = None) -> int:
    """Print what the bot would find for ``query`` in ``directory``, with scores."""
    found = _articles(directory)
    if found is None:
        return 1
    for problem in found.problems:
        print(f"skipped {problem.source}: {problem.problem}", file=sys.stderr)
    hits = SearchIndex.build(found.articles).search(query, top_k, language=language)
    if not hits:
        print("Nothing relevant found: the bot would say so and offer a person.")
        return 0
    for rank, hit in enumerate(hits, start=1):
        print(
            f"{rank}. {hit.article_id} [{hit.lang}]  score {hit.score:.2f}  "
            f"coverage {hit.coverage:.0%}  "
            f"«{hit.title}»" + (f"  {hit.url}" if hit.url else "")
        )
        preview = " ".join(hit.snippet.split())
        if len(preview) > _SNIPPET_PREVIEW:
            preview = preview[: _SNIPPET_PREVIEW - 1] + "…"
        print(f"   {preview}")
    return 0


def main(argv: Sequence[str]) -> int:
    """Run ``check`` or ``search``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m bot knowledge", description="Check and try the help center's articles."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    lint = sub.add_parser("check", help="lint the articles (exit 1 on any problem)")
    lint.add_argument("--dir", help="directory of articles (default: KNOWLEDGE_DIR)")
    find = sub.add_parser("search", help="show what the bot would find, with scores")
    find.add_argument("query", help="a question as a customer would write it")
    find.add_argument("--dir", help="directory of articles (default: KNOWLEDGE_DIR)")
    find.add_argument("--top", type=int, help="how many articles (default: KNOWLEDGE_TOP_K)")
    find.add_argument(
        "--lang", choices=LANGUAGES, help="the customer's language (default: the question's)"
    )
    args = parser.parse_args(argv)
    directory, top_k = _directory(args.dir)
    if directory is None:
        return top_k
    if args.command == "check":
        return check(directory)
    return search(directory, args.query, args.top or top_k, args.lang)
