"""The reliability suite's engine: ChatService + real OpenAI SDK over HTTP + real Redis."""

from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.chat_service import ChatLimits, ChatReply, ChatService
from bot.history import HistoryWindow
from bot.llm.openai_client import OpenAIChatClient
from bot.redis_keys import RedisKeys
from bot.sessions.models import ConversationSession
from bot.sessions.redis_store import RedisSessionStore
from bot.summary import ConversationSummaryService
from bot.tool_loop import BoundedToolLoop
from prompts.summary.v1_0_0 import SUMMARY_PROMPT_V1_0_0
from prompts.support_chat.v1_2_0 import SUPPORT_CHAT_PROMPT_V1_2_0
from tests.fakes.openai_server import ScriptedOpenAIServer
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.registry import ToolRegistry
from tools.store import ShopStore
from turn import TurnContext, new_turn_id

STREAM = "rel:audit"
PREFIX = "rel"


class Engine:
    """One ChatService wired like production, with the model behind a scripted HTTP server."""

    def __init__(
        self,
        redis: aioredis.Redis,
        base_url: str,
        *,
        registry: ToolRegistry | None = None,
        max_retries: int = 0,
        timeout_seconds: float = 5.0,
        max_steps: int = 3,
        budget: int = 2000,
    ) -> None:
        self.redis = redis
        self.llm = OpenAIChatClient.create(
            api_key="sk-test",
            base_url=base_url,
            model="scripted-model",
            timeout_seconds=timeout_seconds,
            max_retries=max_retries,
        )
        self.registry = registry or build_default_tool_registry(ShopStore.load())
        self.executor = ToolExecutor(self.registry)
        self.store = RedisSessionStore(
            redis, keys=RedisKeys(PREFIX), ttl_seconds=3600, archive_ttl_seconds=7200
        )
        self.chat = ChatService(
            store=self.store,
            loop=BoundedToolLoop(self.llm, self.registry, self.executor, max_steps=max_steps),
            window=HistoryWindow(budget),
            summaries=ConversationSummaryService(self.llm, SUMMARY_PROMPT_V1_0_0),
            audit=RedisStreamAuditSink(redis, stream=STREAM, maxlen=10_000),
            prompt=SUPPORT_CHAT_PROMPT_V1_2_0,
            limits=ChatLimits(lease_seconds=30, wait_seconds=10, max_message_chars=4000),
            model_name="scripted-model",
        )

    async def ask(
        self, key: str, text: str, user_id: int | None = None, turn_id: str | None = None
    ) -> ChatReply:
        """One customer turn in conversation ``key``."""
        context = TurnContext(
            conversation_key=key, chat_id=key, user_id=user_id, turn_id=turn_id or new_turn_id()
        )
        return await self.chat.reply(context, text)

    async def history(self, key: str) -> list[tuple[str, str]]:
        """The stored (role, content) pairs of a conversation."""
        session = await self.store.load(key)
        return [] if session is None else [(m.role, m.content) for m in session.messages]

    async def audit_entries(self) -> list[dict[str, str]]:
        """Every audit entry written so far, oldest first."""
        return await stream_entries(self.redis, STREAM)

    async def turn_entry(self, turn_id: str) -> dict[str, str]:
        """The one ``type=turn`` audit entry of ``turn_id``."""
        found = [
            entry
            for entry in await self.audit_entries()
            if entry["type"] == "turn" and entry["turn_id"] == turn_id
        ]
        assert len(found) == 1, found
        return found[0]

    async def close(self) -> None:
        """Drain summaries, stop tool threads, close the SDK client."""
        await self.chat.drain(grace_seconds=5)
        self.executor.close()
        await self.llm.close()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def stream_entries(redis: aioredis.Redis, stream: str) -> list[dict[str, str]]:
    """Every entry of ``stream``, oldest first, as text fields."""
    entries = await redis.xrange(stream) or []
    return [{_text(k): _text(v) for k, v in (fields or {}).items()} for _, fields in entries]


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
async def openai_server() -> AsyncIterator[ScriptedOpenAIServer]:
    """A scripted OpenAI-compatible server of this test."""
    async with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
async def make_engine(
    redis_client: aioredis.Redis, openai_server: ScriptedOpenAIServer
) -> AsyncIterator[Callable[..., Engine]]:
    """Builds engines on the shared (flushed) Redis and this test's model server."""
    made: list[Engine] = []

    def factory(**kwargs: object) -> Engine:
        engine = Engine(redis_client, openai_server.base_url, **kwargs)  # type: ignore[arg-type]
        made.append(engine)
        return engine

    yield factory
    for engine in made:
        await engine.close()
