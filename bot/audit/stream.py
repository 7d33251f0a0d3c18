"""The audit stream as read back: entries with their stream ids, filters, ids, parsed replies.

Each entry's fields are read through :mod:`bot.audit.schema`. Pure functions
of their arguments; nothing here talks to Redis.
"""

import builtins
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from bot.audit.schema import (
    CHAT_ID,
    TURN_ID,
    TYPE,
    AuditEntry,
    StreamRecord,
    ToolAuditEntry,
    TurnAuditEntry,
    read_entry,
)


class AuditStreamError(RuntimeError):
    """The stream cannot be read as an audit stream; ``str()`` is the one line staff see."""


_Record = TypeVar("_Record", bound=StreamRecord)


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """One stream entry: its id, its fields as written, and the entry they hold.

    ``fields`` stay as written (JSON lines and ``turn`` show every field, even
    one this version does not know); ``entry`` is ``None`` for an entry type
    this version does not know.
    """

    entry_id: str
    fields: Mapping[str, str]
    entry: AuditEntry | None = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entry", read_entry(self.fields))

    @property
    def type(self) -> str:
        """``tool`` or ``turn`` (or what an unknown entry says it is)."""
        return self.fields.get(TYPE, "")

    @property
    def tool(self) -> ToolAuditEntry | None:
        """The tool entry, if this is one."""
        return self.entry if isinstance(self.entry, ToolAuditEntry) else None

    @property
    def turn(self) -> TurnAuditEntry | None:
        """The turn entry, if this is one."""
        return self.entry if isinstance(self.entry, TurnAuditEntry) else None

    def read_as(self, kind: builtins.type[_Record]) -> _Record | None:
        """The entry read as ``kind`` if it is of that type, else ``None``."""
        # builtins.type: ``type`` in this class is the entry's type field.
        return kind.from_fields(self.fields) if self.fields.get(TYPE) == kind.entry_type else None

    @property
    def chat_id(self) -> str:
        """The chat (real id or pseudonym), whatever the entry type."""
        return self.entry.chat_id if self.entry is not None else self.fields.get(CHAT_ID, "")

    @property
    def turn_id(self) -> str:
        """The turn, whatever the entry type."""
        return self.entry.turn_id if self.entry is not None else self.fields.get(TURN_ID, "")

    @property
    def recorded_at(self) -> datetime:
        """When Redis appended the entry (the millisecond part of its id), in UTC."""
        return stream_id_time(self.entry_id)

    @property
    def event_time(self) -> datetime:
        """When it happened: a tool's ``started_at``, else the time it was recorded."""
        started_at = self.tool.started_at if self.tool is not None else ""
        if started_at:
            try:
                parsed = datetime.fromisoformat(started_at)
            except ValueError:
                return self.recorded_at
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
        return self.recorded_at

    def to_json_dict(self) -> dict[str, str]:
        """The entry for JSON lines: ``id``, ``recorded_at`` (ISO-8601 UTC), then every field."""
        return {
            "id": self.entry_id,
            "recorded_at": self.recorded_at.isoformat(timespec="milliseconds"),
            **self.fields,
        }


@dataclass(frozen=True, slots=True)
class EntryFilter:
    """Which entries a command shows; an empty filter lets every entry through.

    ``chat_ids`` holds every form the chat may have in the stream (the real id
    and, when a key is configured, its pseudonym). ``tool`` matches a tool
    entry's name and a turn entry that called that tool; ``status`` matches a
    tool entry's status and a turn entry's outcome.
    """

    chat_ids: frozenset[str] = frozenset()
    tool: str | None = None
    status: str | None = None
    entry_type: str | None = None

    def matches(self, entry: StreamEntry) -> bool:
        """Whether ``entry`` passes every condition."""
        if self.entry_type is not None and entry.type != self.entry_type:
            return False
        if self.chat_ids and entry.chat_id not in self.chat_ids:
            return False
        turn, tool = entry.turn, entry.tool
        if self.tool is not None:
            if turn is not None:
                if self.tool not in (turn.tool_names or ("",)):
                    return False
            elif (tool.tool_name if tool is not None else "") != self.tool:
                return False
        if self.status is not None:
            if turn is not None:
                value = str(turn.outcome)
            else:
                value = str(tool.status) if tool is not None else ""
            if value != self.status:
                return False
        return True


def stream_id_at(moment: datetime) -> str:
    """The smallest stream id at or after ``moment``."""
    return f"{max(math.ceil(moment.timestamp() * 1000), 0)}-0"


def stream_id_time(entry_id: str) -> datetime:
    """The time encoded in a stream id, in UTC."""
    milliseconds = int(entry_id.split("-", 1)[0])
    return datetime.fromtimestamp(milliseconds / 1000, tz=UTC)


def parse_entries(raw: object) -> list[StreamEntry]:
    """Entries from an ``XRANGE``/``XREVRANGE``-shaped reply (``[(id, fields), ...]``).

    ``XAUTOCLAIM`` may report an id whose entry was trimmed meanwhile with no
    fields; such ids are skipped.
    """
    entries: list[StreamEntry] = []
    for item in reply_list(raw):
        entry_id, fields = item
        if fields:
            entries.append(StreamEntry(entry_id=str(entry_id), fields=dict(fields)))
    return entries


def parse_read_reply(raw: object, stream: str) -> list[StreamEntry]:
    """Entries of ``stream`` in an ``XREAD``/``XREADGROUP`` reply (RESP2 list or RESP3 map)."""
    if isinstance(raw, dict):
        found = raw.get(stream)
        if found is None:
            return []
        # RESP3 replies carry the entries in a one-element list.
        return parse_entries(found[0] if found and isinstance(found[0], list) else found)
    entries: list[StreamEntry] = []
    for name, items in reply_list(raw):
        if name == stream:
            entries.extend(parse_entries(items))
    return entries


def reply_list(raw: object) -> list[Any]:
    """The items of a Redis array reply (``[]`` for a nil reply).

    Raises :class:`AuditStreamError` for any other kind of reply.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise AuditStreamError(f"unexpected reply from Redis: {type(raw).__name__}")
    return raw
