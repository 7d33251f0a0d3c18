"""The audit sink over a Redis stream: a turn's entries in one pipeline, never an exception."""

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import redis.asyncio as aioredis

from bot.audit.entries import AuditEntry
from bot.redis_keys import RedisKeys

logger = logging.getLogger(__name__)


_DONE_TTL_SECONDS = 24 * 3600

# KEYS: stream, the turn's done mark (in the stream's slot).
# ARGV: maxlen, mark ttl, entry count, then per entry: field count, field, value, ...
_WRITE_ONCE = """
if not redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) then return 0 end
local i = 4
for _ = 1, tonumber(ARGV[3]) do
  local count = tonumber(ARGV[i])
  i = i + 1
  local command = {'XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*'}
  for _ = 1, count * 2 do
    command[#command + 1] = ARGV[i]
    i = i + 1
  end
  redis.call(unpack(command))
end
return 1
"""


class RedisStreamAuditSink:
    """Appends each turn's entries to one stream with ``XADD ... MAXLEN ~``.

    One non-transactional pipeline per :meth:`write`, so a turn costs one round
    trip whatever its number of tool calls. When Redis refuses, the entries are
    logged (as one warning line, with the fields as written: there is no
    argument or message text in them) and counted in :attr:`lost_entries`; the
    caller is never told, because an audit failure must not cost the customer
    an answer.

    A tool name the model invented that is not shaped like a tool name is
    written as ``(invalid name)``: it is free text, and may be private.

    ``max_age``, when given, also trims entries older than that age
    (``XTRIM MINID ~``) in the same pipeline. ``timeout_seconds`` bounds one
    write, whatever retries the injected client is configured with.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        stream: str,
        maxlen: int,
        *,
        pseudonymizer: Callable[[str], str] | None = None,
        max_age: timedelta | None = None,
        timeout_seconds: float | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if maxlen < 1:
            raise ValueError("maxlen must be positive")
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
        self._written_entries = 0
        self._write_once = client.register_script(_WRITE_ONCE)

    @property
    def lost_entries(self) -> int:
        """Entries Redis did not take since this sink was built (for metrics and health)."""
        return self._lost_entries

    @property
    def written_entries(self) -> int:
        """Entries appended since this sink was built."""
        return self._written_entries

    def fields_of(self, entry: AuditEntry) -> dict[str, str]:
        """The fields as they go into the stream (chat id pseudonymised if configured)."""
        return self._protected(entry.to_fields())

    def _protected(self, raw: Mapping[str, str]) -> dict[str, str]:
        fields = dict(raw)
        if self._pseudonymizer is not None and "chat_id" in fields:
            fields["chat_id"] = self._pseudonymizer(fields["chat_id"])
        return fields

    async def write(self, entries: Sequence[AuditEntry]) -> None:
        """Append ``entries`` in order, in one round trip; never raises."""
        await self.write_fields([entry.to_fields() for entry in entries])

    async def write_fields(self, entries: Sequence[Mapping[str, str]]) -> None:
        """Append entries given as stream fields (a reply's audit carried through the outbox).

        A turn's entries are written once: a repeated write of the same turn (a
        reply delivered again after a crash) finds the turn's mark and adds nothing.
        """
        if not entries:
            return
        rows = [self._protected(entry) for entry in entries]
        try:
            async with asyncio.timeout(self._timeout_seconds):
                results = await self._send(rows)
        # Any failure at all (refused, reset, timeout, a wrong key type, a bug in
        # a client upgrade) must stay here: the turn's answer matters more.
        except Exception as error:
            self._lose(rows, rows, error)
            return
        failed = [row for row, result in zip(rows, results, strict=False) if _is_error(result)]
        if failed:
            first = next(result for result in results if _is_error(result))
            self._lose(failed, rows, first)
        self._written_entries += len(rows) - len(failed)

    async def _send(self, rows: list[dict[str, str]]) -> list[object]:
        turn_ids = {row.get("turn_id", "") for row in rows}
        if len(turn_ids) == 1 and "" not in turn_ids and self._max_age is None:
            return await self._send_once(turn_ids.pop(), rows)
        pipe = self._client.pipeline(transaction=False)
        for fields in rows:
            # The dict is invariant in redis-py's stubs (FieldT, EncodableT); str fits both.
            pipe.xadd(self._stream, dict(fields), maxlen=self._maxlen, approximate=True)  # type: ignore[arg-type]
        if self._max_age is not None:
            oldest_ms = int((self._clock() - self._max_age).timestamp() * 1000)
            pipe.xtrim(self._stream, minid=f"{max(oldest_ms, 0)}-0", approximate=True)
        results: list[object] = await pipe.execute(raise_on_error=False)
        return results[: len(rows)]

    async def _send_once(self, turn_id: str, rows: list[dict[str, str]]) -> list[object]:
        args: list[str | int] = [self._maxlen, _DONE_TTL_SECONDS, len(rows)]
        for row in rows:
            args.append(len(row))
            for name, value in row.items():
                args.extend((name, value))
        await self._write_once(
            keys=[self._stream, RedisKeys.audit_done(self._stream, turn_id)], args=args
        )
        return [None] * len(rows)

    def _lose(
        self, lost: Sequence[dict[str, str]], rows: Sequence[dict[str, str]], error: object
    ) -> None:
        self._lost_entries += len(lost)
        turn_ids = sorted({row["turn_id"] for row in rows})
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
