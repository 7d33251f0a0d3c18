"""The index follows KNOWLEDGE_DIR while the process runs: added, changed, removed, broken articles.

The watcher rebuilds in a worker thread on its timer and on SIGHUP; searches
keep answering from the previous index meanwhile.
"""

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.knowledge.watcher import KnowledgeWatcher
from bot.settings import DEMO_HELP_CENTER
from tests.knowledge.conftest import write_article
from tools.knowledge.articles import read_articles
from tools.knowledge.library import HelpCenter

# The shipped demo help center, every language counted.
DEMO_ARTICLES = len(read_articles(DEMO_HELP_CENTER).articles)

NEW_ARTICLE = (
    "---\nid: coffee-rent\n---\n# Аренда кофемашин\n\n"
    "Кофемашину можно взять в аренду для офиса на месяц.\n"
)


async def _eventually(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10.0
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def _top(center: HelpCenter, query: str) -> str | None:
    hits = center.search(query)
    return hits[0].article_id if hits else None


def _ids(center: HelpCenter, query: str) -> list[str]:
    return [hit.article_id for hit in center.search(query)]


def _skipped(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The "article skipped" lines logged so far."""
    messages = [record.getMessage() for record in caplog.records]
    return [line for line in messages if line.startswith("Help center article ")]


def _bump(path: Path, text: str) -> None:
    """Write ``text`` and move the mtime forward: a coarse clock never hides the change."""
    path.write_text(text, encoding="utf-8")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


async def test_an_article_added_changed_and_removed_while_running(articles_dir: Path) -> None:
    center = HelpCenter.load(articles_dir)
    watcher = KnowledgeWatcher(center, interval_seconds=0.05)
    watcher.start(sighup=False)
    try:
        assert "coffee-rent" not in _ids(center, "аренда кофемашины")
        write_article(articles_dir, "coffee-rent.md", NEW_ARTICLE)
        await _eventually(lambda: _top(center, "аренда кофемашины") == "coffee-rent")

        _bump(articles_dir / "coffee-rent.md", NEW_ARTICLE.replace("на месяц", "на квартал"))
        await _eventually(lambda: "на квартал" in center.search("аренда кофемашины")[0].snippet)
        assert center.snapshot.index.article_count == DEMO_ARTICLES + 1

        (articles_dir / "coffee-rent.md").unlink()
        await _eventually(lambda: "coffee-rent" not in _ids(center, "аренда кофемашины"))
        assert center.snapshot.index.article_count == DEMO_ARTICLES
    finally:
        await watcher.aclose()


async def test_a_broken_article_is_reported_and_skipped_and_the_rest_still_answers(
    articles_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    center = HelpCenter.load(articles_dir)
    watcher = KnowledgeWatcher(center, interval_seconds=0.05)
    watcher.start(sighup=False)
    caplog.set_level(logging.WARNING, logger="tools.knowledge.library")
    try:
        write_article(articles_dir, "broken.md", "---\nid: broken\nНет закрывающей черты\n")
        _bump(articles_dir / "refunds.md", "Статья без заголовка.")
        # The new index is in use a moment before its problems are logged.
        await _eventually(lambda: len(center.snapshot.problems) == 2 and len(_skipped(caplog)) >= 2)
        assert {problem.source for problem in center.snapshot.problems} == {
            "broken.md",
            "refunds.md",
        }
        logged = _skipped(caplog)
        assert any(line.startswith("Help center article broken.md skipped") for line in logged)
        assert any(
            line.startswith("Help center article refunds.md skipped: no title") for line in logged
        )
        assert _top(center, "как применить промокод") == "promo-codes"
        assert center.snapshot.index.article_count == DEMO_ARTICLES - 1
    finally:
        await watcher.aclose()


async def test_sighup_rebuilds_at_once_without_a_timer(articles_dir: Path) -> None:
    center = HelpCenter.load(articles_dir)
    watcher = KnowledgeWatcher(center, interval_seconds=0)
    watcher.start(sighup=True)
    try:
        # Without the handler, SIGHUP's default action would end the test process.
        assert watcher.handles_sighup
        first = center.snapshot
        write_article(articles_dir, "coffee-rent.md", NEW_ARTICLE)
        os.kill(os.getpid(), signal.SIGHUP)
        await _eventually(lambda: center.snapshot is not first)
        assert _top(center, "аренда кофемашины") == "coffee-rent"
    finally:
        await watcher.aclose()


async def test_an_unreadable_directory_keeps_the_previous_index(articles_dir: Path) -> None:
    center = HelpCenter.load(articles_dir)
    await asyncio.to_thread(articles_dir.rename, articles_dir.with_name("moved"))
    assert await asyncio.to_thread(center.reload, force=True) is False
    assert _top(center, "как применить промокод") == "promo-codes"


async def test_searches_go_on_during_a_rebuild_of_1000_articles(tmp_path: Path) -> None:
    directory = tmp_path / "big"
    directory.mkdir()
    words = [
        "доставка",
        "оплата",
        "возврат",
        "гарантия",
        "промокод",
        "сертификат",
        "бонусы",
        "курьер",
        "пункт",
        "выдачи",
    ]
    for number in range(1000):
        body = " ".join(words[(number + i) % len(words)] for i in range(60))
        write_article(directory, f"a{number:04d}.md", f"# Статья {number}\n\n{body}\n")
    # How long the build takes is bench's (python -m bench.knowledge: about 1 s).
    center = HelpCenter.load(directory)
    assert center.snapshot.index.article_count == 1000
    assert center.snapshot.problems == ()
    assert len(center.search("доставка курьером")) == 3

    write_article(directory, "zzz.md", NEW_ARTICLE)
    rebuild = asyncio.create_task(asyncio.to_thread(center.reload))
    answered_during = 0
    # Bounded, and paced: back-to-back searches would hold the GIL and starve the rebuild.
    async with asyncio.timeout(60):
        while not rebuild.done():
            assert center.search("промокод") != []
            answered_during += 1
            await asyncio.sleep(0.005)
        assert await rebuild is True
    assert answered_during > 0
    assert _top(center, "аренда кофемашины") == "coffee-rent"
