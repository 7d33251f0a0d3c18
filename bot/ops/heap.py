"""What the garbage collector looks at once a bot process has started.

A started process holds about 350,000 objects that live as long as it does: the
modules of aiogram, pydantic, openai and redis-py, the application built from the
settings, the help center's index. CPython's oldest generation is collected when
it has grown by a quarter, and every such collection walks all of them again:
130-230 ms a time on this project's bench machine, two or three times in a burst
of 1,000 customers, with the event loop stopped meanwhile (bench/README.md, issue
36). Moved to the permanent generation once start-up is over, they are no longer
walked; what the turns allocate is collected as before.
"""

import gc
import logging

logger = logging.getLogger(__name__)


def settle_start_up_heap() -> int:
    """Collect once, then keep every object alive now out of later collections.

    Returns how many objects were set aside. Call it once, when start-up is over
    and before work is taken: objects that become garbage later but were alive
    here are freed by their reference counts as usual; only such an object caught
    in a reference cycle would stay (start-up's long-lived objects are not).
    """
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    logger.info("Start-up objects set aside from garbage collection: %d", frozen)
    return frozen
