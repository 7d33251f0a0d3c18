"""The reliability suite's engine: the production chat service, the SDK over HTTP, Redis."""

from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis

from bot.llm.openai_client import OpenAIChatClient
from bot.sessions.models import ConversationSession
from bot.testing.chat_harness import ChatHarness
from bot.testing.openai_server import ScriptedOpenAIServer
from tools.registry import ToolRegistry

PREFIX = "rel"


def engine_over_http(
    redis: aioredis.Redis,
    base_url: str,
    *,
    registry: ToolRegistry | None = None,
    max_retries: int = 0,
    timeout_seconds: float = 5.0,
    max_steps: int = 3,
    budget: int = 2000,
) -> ChatHarness:
    """The production chat service, with the model behind a scripted HTTP server."""
    llm = OpenAIChatClient.create(
        api_key="sk-test",
        base_url=base_url,
        model="scripted-model",
        timeout_seconds=timeout_seconds,
        max_retries=max_retries,
    )
    return ChatHarness(
        redis,
        llm,
        prefix=PREFIX,
        registry=registry,
        LLM_TIMEOUT_SECONDS=timeout_seconds,
        LLM_MAX_RETRIES=max_retries,
        TOOL_MAX_STEPS=max_steps,
        HISTORY_TOKEN_BUDGET=budget,
        SESSION_LOCK_WAIT_SECONDS=10,
    )


async def stored_sessions(redis: aioredis.Redis) -> dict[str, ConversationSession]:
    """Every session hash under the suite's prefix, parsed (raises if one is unreadable)."""
    sessions: dict[str, ConversationSession] = {}
    async for key in redis.scan_iter(match=f"{PREFIX}:*:session"):
        raw = await redis.hget(key, "d")
        assert raw, f"session {key!r} has no data"
        session = ConversationSession.model_validate_json(raw)
        sessions[session.conversation_key] = session
    return sessions


@pytest.fixture
async def make_engine(
    redis_client: aioredis.Redis, openai_server: ScriptedOpenAIServer
) -> AsyncIterator[Callable[..., ChatHarness]]:
    """Builds engines on the shared (flushed) Redis and this test's model server."""
    made: list[ChatHarness] = []

    def factory(**kwargs: object) -> ChatHarness:
        engine = engine_over_http(redis_client, openai_server.base_url, **kwargs)  # type: ignore[arg-type]
        made.append(engine)
        return engine

    yield factory
    for engine in made:
        await engine.close()
