"""What the help center is missing: turns whose help-center searches found nothing.

The audit keeps, for each ``search_help_center`` execution, how many articles
it returned and the first one's id, never the query. A *gap* is a turn whose
every successful search returned nothing: staff look the conversation up by
its turn id, where they are allowed to read it, and write the missing article.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from bot.audit.stream import StreamEntry
from turn import ToolStatus

SEARCH_TOOL = "search_help_center"


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeGap:
    """A turn whose searches found no article."""

    turn_id: str
    chat_id: str
    at: datetime
    searches: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchShare:
    """Help-center searches in a period and how many found nothing."""

    searches: int
    empty: int

    @property
    def empty_rate(self) -> float | None:
        """The share of searches that found nothing (``None`` without searches)."""
        return self.empty / self.searches if self.searches else None


def _searches(entries: Iterable[StreamEntry]) -> Iterable[tuple[StreamEntry, int]]:
    """Successful help-center searches that recorded their result count."""
    for entry in entries:
        tool = entry.tool
        if (
            tool is not None
            and tool.tool_name == SEARCH_TOOL
            and tool.status == ToolStatus.SUCCESS
            and tool.result_count is not None
        ):
            yield entry, tool.result_count


def search_share(entries: Iterable[StreamEntry]) -> SearchShare:
    """How many searches ran and how many of them found nothing."""
    searches = empty = 0
    for _, count in _searches(entries):
        searches += 1
        empty += count == 0
    return SearchShare(searches=searches, empty=empty)


def knowledge_gaps(entries: Iterable[StreamEntry]) -> list[KnowledgeGap]:
    """Turns whose every search found nothing, oldest first."""
    first: dict[str, StreamEntry] = {}
    counts: dict[str, int] = {}
    found: set[str] = set()
    for entry, count in _searches(entries):
        first.setdefault(entry.turn_id, entry)
        counts[entry.turn_id] = counts.get(entry.turn_id, 0) + 1
        if count > 0:
            found.add(entry.turn_id)
    return [
        KnowledgeGap(
            turn_id=turn_id,
            chat_id=entry.chat_id,
            at=entry.event_time,
            searches=counts[turn_id],
        )
        for turn_id, entry in first.items()
        if turn_id not in found
    ]
