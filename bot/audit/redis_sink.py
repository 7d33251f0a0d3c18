"""The audit sink over a Redis stream: a turn's entries in one pipeline, never an exception."""

import asyncio
import json
import logging
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from bot.audit.entries import AuditEntry, TurnAuditEntry
from bot.redis_connection import AsyncRedisClient

logger = logging.getLogger(__name__)

# A registered tool's name always fits this (tools.registry); a name the model made
# up that does not fit may be any text at all, even the customer's, so it is not written.
_TOOL_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
INVALID_TOOL_NAME = "(invalid name)"


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
        client: AsyncRedisClient,
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
        fields = entry.to_fields()
        if isinstance(entry, TurnAuditEntry):
            fields["tool_names"] = ",".join(_safe_tool_name(name) for name in entry.tool_names)
        else:
            fields["tool_name"] = _safe_tool_name(entry.record.tool_name)
        if self._pseudonymizer is not None:
            fields["chat_id"] = self._pseudonymizer(fields["chat_id"])
        return fields

    async def write(self, entries: Sequence[AuditEntry]) -> None:
        """Append ``entries`` in order, in one round trip; never raises."""
        if not entries:
            return
        rows = [self.fields_of(entry) for entry in entries]
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
        pipe = self._client.pipeline(transaction=False)
        for fields in rows:
            # The dict is invariant in redis-py's stubs (FieldT, EncodableT); str fits both.
            pipe.xadd(self._stream, dict(fields), maxlen=self._maxlen, approximate=True)  # type: ignore[arg-type]
        if self._max_age is not None:
            oldest_ms = int((self._clock() - self._max_age).timestamp() * 1000)
            pipe.xtrim(self._stream, minid=f"{max(oldest_ms, 0)}-0", approximate=True)
        results: list[object] = await pipe.execute(raise_on_error=False)
        return results[: len(rows)]

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


def _safe_tool_name(name: str) -> str:
    return name if _TOOL_NAME.fullmatch(name) is not None else INVALID_TOOL_NAME


def _is_error(result: object) -> bool:
    return isinstance(result, Exception)


def _describe(error: object) -> str:
    # The class name and Redis' message; redis-py's messages name host and port, never the password.
    text = str(error).strip() or "no message"
    return f"{type(error).__name__}: {text}"
