"""Waiting out a short Redis outage for a step a live worker must not drop.

A worker that sent a reply, or holds a chat it must hand back, knows something
Redis does not yet: given up after a blip, that knowledge is lost (the reply is
sent again by the next drain; the chat waits for its lease to expire). Such a
step is tried again with back-off while Redis is unavailable (a restart, a
fail-over), up to a bound. Only for scripts and commands safe to run twice: an
attempt that timed out may have run.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.exceptions import RedisError

from bot.ops.retry import Backoff, RetryCounter, retrying
from bot.ops.supervision import FailureKind, classify, describe

logger = logging.getLogger(__name__)

T = TypeVar("T")

BOOKKEEPING_RETRY_SECONDS = 60.0
"""How long a live worker keeps trying: a restart or a fail-over takes seconds; past a
minute Redis is not coming back soon, and whoever runs it has been told."""
_BACKOFF = Backoff(first_seconds=0.05, longest_seconds=0.5)


async def until_redis_answers(
    what: str,
    call: Callable[[], Awaitable[T]],
    *,
    within: float,
    operation: str,
    counter: RetryCounter | None = None,
) -> T:
    """``call()``, again with back-off while Redis is unavailable, for up to ``within`` seconds.

    Logs one warning when it starts waiting and one line when Redis answered;
    raises the last error once the bound is reached, and at once any error
    that is not an outage (a bug, a refused command). Each retry is counted
    under ``operation``.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    waited = False

    def decide(error: Exception, attempt: int) -> float:
        nonlocal waited
        if not isinstance(error, (RedisError, OSError)):
            raise error
        pause = _BACKOFF.pause(attempt)
        if classify(error) is not FailureKind.TRANSIENT or loop.time() + pause > deadline:
            raise error
        if not waited:
            logger.warning("%s waits for Redis (%s); retrying", what, describe(error))
            waited = True
        return pause

    result = await retrying(operation, call, decide=decide, counter=counter)
    if waited:
        logger.info("%s done: Redis answers again", what)
    return result
