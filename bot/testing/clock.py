"""An event loop whose clock a test moves: deadlines proven by order, not by a stopwatch.

A test that waits for a real deadline and measures how long it took fails on a
loaded machine (four test workers on two cores). On a :class:`SteppedClockLoop`
the test says how much time passes: ``spend(seconds)`` moves the loop's clock on
at once and returns after every timer due by then has run, so a deadline of
60 s passes in microseconds, and what it cut, and what it did not, is certain.
The real monotonic clock still runs underneath: nothing waits forever on a
timer nobody moves.
"""

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class SteppedClockLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` is the real clock plus what tests spent."""

    def __init__(self) -> None:
        super().__init__()
        self._spent = 0.0

    def time(self) -> float:
        """The loop's clock: monotonic time plus every ``spend`` so far."""
        return super().time() + self._spent

    async def spend(self, seconds: float) -> None:
        """Let ``seconds`` of loop time pass at once; return when its timers have run.

        Every timer due before the new time (an ``asyncio.timeout`` among them) fires
        before this returns; one that cancels the caller cancels it here.
        """
        if seconds < 0:
            raise ValueError("seconds must not be negative")
        woken = self.create_future()
        # Due exactly at the new time, so every earlier timer runs first (timers run in order).
        handle = self.call_at(self.time() + seconds, _resolve, woken)
        self._spent += seconds
        try:
            await woken
        finally:
            handle.cancel()


def _resolve(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


def run_with_stepped_clock(main: Callable[[SteppedClockLoop], Awaitable[T]]) -> T:
    """Run ``main(loop)`` to its end on a new :class:`SteppedClockLoop` (a sync test's body)."""
    with asyncio.Runner(loop_factory=SteppedClockLoop) as runner:
        loop = runner.get_loop()
        assert isinstance(loop, SteppedClockLoop)  # narrows the type for mypy

        async def body() -> T:
            return await main(loop)

        return runner.run(body())
