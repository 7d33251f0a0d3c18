"""What the garbage collector looks at once a bot process has started.

A started process holds about 350,000 objects that live as long as it does: the
modules of aiogram, pydantic, openai and redis-py, the application built from the
settings, the help center's index. CPython's oldest generation is collected when
it has grown by a quarter, and every such collection walks all of them again:
130-230 ms a time on this project's bench machine, two or three times in a burst
of 1,000 customers, with the event loop stopped meanwhile (bench/README.md, issue
36). Moved to the permanent generation once start-up is over, they are no longer
walked; what the turns allocate is collected as before.

The youngest generation is collected every ``YOUNG_THRESHOLD`` allocations instead
of CPython's 700: a burst's turns keep thousands of short-lived objects (requests,
replies, models) alive at once, and at 700 each collection finds most of them
still alive and moves them on to the older generations, which then cost more.
Measured on 1,000 customers, three alternating pairs: 7 % less CPU in the bot.
"""

import gc
import logging
from typing import Final

logger = logging.getLogger(__name__)

YOUNG_THRESHOLD: Final = 10_000
"""Allocations (less deallocations) of tracked objects between young collections."""


def settle_start_up_heap() -> int:
    """Collect once, keep every object alive now out of later collections, collect less often.

    Returns how many objects were set aside. Call it once, when start-up is over
    and before work is taken: objects that become garbage later but were alive
    here are freed by their reference counts as usual; only such an object caught
    in a reference cycle would stay (start-up's long-lived objects are not).
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    frozen = gc.get_freeze_count()
    logger.info("Start-up objects set aside from garbage collection: %d", frozen)
    return frozen
