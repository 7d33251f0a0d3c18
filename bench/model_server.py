"""The scripted OpenAI-compatible server as a process of its own (for load scenarios).

``python -m bench.model_server --latency 1.0`` prints its base URL and then its
control URL, one a line, and serves :func:`bench.model_script.bench_responder`
until SIGTERM. Running it apart keeps its CPU time off the bot's core and its
memory out of the bot's RSS. ``GET <control>/timings`` returns (and forgets)
when each request was handled: ``[[start, end], ...]`` in ``time.monotonic()``
seconds, the system-wide clock every process of the bench shares. That span
(reading the body, scripting, the latency, encoding the answer) is the model's
time of a turn; the rest is the bot's.
"""

import argparse
import asyncio
import sys
from time import monotonic

from aiohttp import web

from bench.control import announce_and_serve
from bench.model_script import bench_responder
from bot.testing.openai_server import ScriptedOpenAIServer


class TimingModelServer(ScriptedOpenAIServer):
    """The bench's scripted model, remembering when it handled each request."""

    def __init__(self, latency_seconds: float) -> None:
        super().__init__()
        self.latency_seconds = latency_seconds
        self.responder = bench_responder
        self.intervals: list[tuple[float, float]] = []

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = monotonic()
        try:
            return await super()._handle(request)
        finally:
            self.intervals.append((started, monotonic()))
            # The base class records every request; a long load run must not grow it.
            self.requests.clear()

    async def timings(self, request: web.Request) -> web.Response:
        """``GET /timings``: the handled requests' spans since the last call."""
        intervals, self.intervals = self.intervals, []
        return web.json_response({"intervals": intervals})


async def serve(latency_seconds: float) -> None:
    """Serve until SIGTERM or SIGINT."""
    server = TimingModelServer(latency_seconds)
    async with server:
        await announce_and_serve(server.base_url, [("GET", "/timings", server.timings)])


def main(argv: list[str] | None = None) -> int:
    """Entry point of the model server process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.latency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
