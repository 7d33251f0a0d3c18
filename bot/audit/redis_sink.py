"""The audit sink over a Redis stream: a turn's entries once, in one round trip, never raising."""

import asyncio
import json
import logging
import secrets
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from redis.exceptions import ResponseError

from bot.audit.index import write_once
from bot.audit.schema import CHAT_ID, QUEUED_AT, TURN_ID, AuditEntry
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys
from bot.storage.scripts.base import Scripts

logger = logging.getLogger(__name__)

_DONE_TTL_SECONDS = 24 * 3600

# A turn's entries are written once (see bot.storage.scripts.audit.WriteOnce): a repeated write
# of the same turn (a reply delivered again after a crash, a write retried after a
# timeout) finds the turn's mark and changes neither the stream nor its index.
# Entries Redis did not take wait in memory for the next write; beyond this many the
# oldest are dropped (they are in the warning log line already).
DEFAULT_MAX_PENDING_ENTRIES = 10_000


class RedisStreamAuditSink:
    """Appends each turn's entries to one stream with ``XADD ... MAXLEN ~``.

    One round trip per :meth:`write`, whatever the number of tool calls: each
    turn's entries go in one script that marks the turn as written, so the same
    turn is never appended twice. When Redis cannot be reached, the
    entries are logged (as one warning line, with the fields as written: there
    is no argument or message text in them) and kept in memory, at most
    ``max_pending`` of them, marked with ``queued_at`` (when they were first
    due); the next write, once Redis is back, appends them first, in order, so
    the incident code a customer was given can still be found. Entries Redis
    refuses one by one (a wrong key type) and pending entries beyond the bound
    are dropped and counted in :attr:`lost_entries`. The caller is never told,
    because an audit failure must not cost the customer an answer.

    ``max_age``, when given, also trims entries older than that age
    (``XTRIM MINID ~``) in the same pipeline. ``timeout_seconds`` bounds one
    write, whatever retries the injected client is configured with.
    """

    def __init__(
        self,
        client: AsyncRedisClient,
        stream: str,
        maxlen: int,
        *,
        pseudonymizer: Callable[[str], str] | None = None,
        max_age: timedelta | None = None,
        timeout_seconds: float | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        max_pending: int = DEFAULT_MAX_PENDING_ENTRIES,
    ) -> None:
        if maxlen < 1:
            raise ValueError("maxlen must be positive")
        if max_pending < 0:
            raise ValueError("max_pending must not be negative")
        if max_age is not None and max_age <= timedelta(0):
            raise ValueError("max_age must be positive")
        self._client = client
        self._stream = stream
        self._maxlen = maxlen
        self._pseudonymizer = pseudonymizer
        self._max_age = max_age
        self._timeout_seconds = timeout_seconds
        self._clock = clock
        self._lost_entries = 0
        self._max_pending = max_pending
        self._pending: deque[dict[str, str]] = deque()
        self._scripts = Scripts(client)
        self._index = RedisKeys.audit_index(stream)

    @property
    def lost_entries(self) -> int:
        """Entries Redis did not take since this sink was built (for metrics and health)."""
        return self._lost_entries

    @property
    def pending_entries(self) -> int:
        """Entries waiting in memory for Redis to come back."""
        return len(self._pending)

    def _protected(self, raw: Mapping[str, str]) -> dict[str, str]:
        fields = dict(raw)
        if self._pseudonymizer is not None and CHAT_ID in fields:
            fields[CHAT_ID] = self._pseudonymizer(fields[CHAT_ID])
        return fields

    async def write(self, entries: Sequence[AuditEntry]) -> None:
        """Append pending entries, then ``entries``, in order, in one round trip; never raises."""
        await self.write_fields([entry.to_fields() for entry in entries])

    async def write_fields(self, entries: Sequence[Mapping[str, str]]) -> None:
        """The same, for entries given as stream fields (a reply's audit from the outbox)."""
        if not entries:
            return
        await self._write_rows([self._protected(entry) for entry in entries])

    async def flush(self) -> None:
        """Try once more to append the pending entries (at shutdown); never raises."""
        if self._pending:
            await self._write_rows([])

    async def _write_rows(self, rows: list[dict[str, str]]) -> None:
        # Taken out first: a concurrent write must not append the same pending rows.
        pending = list(self._pending)
        self._pending.clear()
        batch = pending + rows
        try:
            async with asyncio.timeout(self._timeout_seconds):
                results = await self._send(batch)
        # Any failure at all (refused, reset, timeout, a wrong key type, a bug in
        # a client upgrade) must stay here: the turn's answer matters more.
        except Exception as error:
            self._keep(pending, rows, error)
            return
        failed = [row for row, result in zip(batch, results, strict=False) if _is_error(result)]
        if failed:
            first = next(result for result in results if _is_error(result))
            self._lose(failed, batch, first)
        if pending:
            logger.info(
                "audit stream %s: %d delayed entries written, turns %s",
                self._stream,
                len(pending),
                ",".join(sorted({row[TURN_ID] for row in pending})),
            )

    def _keep(
        self, pending: Sequence[dict[str, str]], rows: Sequence[dict[str, str]], error: object
    ) -> None:
        queued_at = self._clock().isoformat(timespec="milliseconds")
        for row in rows:
            row.setdefault(QUEUED_AT, queued_at)
        self._pending.extend(pending)
        self._pending.extend(rows)
        dropped: list[dict[str, str]] = []
        while len(self._pending) > self._max_pending:
            dropped.append(self._pending.popleft())
        self._lost_entries += len(dropped)
        if rows:
            logger.warning(
                "audit stream %s: %d entries not written yet (%s), turns %s; "
                "kept for the next write (%d pending, %d lost in total); entries: %s",
                self._stream,
                len(rows),
                _describe(error),
                ",".join(sorted({row[TURN_ID] for row in rows})),
                len(self._pending),
                self._lost_entries,
                json.dumps(list(rows), ensure_ascii=False, separators=(",", ":")),
            )
        if dropped:
            logger.warning(
                "audit stream %s: %d pending entries dropped (more than %d waiting), turns %s",
                self._stream,
                len(dropped),
                self._max_pending,
                ",".join(sorted({row[TURN_ID] for row in dropped})),
            )

    async def _send(self, rows: list[dict[str, str]]) -> list[object]:
        """A write-once script per turn, in order; the result of each row.

        One turn's write is one script: one round trip. Delayed entries of other
        turns add one each. (Redis Cluster refuses scripts inside a pipeline.)
        """
        groups: list[list[dict[str, str]]] = []
        for row in rows:
            if groups and groups[-1][0].get(TURN_ID) == row.get(TURN_ID):
                groups[-1].append(row)
            else:
                groups.append([row])
        results: list[object] = []
        for group in groups:
            # An entry of no turn has nothing to repeat it by: a mark of its own.
            turn_id = group[0].get(TURN_ID) or f"none-{secrets.token_hex(8)}"
            done = RedisKeys.audit_done(self._stream, turn_id)
            call = write_once(
                self._index,
                self._stream,
                done,
                group,
                maxlen=self._maxlen,
                done_ttl_seconds=_DONE_TTL_SECONDS,
            )
            try:
                result: object = await self._scripts.run(call)
            except ResponseError as error:
                # Refused by Redis itself (a wrong key type): these rows only.
                result = error
            results.extend([result] * len(group))
        if self._max_age is not None:
            oldest_ms = int((self._clock() - self._max_age).timestamp() * 1000)
            await self._client.xtrim(self._stream, minid=f"{max(oldest_ms, 0)}-0", approximate=True)
        return results

    def _lose(
        self, lost: Sequence[dict[str, str]], rows: Sequence[dict[str, str]], error: object
    ) -> None:
        self._lost_entries += len(lost)
        turn_ids = sorted({row[TURN_ID] for row in rows})
        logger.warning(
            "audit stream %s: %d of %d entries lost (%s), turns %s, %d lost in total; entries: %s",
            self._stream,
            len(lost),
            len(rows),
            _describe(error),
            ",".join(turn_ids),
            self._lost_entries,
            json.dumps(list(lost), ensure_ascii=False, separators=(",", ":")),
        )


def _is_error(result: object) -> bool:
    return isinstance(result, Exception)


def _describe(error: object) -> str:
    # The class name and Redis' message; redis-py's messages name host and port, never the password.
    text = str(error).strip() or "no message"
    return f"{type(error).__name__}: {text}"
