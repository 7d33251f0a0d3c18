"""One FIFO asyncio lock per key, forgotten when nobody holds or waits for it."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class KeyedLocks:
    """Serialises work per key inside one process, in call order.

    ``asyncio.Lock`` queues waiters first-come first-served, and an uncontended
    ``acquire`` does not yield, so callers that enter ``hold`` before their first
    ``await`` keep their arrival order. Entries are dropped when the last user
    leaves, so memory follows the number of *active* keys, not of all keys seen.
    """

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold the lock of ``key`` for the duration of the block."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
