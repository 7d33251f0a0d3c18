"""The webhook server against slow sockets and bodies that are JSON but not an Update."""

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest

from bot.telegram.process import run_bot
from bot.telegram.webhook import SECRET_HEADER
from bot.testing.pool_stop import until_stopped
from bot.testing.redis_server import RedisServer, free_port
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer

SECRET = "s3cret-token"


@pytest.fixture
async def webhook_port(
    telegram: FakeTelegramServer, redis_server: RedisServer
) -> AsyncIterator[int]:
    """A webhook bot (offline model) with 1-second header and body timeouts; its port."""
    port = free_port()
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="hookin",
        WEBHOOK_URL="https://bot.example.com/",
        WEBHOOK_PATH="/tg",
        WEBHOOK_SECRET=SECRET,
        WEBHOOK_HOST="127.0.0.1",
        WEBHOOK_PORT=port,
        WEBHOOK_HEADER_TIMEOUT_SECONDS=1,
        WEBHOOK_BODY_TIMEOUT_SECONDS=1,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_bot(settings, "webhook", stop))
    try:
        await telegram.wait_for(lambda: bool(telegram.calls_of("setWebhook")) or task.done())
        assert not task.done()
        yield port
    finally:
        stop.set()
        async with asyncio.timeout(20):
            assert await until_stopped(task, settings.redis) == 0


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """Everything the server sends until it closes the connection (fails after ``seconds``)."""
    async with asyncio.timeout(seconds):
        return await reader.read()


async def test_a_socket_that_never_finishes_its_headers_is_closed(webhook_port: int) -> None:
    connections = [await asyncio.open_connection("127.0.0.1", webhook_port) for _ in range(20)]
    try:
        for _, writer in connections:
            writer.write(b"POST /tg HTTP/1.1\r\nHost: bot\r\n")  # and then nothing more
            await writer.drain()
        answers = await asyncio.gather(*(_closed_within(reader, 8) for reader, _ in connections))
    finally:
        for _, writer in connections:
            writer.close()
    assert all(b"200 OK" not in answer for answer in answers)


async def test_a_body_that_trickles_in_is_answered_408_and_closed(webhook_port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", webhook_port)
    try:
        writer.write(
            b"POST /tg HTTP/1.1\r\nHost: bot\r\nContent-Type: application/json\r\n"
            + f"{SECRET_HEADER}: {SECRET}\r\nContent-Length: 100\r\n\r\n".encode()
            + b'{"update_id": 1'
        )
        await writer.drain()
        answer = await _closed_within(reader, 8)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408")


async def test_json_that_is_not_an_update_is_logged_by_kind_and_id_only(
    webhook_port: int, telegram: FakeTelegramServer, caplog: pytest.LogCaptureFixture
) -> None:
    secret_words = "Мой паспорт 4510 123456"
    bodies = [
        {"update_id": 77, "message": {"text": secret_words, "chat": {"id": "x"}}},
        {"update_id": secret_words, "message": secret_words},
        {secret_words: 1},
    ]
    with caplog.at_level(logging.DEBUG):
        async with aiohttp.ClientSession() as http:
            for body in bodies:
                async with http.post(
                    f"http://127.0.0.1:{webhook_port}/tg",
                    json=body,
                    headers={SECRET_HEADER: SECRET},
                ) as response:
                    assert response.status == 200
    log = "\n".join(record.getMessage() for record in caplog.records) + caplog.text
    assert secret_words not in log
    assert "4510" not in log
    dropped = [r.getMessage() for r in caplog.records if "not an Update" in r.getMessage()]
    assert dropped == [
        "Webhook body is not an Update (kind message, update id 77); dropped",
        "Webhook body is not an Update (kind message, update id none); dropped",
        "Webhook body is not an Update (kind none, update id none); dropped",
    ]
    assert telegram.calls_of("sendMessage") == []


async def test_json_nested_too_deep_to_read_is_answered_400_with_one_line(
    webhook_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    depth = 100_000
    body = '{"update_id": 5, "message": ' + "[" * depth + "]" * depth + "}"
    with caplog.at_level(logging.DEBUG):
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"http://127.0.0.1:{webhook_port}/tg",
                data=body,
                headers={SECRET_HEADER: SECRET, "Content-Type": "application/json"},
            ) as response,
        ):
            assert response.status == 400
    lines = [r for r in caplog.records if "nested" in r.getMessage()]
    assert [r.getMessage() for r in lines] == ["Webhook body is nested too deep to read; refused"]
    assert all(record.exc_info is None for record in caplog.records)
