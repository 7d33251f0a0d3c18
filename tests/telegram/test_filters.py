"""Every filter and handler of the routers runs on the event loop, none through a thread.

aiogram calls a synchronous callable (a magic ``F`` filter included) through
``asyncio.to_thread`` on every update it checks; a thread hop per filter per update
cost about 0.1 ms of CPU each in the Bot API benchmark.
"""

import pytest
from aiogram import Router
from aiogram.dispatcher.event.handler import CallableObject

from bot.telegram.handlers import chat, commands, last_resort, membership, other
from bot.telegram.handlers import handoff as handoff_handlers

STAFF_CHAT_ID = -1001234567890


def _routers() -> list[Router]:
    return [
        last_resort.build_router(),
        membership.build_router(),
        handoff_handlers.build_staff_router(STAFF_CHAT_ID),
        handoff_handlers.build_customer_router(),
        commands.build_router(),
        chat.build_router(),
        other.build_router(),
    ]


def _callables(router: Router) -> list[tuple[str, CallableObject]]:
    found: list[tuple[str, CallableObject]] = []
    for name, observer in router.observers.items():
        # Router-level filters live on the observer's own handler object.
        router_filters = observer._handler.filters or ()
        found += [(f"{router.name} {name} router filter", f) for f in router_filters]
        for handler in observer.handlers:
            found.append((f"{router.name} {name} handler", handler))
            found += [(f"{router.name} {name} filter", f) for f in handler.filters or ()]
    return found


@pytest.mark.parametrize("router", _routers(), ids=lambda router: router.name)
def test_no_filter_or_handler_is_run_in_a_thread(router: Router) -> None:
    callables = _callables(router)

    assert callables  # each router has at least its handlers
    in_threads = [where for where, callable_ in callables if not callable_.awaitable]
    assert in_threads == []
