"""SIGHUP during start-up does not kill the bot: a real ``python -m bot polling`` process.

SIGHUP asks a running bot to reload its help center; its default action ends
a process. The child is held in start-up deterministically: its Redis is a
socket that accepts and never answers, so start-up waits there until its Redis
timeout. SIGHUP arrives while it waits, then the socket closes; the process must
go on to its own end (one line about Redis, exit 1), not die of the signal.
"""

import asyncio
import signal
import sys

from bot.testing.settings import child_environment
from bot.testing.telegram_server import TEST_TOKEN


async def test_sighup_while_starting_is_ignored_and_start_up_ends_on_its_own() -> None:
    connected = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        connected.set()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    env = child_environment(
        TELEGRAM_BOT_TOKEN=TEST_TOKEN,
        TELEGRAM_API_BASE_URL="http://127.0.0.1:9",
        LLM_BACKEND="offline",
        REDIS_URL=f"redis://127.0.0.1:{port}/0",
        REDIS_SOCKET_TIMEOUT_SECONDS=2,
        REDIS_RETRIES=0,
        HEALTH_PORT=0,
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "polling",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(30):
            # In start-up for sure: it is waiting for its Redis to answer.
            await connected.wait()
            process.send_signal(signal.SIGHUP)
            # Delivered at once (ignored, or the end of the process); then Redis is gone
            # for good, so start-up fails fast instead of waiting out its timeouts.
            for writer in held:
                writer.close()
            server.close()
            _, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()

    assert process.returncode == 1, (process.returncode, stderr.decode(errors="replace"))
    lines = stderr.decode().strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, lines
    assert "Redis" in errors[0] or "redis" in errors[0], errors
    assert "Traceback" not in stderr.decode()
