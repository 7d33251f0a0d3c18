"""Handoffs as the audit stream tells them: who waits for a person now, and the rates.

Read from ``type=handoff`` entries only (``opened``, ``first_reply``,
``closed``), so staff need nothing but the stream. A handoff that went idle
is recorded as closed on the customer's next message: until then it is
listed as open.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from bot.audit.schema import TYPE, EntryType, HandoffAuditEntry
from bot.audit.stats import Distribution
from bot.audit.stream import StreamEntry


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
    # Opened handoffs by reason (``unknown``: entries written before reasons were recorded).
    reasons: Mapping[str, int] = field(default_factory=dict)


def open_handoffs(entries: Iterable[StreamEntry], now: datetime) -> list[OpenHandoff]:
    """Handoffs opened and not closed, oldest first; ``waiting`` ones with their wait so far."""
    current: dict[str, OpenHandoff] = {}
    for entry in entries:
        step = entry.read_as(HandoffAuditEntry)
        if step is None:
            continue
        chat = step.chat_id
        event = step.event
        if event == "opened":
            current[chat] = OpenHandoff(
                chat_id=chat,
                state="waiting",
                trigger=step.trigger,
                reason=step.reason,
                opened_at=entry.recorded_at,
                waiting_seconds=None,
            )
        elif event == "first_reply" and chat in current:
            current[chat] = replace(
                current[chat], state="human", waiting_seconds=(step.wait_ms or 0.0) / 1000
            )
        elif event == "closed":
            current.pop(chat, None)
    return sorted(
        (
            handoff
            if handoff.state != "waiting"
            else replace(
                handoff, waiting_seconds=max(0.0, (now - handoff.opened_at).total_seconds())
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
    reasons: dict[str, int] = {}
    for entry in entries:
        if entry.fields.get(TYPE) == EntryType.TURN:
            chats.add(entry.fields.get("chat_id", ""))
            continue
        step = entry.read_as(HandoffAuditEntry)
        if step is None:
            continue
        if step.event == "opened":
            opened += 1
            reason = step.handoff_reason or "unknown"
            reasons[reason] = reasons.get(reason, 0) + 1
        elif step.event == "first_reply" and step.wait_ms is not None:
            waits.append(step.wait_ms)
    return HandoffStats(
        opened=opened,
        chats=len(chats),
        rate=opened / len(chats) if chats else None,
        first_reply_ms=Distribution.of(waits),
        reasons=reasons,
    )
