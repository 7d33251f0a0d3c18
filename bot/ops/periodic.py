"""A sweep run every period until stopped: the CSAT and handoff-idle sweepers' loop.

A sweep that fails because Redis or the network failed is logged by its kind
and tried again next period; any other exception ends :meth:`Periodic.run`
(the task supervisor restarts it).
"""

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod

from redis.exceptions import RedisError

logger = logging.getLogger(__name__)


class Periodic(ABC):
    """Calls :meth:`sweep` every ``period_seconds`` until :meth:`stop`."""

    def __init__(self, what: str, period_seconds: float) -> None:
        self._what = what
        self._period = period_seconds
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        """Stop after the current sweep."""
        self._stopping.set()

    async def run(self) -> None:
        """Sweep every period until :meth:`stop`."""
        while not self._stopping.is_set():
            try:
                await self.sweep()
            except (RedisError, OSError) as error:
                logger.warning("%s failed (%s)", self._what, type(error).__name__)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._period):
                    await self._stopping.wait()

    @abstractmethod
    async def sweep(self) -> int:
        """One sweep; returns how many items it found."""
