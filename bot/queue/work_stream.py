"""The work stream: "this conversation has queued work", read by workers through a group.

A signal is sent when a chat's queue has work and no worker holds the chat.
A worker leaves a signal pending until it has drained the chat (or could not
take it): a worker that dies keeps its signals pending, and another worker
claims them (``XAUTOCLAIM``) once they have been idle for about one lease.
Extra signals are harmless: a worker that finds nothing to do acknowledges.

Each signal also enters the chat in an index beside the stream (same slot, same
script): the chats signalled and not yet seen empty, scored by their last
signal. A sweep (:mod:`bot.queue.sweep`) reads the entries older than a few
leases and signals again a chat that still has work, no lease and no live
signal (acknowledged by mistake, trimmed, lost with a fail-over); an empty
chat leaves the index.
"""

import asyncio
import logging
import socket
import time
from dataclasses import dataclass
from os import getpid
from secrets import token_hex
from typing import Any

from redis.exceptions import RedisError, ResponseError

from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.keys import RedisKeys, is_conversation_key
from bot.storage.scripts.base import Scripts
from bot.storage.scripts.work import Forget, Resignal, SignalScript, Stale

logger = logging.getLogger(__name__)

GROUP = "workers"
# Acknowledged signals are only history; pending ones are reclaimed within a lease,
# long before this many newer signals could push them out.
STREAM_MAXLEN = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Signal:
    """One signal: its stream id and the conversation that has work."""

    signal_id: str
    conversation_key: str


def consumer_name() -> str:
    """A name unique to this process (host, pid, random)."""
    return f"{socket.gethostname()}-{getpid()}-{token_hex(3)}"


class WorkStream:
    """Signals on one stream key; single-key commands only (the stream has its own slot)."""

    def __init__(self, redis: AsyncRedisClient, *, stream: str, consumer: str) -> None:
        self._redis = redis
        self._stream = stream
        self.consumer = consumer
        self._index = RedisKeys.work_queued(stream)
        self._sweep_turn = RedisKeys.work_sweep(stream)
        self._scripts = Scripts(redis)

    async def ensure_group(self) -> None:
        """Create the consumer group (from the stream's start) unless it exists."""
        try:
            await self._redis.xgroup_create(self._stream, GROUP, id="0", mkstream=True)
        except ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise

    async def signal(self, conversation_key: str) -> None:
        """Tell workers ``conversation_key`` has queued work (and index the chat)."""
        await self._scripts.run(
            SignalScript(
                stream=self._stream,
                index=self._index,
                conversation_key=conversation_key,
                maxlen=STREAM_MAXLEN,
            )
        )

    async def take_sweep_turn(self, period_ms: int) -> bool:
        """Whether this process sweeps now (one process per period does)."""
        return bool(await self._redis.set(self._sweep_turn, self.consumer, nx=True, px=period_ms))

    async def stale(self, older_than_ms: int, offset: int, count: int) -> list["IndexEntry"]:
        """Up to ``count`` indexed chats last signalled over ``older_than_ms`` ago, oldest first."""
        reply: list[Any] = await self._scripts.run(
            Stale(index=self._index, older_than_ms=older_than_ms, offset=offset, count=count)
        )
        return [
            IndexEntry(conversation_key=text_of(key), score=text_of(score))
            for key, score in zip(reply[::2], reply[1::2], strict=True)
        ]

    async def forget(self, entry: "IndexEntry") -> None:
        """Drop a chat seen empty from the index, unless it was signalled since."""
        await self._scripts.run(
            Forget(index=self._index, conversation_key=entry.conversation_key, score=entry.score)
        )

    async def signal_again(self, entry: "IndexEntry") -> bool:
        """Signal a chat with work and no lease again, unless its last signal is live."""
        reply = await self._scripts.run(
            Resignal(
                stream=self._stream,
                index=self._index,
                conversation_key=entry.conversation_key,
                score=entry.score,
                maxlen=STREAM_MAXLEN,
                group=GROUP,
            )
        )
        return int(reply) == 1

    async def read(self, count: int, block_ms: int) -> list[Signal]:
        """New signals for this consumer (at most ``count``; waits up to ``block_ms``)."""
        reply: Any = await self._redis.xreadgroup(
            GROUP, self.consumer, {self._stream: ">"}, count=count, block=block_ms
        )
        signals: list[Signal] = []
        for _stream, entries in reply or ():
            signals.extend(await self._readable(entries))
        return signals

    async def claim_idle(self, min_idle_ms: int, count: int) -> list[Signal]:
        """Signals other consumers left pending longer than ``min_idle_ms`` (dead or busy)."""
        reply: list[Any] = await self._redis.xautoclaim(
            self._stream, GROUP, self.consumer, min_idle_time=min_idle_ms, count=count
        )
        return await self._readable(reply[1])

    async def _readable(self, entries: list[Any]) -> list[Signal]:
        """The signals naming a conversation; any other entry is acknowledged here, once.

        Left pending, such an entry would be claimed again every lease, fail every
        time and count in the backlog for ever.
        """
        signals, unreadable = _signals(entries)
        if unreadable:
            try:
                await self.ack(*unreadable)
            except (RedisError, OSError) as error:
                # Still pending: claimed (and dropped) again after a lease.
                logger.warning(
                    "%d unreadable signal(s) not acknowledged (%s)",
                    len(unreadable),
                    type(error).__name__,
                )
        return signals

    async def ack(self, *signal_ids: str) -> None:
        """The chats were drained: forget their signals (one command for all of them)."""
        await self._redis.xack(self._stream, GROUP, *signal_ids)

    async def backlog(self, now_ms: int) -> "Backlog":
        """Chats waiting for a worker or being drained, and how long the oldest has waited."""
        groups: Any = await self._redis.xinfo_groups(self._stream)
        group = next((g for g in groups if text_of(g.get("name", g.get(b"name"))) == GROUP), None)
        if group is None:
            return Backlog(chats=0, oldest_seconds=0.0)
        lag = group.get("lag")
        pending = int(group.get("pending") or 0)
        oldest_ids: list[str] = []
        if pending:
            summary: Any = await self._redis.xpending(self._stream, GROUP)
            if summary and summary.get("min"):
                oldest_ids.append(text_of(summary["min"]))
        last = text_of(group.get("last-delivered-id") or "0-0")
        waiting: Any = await self._redis.xrange(self._stream, min=f"({last}", count=1)
        if waiting:
            oldest_ids.append(text_of(waiting[0][0]))
        if lag is None:
            # Redis before 7 does not count the lag; the stream's length past the last
            # delivered entry is not cheap to count, so report what is known.
            lag = 1 if waiting else 0
        oldest_ms = min((int(entry.split("-")[0]) for entry in oldest_ids), default=now_ms)
        return Backlog(
            chats=int(lag) + pending, oldest_seconds=max(0.0, (now_ms - oldest_ms) / 1000)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexEntry:
    """A chat in the index of signalled chats, with its score as Redis wrote it."""

    conversation_key: str
    score: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Backlog:
    """Chats with queued work not yet drained, and the age of the oldest signal among them."""

    chats: int
    oldest_seconds: float


class BacklogGauge:
    """The last backlog read from Redis, for a metrics scrape (which reads synchronously)."""

    def __init__(self, stream: WorkStream) -> None:
        self._stream = stream
        self.chats = 0

    async def refresh(self) -> None:
        """Read the backlog again; keep the last value when Redis does not answer."""
        try:
            self.chats = (await self._stream.backlog(int(time.time() * 1000))).chats
        except (RedisError, OSError):
            logger.warning("Queue depth unavailable for metrics: Redis did not answer")


def _signals(
    entries: list[tuple[bytes | str, dict[bytes | str, bytes | str] | None]],
) -> tuple[list[Signal], list[str]]:
    """The signals that name a valid conversation, and the ids of every other entry."""
    signals = []
    unreadable = []
    for raw_id, fields in entries:
        entry_id = text_of(raw_id)
        if not fields:
            # Trimmed from the stream while pending: nothing left to act on.
            unreadable.append(entry_id)
            continue
        raw_key = fields.get(b"c", fields.get("c", b""))
        key = raw_key.decode(errors="replace") if isinstance(raw_key, bytes) else raw_key
        if not is_conversation_key(key):
            # The entry's id only: the field may hold anything at all.
            logger.warning("Signal %s names no valid conversation; acknowledged, dropped", entry_id)
            unreadable.append(entry_id)
            continue
        signals.append(Signal(signal_id=entry_id, conversation_key=key))
    return signals, unreadable


class Acknowledger:
    """Acknowledges drained chats' signals in the background, many in one ``XACK``.

    While one ``XACK`` is on its way, the signals of chats finished meanwhile wait
    and go together in the next: one round trip per turn becomes one per batch
    under load (and stays one per turn when turns come one at a time). A signal
    acknowledged a moment late, or never (Redis down, the process killed), is
    harmless: it stays pending and is claimed again after a lease of idleness,
    by a worker that finds the chat empty and acknowledges it then.
    """

    def __init__(self, stream: WorkStream) -> None:
        self._stream = stream
        self._waiting: list[str] = []
        self._sending: asyncio.Task[None] | None = None

    def ack(self, signal_id: str) -> None:
        """Acknowledge ``signal_id`` soon (does not wait)."""
        self._waiting.append(signal_id)
        if self._sending is None:
            self._sending = asyncio.create_task(self._send(), name="xack")

    async def flush(self) -> None:
        """Wait until every acknowledgement asked for so far has been sent (or has failed)."""
        while self._sending is not None:
            await asyncio.shield(self._sending)

    async def _send(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    await self._stream.ack(*batch)
                except (RedisError, OSError) as error:
                    logger.warning(
                        "%d signal(s) not acknowledged (%s); they are claimed again later",
                        len(batch),
                        type(error).__name__,
                    )
        finally:
            self._sending = None
