"""The help center's watcher as one feature: the index rebuilt when ``KNOWLEDGE_DIR`` changes.

The help center itself is a core part (the search tool reads it); this feature
keeps it fresh and is closed first, before anything it reads from.
"""

from dataclasses import dataclass
from typing import ClassVar

from bot.knowledge.watcher import KnowledgeWatcher
from bot.ops.features import Feature
from bot.settings import Settings
from tools.knowledge.library import HelpCenter


@dataclass(frozen=True, kw_only=True)
class KnowledgeFeature(Feature):
    """Rebuilds the help center's index every ``KNOWLEDGE_RELOAD_SECONDS`` and on SIGHUP."""

    name: ClassVar[str] = "knowledge"

    watcher: KnowledgeWatcher

    async def aclose(self) -> None:
        """Stop watching."""
        await self.watcher.aclose()


def watch_knowledge(settings: Settings, help_center: HelpCenter) -> KnowledgeFeature:
    """The watcher of ``help_center``, started."""
    watcher = KnowledgeWatcher(
        help_center, interval_seconds=settings.tools.knowledge_reload_seconds
    )
    watcher.start()
    return KnowledgeFeature(watcher=watcher)
