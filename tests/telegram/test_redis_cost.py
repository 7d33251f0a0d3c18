"""What one Telegram turn costs in Redis, seen by the server (``MONITOR``, scripts' commands too).

The whole bot runs (polling, intake, the work stream, a worker, the audit, the
CSAT and analysis schedules); one customer asks a two-tool question in a chat
that is idle (the usual case: the lease was released after the last reply).
Counted: every command that names the chat, the turn's audit or the shop (with
the commands each of those scripts runs), and the acknowledgement of the
chat's signal. Not counted: the workers' blocking read of the work stream and
other periodic loops, which are shared by every chat and not per turn. The
count is deterministic; the goal and the per-feature table are in
``bench/README.md`` ("Redis commands per turn").
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.testing.openai_server import ScriptedOpenAIServer, text_answer, tool_calls_answer
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer
from bot.testing.settings import stack_settings
from bot.testing.telegram_server import FakeTelegramServer
from tests.queue.echo_pool import wait_until_redis

PREFIX = "cost"
CHAT = 731_904_552
TELEGRAM_TURN_MOST_COMMANDS = 54
"""Measured after issue 36's changes (92 before them, 58 before the second round), handoff
off (with a staff chat the commit also ends the failed-turn streak: one more); the goal of
40 is not met without moving keys between slots (bench/README.md)."""
MINUTE_OPENING = 6
"""A turn whose audit opens a minute of the index also notes it, trims the index and notes
the names as seen in the new minute."""
TELEGRAM_TURN_SCRIPTS = 6
"""Intake, signal, take, commit, audit, delivered."""
ANSWER = "Заказ 8041 в пути. Мы работаем ежедневно."


def _answer(body: dict[str, Any]) -> Any:
    if any(m["role"] == "tool" for m in body["messages"][-2:]):
        return text_answer(ANSWER)
    return tool_calls_answer(
        [("get_order_status", {"order_id": "8041"}), ("get_support_hours", {})]
    )


@pytest.fixture
async def running(
    telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer, own_redis_server: RedisServer
) -> AsyncIterator[PollingBot]:
    openai_server.responder = _answer
    process = PollingBot(
        stack_settings(telegram, openai_server, own_redis_server.url, prefix=PREFIX), telegram
    )
    await process.start()
    yield process
    assert await process.stop() == 0


class TurnCommands:
    """Commands of one chat's turn as ``MONITOR`` shows them, each script with its own."""

    def __init__(self) -> None:
        self.top_level: list[str] = []
        self.inside_scripts: list[str] = []
        self.acknowledged = asyncio.Event()
        self._counting = False
        self.opened_minute = False
        # The connection (client port) each schedule's ZADD came on.
        self.schedule_connections: list[object] = []

    def see(self, event: dict[str, Any]) -> None:
        command = str(event.get("command", ""))
        if event.get("client_type") == "lua":
            if self._counting:
                self.inside_scripts.append(command.split(" ", 1)[0].upper())
                self.opened_minute |= command.startswith("ZADD") and ":index:minutes" in command
            return
        name = command.split(" ", 1)[0].upper()
        ours = str(CHAT) in command or f"{PREFIX}:audit" in command or name == "XACK"
        self._counting = ours
        if ours:
            self.top_level.append(name)
            if name == "ZADD" and ":due " in command:
                self.schedule_connections.append(event.get("client_port"))
        if name == "XACK":
            self.acknowledged.set()

    @property
    def total(self) -> int:
        return len(self.top_level) + len(self.inside_scripts)


async def test_a_two_tool_telegram_turn_in_an_idle_chat_runs_at_most_54_commands(
    running: PollingBot, telegram: FakeTelegramServer, own_redis_server: RedisServer
) -> None:
    # Two turns first: the scripts are cached, the audit index, the minute and the chat exist.
    for sent in (1, 2):
        await telegram.push_message(CHAT, "Где заказ 8041 и когда вы работаете?")
        assert (await telegram.wait_for_texts(CHAT, sent))[-1] == ANSWER
    client = aioredis.Redis.from_url(own_redis_server.url)
    seen = TurnCommands()
    try:
        # The second turn's tail: its lease released, its signal acknowledged.
        await wait_until_redis(lambda: _idle(client), 10, "the second turn's tail")
        async with client.monitor() as monitor:

            async def listen() -> None:
                async for event in monitor.listen():
                    seen.see(event)

            listening = asyncio.create_task(listen())
            await telegram.push_message(CHAT, "А заказ 8041? И часы работы?")
            assert (await telegram.wait_for_texts(CHAT, 3))[-1] == ANSWER
            await asyncio.wait_for(seen.acknowledged.wait(), 10)
            listening.cancel()
            with suppress(asyncio.CancelledError):
                await listening
    finally:
        await client.aclose()

    assert seen.top_level.count("EVALSHA") == TELEGRAM_TURN_SCRIPTS, seen.top_level
    most = TELEGRAM_TURN_MOST_COMMANDS + (MINUTE_OPENING if seen.opened_minute else 0)
    assert seen.total <= most, (seen.top_level, seen.inside_scripts)
    # The audit's rollups are gathered per minute: no HINCRBY per entry and field.
    assert "HINCRBY" not in seen.inside_scripts
    # The CSAT and analysis schedules: one pipeline, so one connection and one round trip.
    assert len(seen.schedule_connections) == 2, seen.top_level
    assert len(set(seen.schedule_connections)) == 1, seen.schedule_connections


async def _idle(client: aioredis.Redis) -> bool:
    """The chat's lease is released and no signal waits for its acknowledgement."""
    if await client.exists(f"{PREFIX}:{{tg:{CHAT}}}:lease"):
        return False
    return not (await client.xpending(f"{PREFIX}:work", "workers"))["pending"]
