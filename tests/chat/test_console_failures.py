"""A bug in a turn: the console answers as Telegram does (kind text, incident code), goes on."""

import io
import logging
from collections.abc import Sequence

import pytest
import redis.asyncio as aioredis

from bot import customer_texts
from bot.app import build_application
from bot.console import Console, ConsoleScreen
from bot.llm.types import LLMResult, Message, TextListener, ToolChoice, ToolDefinition
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings

PREFIX = "console-bug"


class BuggyModel:
    """A model client with a bug: it raises what no layer expects."""

    model_name = "buggy"

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        raise KeyError("a bug")

    async def close(self) -> None:
        return None


async def test_a_bug_in_a_turn_is_answered_with_the_incident_code_and_the_chat_goes_on(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
):
    settings = make_settings(
        REDIS_URL=redis_server.url, REDIS_KEY_PREFIX=PREFIX, AUDIT_STREAM=f"{PREFIX}:audit"
    )
    app = await build_application(settings, llm=BuggyModel())
    stdin = io.StringIO("Где заказ 8041?\n/operator\n/exit\n")
    stdout = io.StringIO()
    console = Console(app, "dev", stdin, ConsoleScreen(stdin, stdout, io.StringIO()))
    try:
        with caplog.at_level(logging.ERROR, logger="bot.console"):
            code = await console.run()
    finally:
        await app.aclose()

    assert code == 0
    client = aioredis.Redis.from_url(redis_server.url)
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await client.xrange(f"{PREFIX}:audit")  # type: ignore[assignment]
    await client.aclose()
    turns = [fields for _, fields in entries if fields[b"type"] == b"turn"]
    assert [fields[b"outcome"] for fields in turns] == [b"error"]
    turn_id = turns[0][b"turn_id"].decode()
    assert f"Бот: {customer_texts.unexpected_failure_message(turn_id)}" in stdout.getvalue()
    assert f"Бот: {customer_texts.OPERATOR_OFF}" in stdout.getvalue()  # the chat went on
    (record,) = caplog.records
    assert record.exc_info is not None
    assert record.exc_info[0] is KeyError
    assert turn_id in record.getMessage()
