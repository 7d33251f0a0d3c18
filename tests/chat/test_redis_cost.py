"""What one console turn costs in Redis, counted by the server (scripts' own commands included).

The counts are deterministic (no timing): a change that makes a turn send more
commands fails here, not only in the benchmark (``bench/README.md``, "Redis
commands per turn"). The turn is the engine's path as the console runs it: the
lease taken with the session, two tools (one reads the demo shop in Redis), the
commit that releases the lease, the audit written once with its index.
"""

from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.app import Application, build_application
from bot.testing.openai_server import (
    ScriptedOpenAIServer,
    text_answer,
    tool_calls_answer,
)
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings
from turn import TurnContext, new_turn_id

PREFIX = "cost"
ENGINE_TURN_MOST_COMMANDS = 22
"""Measured (issue 36's goal for a two-tool engine turn is 30; 52 before it, 23 before the
audit index wrote a name's last sighting once a minute)."""
ENGINE_TURN_SCRIPTS = 3
"""Lease and load, commit and release, the audit (4 before: the release was its own)."""


async def _server_calls(client: aioredis.Redis) -> dict[str, int]:
    info: dict[str, Any] = await client.info("commandstats")
    calls = {
        name.removeprefix("cmdstat_"): int(stats["calls"])
        for name, stats in info.items()
        if name.startswith("cmdstat_")
    }
    for own in ("info", "config|resetstat"):
        calls.pop(own, None)
    return calls


async def _turn(app: Application, chat: str) -> None:
    context = TurnContext(conversation_key=chat, chat_id=chat, user_id=1, turn_id=new_turn_id())
    reply = await app.local_turns().answer(context, "Где заказ 8041 и когда вы работаете?")
    assert reply.text == "Заказ 8041 в пути. Мы работаем ежедневно."


@pytest.fixture
async def app(own_redis_server: RedisServer, openai_server: ScriptedOpenAIServer) -> Any:
    openai_server.responder = lambda body: (
        text_answer("Заказ 8041 в пути. Мы работаем ежедневно.")
        if any(m["role"] == "tool" for m in body["messages"][-2:])
        else tool_calls_answer(
            [("get_order_status", {"order_id": "8041"}), ("get_support_hours", {})]
        )
    )
    settings = make_settings(
        REDIS_URL=own_redis_server.url,
        REDIS_KEY_PREFIX=PREFIX,
        AUDIT_STREAM=f"{PREFIX}:audit",
        LLM_BACKEND="openai",
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=openai_server.base_url,
        LLM_MODEL="scripted-model",
        LLM_MAX_RETRIES=0,
    )
    application = await build_application(settings)
    yield application
    await application.aclose()


async def test_a_two_tool_console_turn_runs_at_most_22_commands_in_redis(
    app: Application, own_redis_server: RedisServer
) -> None:
    stats = aioredis.Redis.from_url(own_redis_server.url)
    try:
        # Two turns first: the scripts are cached, the audit index and the minute exist.
        await _turn(app, "c1")
        await _turn(app, "c1")
        await stats.config_resetstat()
        await _turn(app, "c1")
        calls = await _server_calls(stats)
    finally:
        await stats.aclose()

    total = sum(calls.values())
    assert total <= ENGINE_TURN_MOST_COMMANDS, calls
    # Three scripts (lease and load, commit and release, audit); the shop's HGET aside.
    assert calls.get("evalsha", 0) + calls.get("eval", 0) == ENGINE_TURN_SCRIPTS, calls
    # The per-field rollup updates are gathered: no HINCRBY per entry and field.
    assert calls.get("hincrby", 0) == 0, calls
