"""Audit entries as read back from the stream: parsed replies, stream ids and filters.

Pure functions of their arguments; nothing here talks to Redis.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


class AuditStreamError(RuntimeError):
    """The stream cannot be read as an audit stream; ``str()`` is the one line staff see."""


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """One stream entry: its id and its flat string fields."""

    entry_id: str
    fields: Mapping[str, str]

    @property
    def type(self) -> str:
        """``tool`` or ``turn``."""
        return self.fields.get("type", "")

    @property
    def recorded_at(self) -> datetime:
        """When Redis appended the entry (the millisecond part of its id), in UTC."""
        return stream_id_time(self.entry_id)

    @property
    def event_time(self) -> datetime:
        """When it happened: a tool's ``started_at``, else the time it was recorded."""
        started_at = self.fields.get("started_at", "")
        if started_at:
            try:
                parsed = datetime.fromisoformat(started_at)
            except ValueError:
                return self.recorded_at
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
        return self.recorded_at

    def get(self, name: str) -> str:
        """A field's value, ``""`` when absent."""
        return self.fields.get(name, "")

    def number(self, name: str) -> float | None:
        """A field's value as a finite number, ``None`` when absent or not a finite number."""
        try:
            value = float(self.get(name))
        except ValueError:
            return None
        return value if math.isfinite(value) else None

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
        if self.chat_ids and entry.get("chat_id") not in self.chat_ids:
            return False
        if self.tool is not None:
            if entry.type == "turn":
                if self.tool not in entry.get("tool_names").split(","):
                    return False
            elif entry.get("tool_name") != self.tool:
                return False
        if self.status is not None:
            value = entry.get("outcome") if entry.type == "turn" else entry.get("status")
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
