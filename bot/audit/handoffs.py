"""Handoffs as the audit stream tells them: who waits for a person now, and the rates.

Read from ``type=handoff`` entries only (``opened``, ``first_reply``,
``closed``), so staff need nothing but the stream. A handoff that went idle
is recorded as closed on the customer's next message: until then it is
listed as open.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from bot.audit.stats import Distribution
from bot.audit.stream_entries import StreamEntry


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenHandoff:
    """A conversation handed to staff and not given back yet."""

    chat_id: str
    state: str
    trigger: str
    reason: str
    opened_at: datetime
    waiting_seconds: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffStats:
    """Handoffs opened among the chats that had turns, and the wait for the first reply."""

    opened: int
    chats: int
    rate: float | None
    first_reply_ms: Distribution


def open_handoffs(entries: Iterable[StreamEntry], now: datetime) -> list[OpenHandoff]:
    """Handoffs opened and not closed, oldest first; ``waiting`` ones with their wait so far."""
    current: dict[str, OpenHandoff] = {}
    for entry in entries:
        if entry.type != "handoff":
            continue
        chat = entry.get("chat_id")
        event = entry.get("event")
        if event == "opened":
            current[chat] = OpenHandoff(
                chat_id=chat,
                state="waiting",
                trigger=entry.get("trigger"),
                reason=entry.get("reason"),
                opened_at=entry.recorded_at,
                waiting_seconds=None,
            )
        elif event == "first_reply" and chat in current:
            opened = current[chat]
            current[chat] = OpenHandoff(
                chat_id=chat,
                state="human",
                trigger=opened.trigger,
                reason=opened.reason,
                opened_at=opened.opened_at,
                waiting_seconds=(entry.number("wait_ms") or 0.0) / 1000,
            )
        elif event == "closed":
            current.pop(chat, None)
    return sorted(
        (
            handoff
            if handoff.state != "waiting"
            else OpenHandoff(
                chat_id=handoff.chat_id,
                state=handoff.state,
                trigger=handoff.trigger,
                reason=handoff.reason,
                opened_at=handoff.opened_at,
                waiting_seconds=max(0.0, (now - handoff.opened_at).total_seconds()),
            )
            for handoff in current.values()
        ),
        key=lambda handoff: handoff.opened_at,
    )


def handoff_stats(entries: Iterable[StreamEntry]) -> HandoffStats:
    """Handoff rate (opened per chat with turns) and time to the first staff reply."""
    opened = 0
    chats: set[str] = set()
    waits: list[float] = []
    for entry in entries:
        if entry.type == "turn":
            chats.add(entry.get("chat_id"))
        elif entry.type == "handoff":
            if entry.get("event") == "opened":
                opened += 1
            elif entry.get("event") == "first_reply":
                wait = entry.number("wait_ms")
                if wait is not None:
                    waits.append(wait)
    return HandoffStats(
        opened=opened,
        chats=len(chats),
        rate=opened / len(chats) if chats else None,
        first_reply_ms=Distribution.of(waits),
    )
