"""bot.ops.event_loop: the bot runs on uvloop when it is installed, on asyncio's loop when asked."""

import asyncio

import uvloop

from bot.ops import event_loop


async def loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def test_uvloop_is_the_default_when_installed() -> None:
    assert event_loop.default_loop_kind() == "uvloop"
    assert event_loop.run(loop_type()) is uvloop.Loop


def test_asyncio_loop_when_asked() -> None:
    kind = event_loop.run(loop_type(), "asyncio")

    assert kind is not uvloop.Loop
    assert kind.__module__.startswith("asyncio.")


def test_run_returns_the_result_and_closes_its_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def answer() -> int:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return 42

    assert event_loop.run(answer(), "uvloop") == 42
    assert loops[0].is_closed()
