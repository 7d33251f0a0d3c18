"""The sweep: chats with queued work that no worker holds and no signal will bring are signalled.

A chat's signal is the only thing that brings a worker to it. Should one be
lost (acknowledged by mistake, trimmed from the stream, or lost with a
fail-over), the chat's messages would wait until the customer writes again.
Every signal indexes its chat beside the stream (:mod:`bot.queue.work_stream`);
once a sweep period, one process (whichever takes the period's turn) reads the
entries older than two leases, the stale ones, and for each looks at the chat:

* its queue is empty: it leaves the index (unless it was signalled since);
* a worker holds it: left alone, looked at again next period;
* work and no lease: signalled again, unless its last signal is still live
  (unread by the group, or pending: a worker claims it after a lease).

A sweep reads only the stale entries, a few hundred at a time: its cost follows
the chats signalled lately, never the number of keys.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.queue.chat_queue import ChatQueue
from bot.queue.work_stream import IndexEntry, WorkStream

logger = logging.getLogger(__name__)

_BATCH = 200
# A period looks at this many batches at most: a flood of stale entries is swept
# over a few periods instead of in one long burst of commands.
_BATCHES_PER_PERIOD = 10
_CONCURRENT_LOOKS = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepResult:
    """What one sweep did."""

    looked_at: int
    signalled_again: int
    forgotten: int


class QueueSweep:
    """Signals again the chats whose work no signal will bring to a worker."""

    def __init__(
        self,
        *,
        stream: WorkStream,
        queue: ChatQueue,
        lease_seconds: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._stream = stream
        self._queue = queue
        self._period = max(lease_seconds, 0.5)
        # A signal is at most a lease old when a worker has it (it is claimed again
        # after a lease idle): older than two, it deserves a look.
        self._stale_ms = int(2 * lease_seconds * 1000)
        self._sleep = sleep

    async def run(self) -> None:
        """Sweep once a period, forever (Redis errors end it: the supervisor retries)."""
        while True:
            await self._sleep(self._period)
            if await self._stream.take_sweep_turn(int(self._period * 1000 * 0.9)):
                await self.sweep()

    async def sweep(self) -> SweepResult:
        """Look at every stale entry (up to a bound per period); what was done."""
        looked = signalled = forgotten = 0
        # Entries that stay (held, or live) are skipped by the next batch's offset.
        staying = 0
        for _ in range(_BATCHES_PER_PERIOD):
            entries = await self._stream.stale(self._stale_ms, staying, _BATCH)
            outcomes: list[str] = []
            for start in range(0, len(entries), _CONCURRENT_LOOKS):
                chunk = entries[start : start + _CONCURRENT_LOOKS]
                outcomes.extend(await asyncio.gather(*(self._look(entry) for entry in chunk)))
            looked += len(entries)
            signalled += outcomes.count("signalled")
            forgotten += outcomes.count("forgotten")
            staying += outcomes.count("held") + outcomes.count("live")
            if len(entries) < _BATCH:
                break
        if signalled:
            logger.warning(
                "Signalled %d chat(s) again: they had queued work, no worker and no live signal",
                signalled,
            )
        return SweepResult(looked_at=looked, signalled_again=signalled, forgotten=forgotten)

    async def _look(self, entry: IndexEntry) -> str:
        try:
            queued, held = await self._queue.waiting(entry.conversation_key)
        except ValueError:
            # Not a conversation key (nothing writes one; a hand-made entry): drop it.
            queued, held = 0, False
        if not queued:
            await self._stream.forget(entry)
            return "forgotten"
        if held:
            return "held"
        if await self._stream.signal_again(entry):
            return "signalled"
        return "live"
