"""The one retry loop: a call again after a failure, with back-off, each retry counted.

Only for a call that is safe to repeat: an attempt that failed may have run
(a timeout after Redis applied the command, a request Telegram took before
the connection dropped). So the caller decides, error by error, whether
another attempt can double nothing; everything else is raised at once. No
non-idempotent command is retried blindly.

The caller's ``decide`` sees each failure with its attempt number and either
returns the pause before the next attempt or raises (the error itself, or one
of its own with the error in the chain): how many attempts, until when, and
after which errors stay with the caller, in one place beside the call.
:class:`Backoff` gives the usual doubling pause. Each retry is counted by
operation (``support_retries_total{operation=...}``, see :mod:`bot.metrics`).
"""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")

Sleep = Callable[[float], Awaitable[None]]


class RetryCounter(Protocol):
    """Where retries are counted (the metrics)."""

    def retried(self, operation: str) -> None:
        """One more attempt of ``operation`` after a failure."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """A pause of ``first_seconds`` before the first retry, doubled each time up to ``longest``."""

    first_seconds: float
    longest_seconds: float = float("inf")

    def pause(self, retry: int) -> float:
        """The pause before retry number ``retry`` (1 for the first)."""
        return float(min(self.first_seconds * 2.0 ** (retry - 1), self.longest_seconds))


async def retrying(
    operation: str,
    call: Callable[[], Awaitable[T]],
    *,
    decide: Callable[[Exception, int], float],
    counter: RetryCounter | None = None,
    sleep: Sleep = asyncio.sleep,
) -> T:
    """``call()`` until it returns; after a failure, ``decide(error, attempt)`` says what next.

    ``attempt`` is 1 for the first call. ``decide`` returns the pause in
    seconds before the next attempt (0: at once, without sleeping), or raises
    to give up. Each retry is counted under ``operation``.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except Exception as error:
            pause = decide(error, attempt)
        if counter is not None:
            counter.retried(operation)
        if pause > 0:
            await sleep(pause)
