"""Exporting the audit stream: every entry handed on once, through a consumer group.

:class:`StreamExporter` takes an injected synchronous client created with
``decode_responses=True``.
"""

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass

import redis

from bot.audit.stream import StreamEntry, parse_entries, parse_read_reply, reply_list
from bot.storage.connection import SyncRedisClient
from bot.support_audit.reader import check_stream


@dataclass(frozen=True, slots=True)
class StreamExporter:
    """Hands every entry of the stream to ``emit`` once, through a consumer group.

    Entries a crashed exporter received but never acknowledged stay pending in
    the group; the next run claims those idle for ``claim_idle_ms`` with
    ``XAUTOCLAIM`` and emits them first. Each entry is acknowledged right after
    ``emit`` returns, so ``emit`` must have written (and flushed) it by then: an
    exporter that dies before that leaves the entry pending, never lost, and
    one that dies between the two repeats at most that one entry (receivers
    can drop it by its ``id``).
    """

    client: SyncRedisClient
    stream: str
    _: KW_ONLY
    group: str
    consumer: str
    claim_idle_ms: int = 60_000
    batch_size: int = 100

    def __post_init__(self) -> None:
        if self.claim_idle_ms < 0:
            raise ValueError("claim_idle_ms must not be negative")
        if self.batch_size < 1:
            raise ValueError("batch_size must be positive")

    def ensure_group(self) -> bool:
        """Create the group at the start of the stream if missing; ``True`` if created."""
        check_stream(self.client, self.stream)
        try:
            self.client.xgroup_create(self.stream, self.group, id="0")
        except redis.ResponseError as error:
            if str(error).startswith("BUSYGROUP"):
                return False
            raise
        return True

    def run(
        self,
        emit: Callable[[StreamEntry], None],
        follow: bool = False,
        block_ms: int = 1000,
    ) -> int:
        """Emit reclaimed, then new entries; return how many (``follow`` runs until interrupted)."""
        emitted = self._reclaim(emit) + self._drain(emit, block_ms=None)
        while follow:
            emitted += self._reclaim(emit) + self._drain(emit, block_ms=block_ms)
        return emitted

    def _reclaim(self, emit: Callable[[StreamEntry], None]) -> int:
        emitted = 0
        cursor = "0-0"
        while True:
            reply = reply_list(
                self.client.xautoclaim(
                    self.stream,
                    self.group,
                    self.consumer,
                    min_idle_time=self.claim_idle_ms,
                    start_id=cursor,
                    count=self.batch_size,
                )
            )
            cursor = str(reply[0])
            emitted += self._emit_all(parse_entries(reply[1]), emit)
            if cursor == "0-0":
                return emitted

    def _drain(self, emit: Callable[[StreamEntry], None], block_ms: int | None) -> int:
        emitted = 0
        while True:
            reply = self.client.xreadgroup(
                self.group,
                self.consumer,
                {self.stream: ">"},
                count=self.batch_size,
                block=block_ms,
            )
            entries = parse_read_reply(reply, self.stream)
            emitted += self._emit_all(entries, emit)
            if len(entries) < self.batch_size:
                return emitted

    def _emit_all(self, entries: Sequence[StreamEntry], emit: Callable[[StreamEntry], None]) -> int:
        for entry in entries:
            emit(entry)
            self.client.xack(self.stream, self.group, entry.entry_id)
        return len(entries)
