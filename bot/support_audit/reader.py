"""Reading the audit stream for support staff: newest entries, time ranges, one turn, follow.

:class:`AuditStreamReader` takes an injected synchronous client created with
``decode_responses=True``.
"""

from collections.abc import Callable, Iterator

from bot.audit.stream import (
    AuditStreamError,
    EntryFilter,
    StreamEntry,
    parse_entries,
    parse_read_reply,
)
from bot.storage.connection import SyncRedisClient, text_of


class AuditStreamReader:
    """Reads one stream: the newest entries, a time range, one turn, new entries as they come."""

    def __init__(self, client: SyncRedisClient, stream: str, batch_size: int = 500) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self._client = client
        self._stream = stream
        self._batch = batch_size

    def check(self) -> None:
        """Raise :class:`AuditStreamError` unless the stream exists and is a stream."""
        check_stream(self._client, self._stream)

    def last_id(self) -> str:
        """The id of the newest entry (``0-0`` for an empty stream)."""
        newest = parse_entries(self._client.xrevrange(self._stream, count=1))
        return newest[0].entry_id if newest else "0-0"

    def newest(
        self,
        limit: int,
        entry_filter: EntryFilter,
        since_id: str = "-",
        until_id: str = "+",
    ) -> list[StreamEntry]:
        """The newest ``limit`` matching entries between the two ids, oldest first."""
        found: list[StreamEntry] = []
        for entry in self._backwards(until_id, since_id):
            if entry_filter.matches(entry):
                found.append(entry)
                if len(found) >= limit:
                    break
        found.reverse()
        return found

    def scan(self, since_id: str = "-", until_id: str = "+") -> Iterator[StreamEntry]:
        """Every entry between the two ids, oldest first, read in batches."""
        return self._batches(
            lambda start: self._client.xrange(
                self._stream, min=start, max=until_id, count=self._batch
            ),
            since_id,
        )

    def turn(self, turn_id: str, since_id: str = "-", until_id: str = "+") -> list[StreamEntry]:
        """Every entry of one turn between the two ids, oldest first.

        A turn's entries are appended together, its ``type=turn`` entry last, so
        the newest-first scan stops once that entry and as many tool entries as
        it counts are found (the whole range is read only for a turn that lost
        entries or does not exist).
        """
        found: list[StreamEntry] = []
        expected_tools: int | None = None
        tools_seen = 0
        for entry in self._backwards(until_id, since_id):
            if entry.turn_id != turn_id:
                continue
            found.append(entry)
            if entry.turn is not None:
                expected_tools = entry.turn.tool_calls
            else:
                tools_seen += 1
            if expected_tools is not None and tools_seen >= expected_tools:
                break
        found.reverse()
        return found

    def follow(
        self, after_id: str, entry_filter: EntryFilter, block_ms: int = 1000
    ) -> Iterator[StreamEntry]:
        """Matching entries appended after ``after_id``, as they come; never ends by itself."""
        last = after_id
        while True:
            reply = self._client.xread({self._stream: last}, count=self._batch, block=block_ms)
            for entry in parse_read_reply(reply, self._stream):
                last = entry.entry_id
                if entry_filter.matches(entry):
                    yield entry

    def _backwards(self, until_id: str, since_id: str) -> Iterator[StreamEntry]:
        return self._batches(
            lambda end: self._client.xrevrange(
                self._stream, max=end, min=since_id, count=self._batch
            ),
            until_id,
        )

    def _batches(self, read: Callable[[str], object], first: str) -> Iterator[StreamEntry]:
        """The entries of ``read(first)``, then of each next batch (``read`` from past the last
        entry read), until a batch comes back short."""
        bound = first
        while True:
            batch = parse_entries(read(bound))
            yield from batch
            if len(batch) < self._batch:
                return
            bound = "(" + batch[-1].entry_id


def check_stream(client: SyncRedisClient, stream: str) -> None:
    """Raise :class:`AuditStreamError` unless ``stream`` exists and is a stream."""
    reply = client.type(stream)
    kind = text_of(reply)
    if kind == "none":
        raise AuditStreamError(
            f"audit stream {stream!r} does not exist (nothing audited yet, "
            "or AUDIT_STREAM / the REDIS_URL database is not the bot's)"
        )
    if kind != "stream":
        raise AuditStreamError(f"key {stream!r} is a {kind}, not a stream: check AUDIT_STREAM")
