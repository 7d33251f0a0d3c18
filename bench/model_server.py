"""The scripted OpenAI-compatible server as a process of its own (for load scenarios).

``python -m bench.model_server --latency 1.0`` prints its base URL on one line and
serves :func:`bench.model_script.bench_responder` until SIGTERM. Running it apart
keeps its CPU time off the bot's core and its memory out of the bot's RSS.
"""

import argparse
import asyncio
import signal
import sys
from typing import Any

from bench.model_script import bench_responder
from tests.fakes.openai_server import Reply, ScriptedOpenAIServer


async def serve(latency_seconds: float) -> None:
    """Serve until SIGTERM or SIGINT."""
    async with ScriptedOpenAIServer() as server:
        server.latency_seconds = latency_seconds

        def respond(body: Any) -> Reply:
            # The server records every request; a long load run must not grow it.
            server.requests.clear()
            return bench_responder(body)

        server.responder = respond
        print(server.base_url, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the model server process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.latency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
