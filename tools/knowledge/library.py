"""The help center one process searches: an index of a directory, rebuilt when its files change.

Each process builds its own index from ``KNOWLEDGE_DIR`` at start: nothing is
shared, so nothing needs to be kept consistent between processes. A rebuild
reads and indexes the directory aside and swaps the new index in whole, so a
search never sees half of one; until then searches use the previous index.
"""

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

from tools.knowledge.articles import (
    ArticleProblem,
    article_files,
    read_articles,
)
from tools.knowledge.index import Hit, SearchIndex

__all__ = ["HelpCenter", "HelpCenterSnapshot", "SearchObserver"]

logger = logging.getLogger(__name__)

# Called after each search with the number of results and the time it took.
SearchObserver = Callable[[int, float], None]

# What identifies a directory's content cheaply: each article file's name, size and mtime.
_Fingerprint = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HelpCenterSnapshot:
    """One build of the directory: its index and the files it skipped."""

    index: SearchIndex
    problems: tuple[ArticleProblem, ...]
    fingerprint: _Fingerprint
    build_seconds: float


def fingerprint(directory: Path) -> _Fingerprint:
    """The directory's article files with their sizes and modification times."""
    rows = []
    for path in article_files(directory):
        try:
            stat = path.stat()
        except OSError:
            continue
        rows.append((path.name, stat.st_size, stat.st_mtime_ns))
    return tuple(rows)


def build_snapshot(directory: Path) -> HelpCenterSnapshot:
    """Read and index ``directory`` (raises ``OSError`` when it cannot be listed)."""
    started = perf_counter()
    marks = fingerprint(directory)
    found = read_articles(directory)
    return HelpCenterSnapshot(
        index=SearchIndex.build(found.articles),
        problems=found.problems,
        fingerprint=marks,
        build_seconds=perf_counter() - started,
    )


class HelpCenter:
    """The current index of ``directory``; :meth:`search` never waits for a rebuild.

    :meth:`reload` is for a worker thread: it rebuilds only when the files changed
    (or when forced) and swaps the result in. Two reloads never run at once.
    """

    def __init__(self, directory: Path, snapshot: HelpCenterSnapshot, *, top_k: int = 3) -> None:
        self.directory = directory
        self.top_k = top_k
        self._snapshot = snapshot
        self._reloading = threading.Lock()
        self._observers: list[SearchObserver] = []

    @classmethod
    def load(cls, directory: Path, *, top_k: int = 3) -> "HelpCenter":
        """Build the first index of ``directory`` (raises ``OSError`` if it is not one)."""
        center = cls(directory, build_snapshot(directory), top_k=top_k)
        center._report(center._snapshot)
        return center

    @property
    def snapshot(self) -> HelpCenterSnapshot:
        """The index in use and what its build skipped."""
        return self._snapshot

    def article_urls(self) -> frozenset[str]:
        """The URLs of the articles in the index in use (what an answer may cite)."""
        return self._snapshot.index.article_urls

    def observe(self, observer: SearchObserver) -> None:
        """Have ``observer`` told the result count and duration of every search."""
        self._observers.append(observer)

    def search(
        self, query: str, top_k: int | None = None, *, language: str | None = None
    ) -> list[Hit]:
        """The best articles for ``query`` in the current index (``[]``: none is relevant).

        ``language`` is the customer's; without it the question's own language is
        preferred (:meth:`SearchIndex.search`).
        """
        started = perf_counter()
        hits = self._snapshot.index.search(
            query, self.top_k if top_k is None else top_k, language=language
        )
        elapsed = perf_counter() - started
        for observer in self._observers:
            observer(len(hits), elapsed)
        return hits

    def reload(self, *, force: bool = False) -> bool:
        """Rebuild if the files changed (always if ``force``); whether a new index is in use.

        A directory that cannot be read keeps the current index (logged); a broken
        article is skipped and logged. Blocking: run it in a worker thread.
        """
        with self._reloading:
            try:
                if not force and fingerprint(self.directory) == self._snapshot.fingerprint:
                    return False
                snapshot = build_snapshot(self.directory)
            except OSError as error:
                logger.error(
                    "Help center %s cannot be read (%s); the previous index stays in use",
                    self.directory,
                    type(error).__name__,
                )
                return False
            # Reported before it is in use: whoever sees the new index finds its problems logged.
            self._report(snapshot)
            self._snapshot = snapshot
            return True

    def _report(self, snapshot: HelpCenterSnapshot) -> None:
        for problem in snapshot.problems:
            logger.warning("Help center article %s skipped: %s", problem.source, problem.problem)
        logger.info(
            "Help center indexed: %d articles, %d passages, %d skipped, %.0f ms (%s)",
            snapshot.index.article_count,
            snapshot.index.passage_count,
            len(snapshot.problems),
            snapshot.build_seconds * 1000,
            self.directory,
        )
