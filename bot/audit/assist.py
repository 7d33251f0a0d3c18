"""Staff assist as the audit stream tells it: ``type=assist`` entries; never text.

Each suggested reply has a ``suggested`` entry (or ``suggestion_failed`` with the
failure's kind) and then one ending: ``sent`` (staff pressed "send as is"),
``own`` (staff wrote their own answer instead), ``replaced`` (a newer customer
message came first) or ``unused`` (the handoff ended). ``card_sent`` says the
action it needed went to the customer as a card on staff's press. The
suggestion's text and the action's arguments stay out: ids and names only.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from bot.audit.schema import (
    CHAT_ID,
    TOOL_NAME,
    TURN_ID,
    TYPE,
    EntryType,
    StreamRecord,
    stream_field,
)
from bot.audit.stream import StreamEntry

AssistEvent = Literal[
    "suggested", "suggestion_failed", "sent", "own", "replaced", "unused", "card_sent"
]
ENDINGS: tuple[AssistEvent, ...] = ("sent", "own", "replaced", "unused")
"""How a suggestion ends: exactly one of these per suggestion."""
ASSIST_EVENTS: tuple[AssistEvent, ...] = ("suggested", "suggestion_failed", *ENDINGS, "card_sent")


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistAuditEntry(StreamRecord):
    """One step of one suggested reply (``suggestion_id``); ``tool_name`` the write it needs."""

    entry_type = EntryType.ASSIST

    chat_id: str = field(metadata=stream_field(CHAT_ID))
    turn_id: str = field(metadata=stream_field(TURN_ID))
    event: str = field(metadata=stream_field("event"))
    suggestion_id: str = field(default="", metadata=stream_field("suggestion_id"))
    tool_name: str = field(
        default="", metadata=stream_field(TOOL_NAME, written_if=lambda entry: bool(entry.tool_name))
    )
    # suggestion_failed only: why, in one word (timeout, unavailable, invalid, empty).
    error: str = field(
        default="", metadata=stream_field("error", written_if=lambda entry: bool(entry.error))
    )


def rollup_fields(fields: Mapping[str, str]) -> list[tuple[str, str]]:
    """The per-minute rollup counts of one assist entry: ``as|<event>``."""
    event = fields.get("event", "")
    return [(f"as|{event}", "1")] if event else []


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistStats:
    """Suggestions of a period by event; the acceptance rate is what the feature is judged by."""

    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def suggested(self) -> int:
        """Suggestions posted in topics."""
        return self.counts.get("suggested", 0)

    @property
    def ended(self) -> int:
        """Suggestions that ended (sent as is, own answer, replaced, unused)."""
        return sum(self.counts.get(event, 0) for event in ENDINGS)

    @property
    def acceptance(self) -> float | None:
        """The share of ended suggestions staff sent as is (``None`` before any ended)."""
        return self.counts.get("sent", 0) / self.ended if self.ended else None


def stats_of_counts(counts: Mapping[str, int]) -> AssistStats:
    """The assist stats of summed rollup counts (``as|<event>``)."""
    found: dict[str, int] = {}
    for name, count in counts.items():
        kind, _, event = name.partition("|")
        if kind == "as" and event:
            found[event] = found.get(event, 0) + count
    return AssistStats(counts=found)


def assist_stats(entries: Iterable[StreamEntry]) -> AssistStats:
    """The assist stats of ``entries`` (read from the stream)."""
    counts: dict[str, int] = {}
    for entry in entries:
        if entry.fields.get(TYPE) != EntryType.ASSIST:
            continue
        for name, value in rollup_fields(entry.fields):
            counts[name] = counts.get(name, 0) + int(value)
    return stats_of_counts(counts)


def stats_json(stats: AssistStats) -> dict[str, object]:
    """``stats --json``'s ``assist`` object."""
    return {
        "suggested": stats.suggested,
        "events": {event: stats.counts.get(event, 0) for event in ASSIST_EVENTS},
        "acceptance": stats.acceptance,
    }


def stats_lines(stats: AssistStats) -> list[str]:
    """``stats``' lines about suggestions (none when there were none)."""
    if not stats.suggested and not stats.ended and not stats.counts.get("suggestion_failed"):
        return []
    rate = "-" if stats.acceptance is None else f"{stats.acceptance * 100:.1f}%"
    counts = stats.counts
    return [
        f"suggestions: {stats.suggested} drafted, {counts.get('suggestion_failed', 0)} failed; "
        f"sent as is {counts.get('sent', 0)}, own answer {counts.get('own', 0)}, "
        f"replaced {counts.get('replaced', 0)}, unused {counts.get('unused', 0)}; "
        f"acceptance {rate}; action cards {counts.get('card_sent', 0)}"
    ]
