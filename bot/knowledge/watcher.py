"""The help center in a bot process: opened at start, watched for changes, counted in metrics.

Each process builds its own index from ``KNOWLEDGE_DIR`` when it starts, then
a :class:`KnowledgeWatcher` checks the directory every
``KNOWLEDGE_RELOAD_SECONDS`` and at once on SIGHUP. The rebuild runs in a
worker thread and the new index is swapped in whole, so turns go on with the
previous index meanwhile; a broken article is logged and skipped.
"""

import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram

from tools.knowledge.library import HelpCenter

logger = logging.getLogger(__name__)

NAMESPACE = "support"
# A search over an in-memory index: tens of microseconds, milliseconds for big help centers.
SEARCH_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)


class KnowledgeError(RuntimeError):
    """The help center cannot be opened at start; ``str()`` is one line for the operator."""


def open_help_center(directory: Path, *, top_k: int) -> HelpCenter:
    """The first index of ``directory`` (``KNOWLEDGE_DIR``).

    Raises :class:`KnowledgeError` when it is not a readable directory; broken
    articles in it are only logged.
    """
    try:
        return HelpCenter.load(directory, top_k=top_k)
    except OSError as error:
        reason = error.strerror or str(error)
        raise KnowledgeError(f"KNOWLEDGE_DIR {directory} cannot be read: {reason}") from error


class KnowledgeMetrics:
    """Searches (found something or empty) and their duration, in the application's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.searches = Counter(
            "knowledge_searches",
            "Help-center searches, by whether they found an article.",
            ["result"],
            namespace=NAMESPACE,
            registry=registry,
        )
        self.search_seconds = Histogram(
            "knowledge_search_duration_seconds",
            "Time of one help-center search over the in-memory index.",
            namespace=NAMESPACE,
            buckets=SEARCH_BUCKETS,
            registry=registry,
        )
        for result in ("found", "empty"):
            self.searches.labels(result=result)

    def record_search(self, results: int, seconds: float) -> None:
        """Count one search (a :data:`~tools.knowledge.library.SearchObserver`)."""
        self.searches.labels(result="found" if results else "empty").inc()
        self.search_seconds.observe(seconds)


class KnowledgeWatcher:
    """Rebuilds ``center`` when its files change: every ``interval_seconds`` and on SIGHUP.

    ``interval_seconds`` 0 checks only on SIGHUP. The task never ends on an
    error: a failed check is logged and the next one runs on time.
    """

    def __init__(self, center: HelpCenter, *, interval_seconds: float) -> None:
        self.center = center
        self._interval = interval_seconds
        self._wake = asyncio.Event()
        self._forced = False
        self._task: asyncio.Task[None] | None = None
        self._sighup = False

    def start(self, *, sighup: bool = True) -> None:
        """Start watching (on the running loop); with ``sighup``, SIGHUP forces a rebuild."""
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name="knowledge-watcher")
        if sighup and hasattr(signal, "SIGHUP"):
            # Only the main thread's loop may handle signals; elsewhere the timer is enough.
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal.SIGHUP, self.request_reload)
                self._sighup = True

    @property
    def handles_sighup(self) -> bool:
        """Whether SIGHUP reaches this watcher (only a main-thread loop can take signals)."""
        return self._sighup

    def request_reload(self) -> None:
        """Rebuild now, even if no file seems changed (SIGHUP)."""
        self._forced = True
        self._wake.set()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._interval or None):
                    await self._wake.wait()
            self._wake.clear()
            force, self._forced = self._forced, False
            try:
                await asyncio.to_thread(self.center.reload, force=force)
            except Exception:
                logger.exception("Help center check failed; the previous index stays in use")

    async def aclose(self) -> None:
        """Stop watching (a rebuild in its thread finishes on its own)."""
        if self._sighup:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            # Removing the handler restores the default, which ends the process: a
            # SIGHUP during shutdown must not cut it short.
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
            self._sighup = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
