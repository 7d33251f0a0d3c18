"""OpenAIChatClient over a broken network: each fault maps to the error it maps to over httpx2.

Our transport (``bot/llm/http_client.py``) turns aiohttp's failures into the httpx2
errors the SDK retries and reports (the SDK's own aiohttp transport reported refused
and dropped connections as timeouts and let malformed HTTP escape unwrapped), so the
chat service and the audit see "unavailable" for a provider that cannot be reached and
"timeout" only for one that does not answer in time. The faults come from a raw
TCP server on a free port, over real sockets.
"""

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from bot.llm.errors import LLMTimeoutError, LLMUnavailableError
from bot.llm.openai_client import OpenAIChatClient
from bot.llm.types import Message

MESSAGES: list[Message] = [{"role": "user", "content": "Где заказ 8041?"}]

Fault = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read the request, close without answering (a crashed or restarted upstream)."""
    await reader.readuntil(b"\r\n\r\n")


async def half_the_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Start an answer and drop the connection in the middle of its headers."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: appl")
    await writer.drain()


async def not_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer with something that is not HTTP at all."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    await writer.drain()


async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read the request and keep the connection open, silent, until the client leaves."""
    await reader.readuntil(b"\r\n\r\n")
    await reader.read()


@pytest.fixture
async def make_client() -> AsyncIterator[Callable[[str], OpenAIChatClient]]:
    """Clients with one retry and a 0.5 s timeout, closed after the test."""
    clients: list[OpenAIChatClient] = []

    def make(base_url: str) -> OpenAIChatClient:
        client = OpenAIChatClient.create(
            api_key="test-key",
            base_url=base_url,
            model="test-model",
            timeout_seconds=0.5,
            max_retries=1,
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def serve(fault: Fault) -> tuple[asyncio.Server, str, list[int]]:
    """A TCP server answering every connection with ``fault``; (server, base URL, attempts)."""
    attempts: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        attempts.append(1)
        try:
            await fault(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1", attempts


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_refused_connection_is_unavailable_not_timeout(make_client) -> None:
    client = make_client(f"http://127.0.0.1:{free_port()}/v1")

    with pytest.raises(LLMUnavailableError):
        await client.generate_with_tools(MESSAGES, [])


@pytest.mark.parametrize("fault", [close_at_once, half_the_headers], ids=["closed", "cut"])
async def test_dropped_connection_is_unavailable_after_the_retry(make_client, fault) -> None:
    server, base_url, attempts = await serve(fault)
    try:
        with pytest.raises(LLMUnavailableError):
            await make_client(base_url).generate_with_tools(MESSAGES, [])
        assert len(attempts) == 2  # the SDK retried once, as it does over httpx2
    finally:
        server.close()
        await server.wait_closed()


async def test_an_answer_that_is_not_http_is_unavailable_after_the_retry(make_client) -> None:
    server, base_url, attempts = await serve(not_http)
    try:
        with pytest.raises(LLMUnavailableError):
            await make_client(base_url).generate_with_tools(MESSAGES, [])
        assert len(attempts) == 2
    finally:
        server.close()
        await server.wait_closed()


async def test_a_silent_server_is_a_timeout_after_the_retry(make_client) -> None:
    server, base_url, attempts = await serve(never_answer)
    try:
        with pytest.raises(LLMTimeoutError):
            await make_client(base_url).generate_with_tools(MESSAGES, [])
        assert len(attempts) == 2
    finally:
        server.close()
        await server.wait_closed()
