"""The control endpoint of a benchmark child process (a second, tiny aiohttp server).

The load generator and the scripted model run as child processes; the bench
process asks them for what they measured over HTTP on a port of their own, so
that the served API (Bot API, OpenAI) stays exactly what the bot sees.
"""

import asyncio
import signal
from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ControlServer:
    """``routes`` (method, path, handler) on a free port of 127.0.0.1."""

    def __init__(self, routes: list[tuple[str, str, Handler]]) -> None:
        self._app = web.Application()
        for method, path, handler in routes:
            self._app.router.add_route(method, path, handler)
        self._runner = web.AppRunner(self._app, access_log=None, handle_signals=False)
        self.url = ""

    async def start(self) -> None:
        """Listen; :attr:`url` is set afterwards."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def close(self) -> None:
        """Stop listening."""
        await self._runner.cleanup()


async def wait_for_termination() -> None:
    """Return on SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def announce_and_serve(base_url: str, routes: list[tuple[str, str, Handler]]) -> None:
    """Start the control server, print both URLs (one a line), serve until SIGTERM or SIGINT.

    The served API at ``base_url`` is already listening; the parent reads the two lines.
    """
    control = ControlServer(routes)
    await control.start()
    try:
        print(base_url, flush=True)
        print(control.url, flush=True)
        await wait_for_termination()
    finally:
        await control.close()
