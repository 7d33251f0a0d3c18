"""Running the bot's event loop: uvloop's when it is installed, asyncio's otherwise."""

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

T = TypeVar("T")

LoopKind = Literal["uvloop", "asyncio"]


def default_loop_kind() -> LoopKind:
    """``uvloop`` when it can be imported (Linux, macOS), else ``asyncio``."""
    return "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"


def loop_factory(kind: LoopKind) -> Callable[[], asyncio.AbstractEventLoop]:
    """A new-event-loop function of the ``kind`` asked for."""
    if kind == "uvloop":
        import uvloop  # noqa: PLC0415 - optional dependency, imported only when used

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], kind: LoopKind | None = None) -> T:
    """``asyncio.run(main)`` on a loop of ``kind`` (default: :func:`default_loop_kind`).

    uvloop's loop does the same work as asyncio's with less CPU per socket event
    (bench/README.md has the figures); the bot behaves the same on either.
    """
    with asyncio.Runner(loop_factory=loop_factory(kind or default_loop_kind())) as runner:
        return runner.run(main)
