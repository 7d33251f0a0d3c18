"""Named points where the durability suite kills a real bot process (a fault injection).

``BOT_CRASH_POINT=<name>`` in a process's environment makes it SIGKILL itself
when it reaches that point: the only way to stop a process between two steps
that follow each other within microseconds (a handler's write and the commit
after it). Unset (always, outside the durability suite), a point does nothing.
"""

import os
import signal

CRASH_POINT_VARIABLE = "BOT_CRASH_POINT"

ACTION_HANDLED = "action_handled"
"""After a confirmed action's handler changed the shop, before the outcome is committed."""


def crash_point(name: str) -> None:
    """Kill this process at once (SIGKILL, no clean-up) if ``name`` is the configured point."""
    if os.environ.get(CRASH_POINT_VARIABLE) == name:
        os.kill(os.getpid(), signal.SIGKILL)
