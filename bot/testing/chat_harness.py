"""A chat service wired as production wires it, over a real Redis, with a given model.

Tests of the engine (and the audit's privacy test) drive :meth:`ChatHarness.ask`
and read back what the turn stored: the history and the audit stream.
"""

from typing import Any

from bot.app import build_chat_service
from bot.audit.redis_sink import RedisStreamAuditSink
from bot.engine.chat_service import ChatReply
from bot.engine.local_turns import LocalTurns
from bot.llm.types import ToolCallingClient
from bot.sessions.redis_store import RedisSessionStore
from bot.settings import DEMO_SHOP_DATA
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys
from bot.testing.audit_entries import stream_entries
from bot.testing.settings import make_settings
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.registry import ToolRegistry
from tools.shop_data import ShopData
from turn import TurnContext, new_turn_id


class ChatHarness:
    """One :func:`~bot.app.build_chat_service` service; keys and the audit under ``prefix``.

    ``env`` are further settings by their documented variable names
    (``HISTORY_TOKEN_BUDGET``, ``TOOL_MAX_STEPS``, ``MESSAGE_MAX_CHARS``, ...).
    """

    def __init__(
        self,
        redis: AsyncRedisClient,
        llm: ToolCallingClient,
        *,
        prefix: str,
        registry: ToolRegistry | None = None,
        **env: Any,
    ) -> None:
        self.redis = redis
        self.llm = llm
        self.settings = make_settings(
            REDIS_KEY_PREFIX=prefix, AUDIT_STREAM=f"{prefix}:audit", **env
        )
        self.stream = self.settings.audit.stream
        self.registry = registry or build_default_tool_registry(ShopData.load(DEMO_SHOP_DATA))
        self.executor = ToolExecutor(self.registry)
        self.store = RedisSessionStore(
            redis,
            keys=RedisKeys(prefix),
            ttl_seconds=self.settings.session.ttl_seconds,
            archive_ttl_seconds=self.settings.session.archive_ttl_seconds,
        )
        self.audit = RedisStreamAuditSink(
            redis, stream=self.stream, maxlen=self.settings.audit.stream_maxlen
        )
        self.chat = build_chat_service(
            self.settings,
            llm=llm,
            registry=self.registry,
            executor=self.executor,
            store=self.store,
        )
        # The console's front end: each turn a job of its own, audited on delivery.
        self.turns = LocalTurns(self.chat, self.audit)

    async def ask(
        self, key: str, text: str, user_id: int | None = None, turn_id: str | None = None
    ) -> ChatReply:
        """One customer turn in conversation ``key``."""
        context = TurnContext(
            conversation_key=key, chat_id=key, user_id=user_id, turn_id=turn_id or new_turn_id()
        )
        return await self.turns.answer(context, text)

    async def reset(self, key: str) -> None:
        """``/new`` in conversation ``key``."""
        await self.turns.reset(key)

    async def history(self, key: str) -> list[tuple[str, str]]:
        """The stored (role, content) pairs of a conversation."""
        session = await self.store.load(key)
        return [] if session is None else [(m.role, m.content) for m in session.messages]

    async def audit_entries(self) -> list[dict[str, str]]:
        """Every audit entry written so far, oldest first."""
        return await stream_entries(self.redis, self.stream)

    async def turn_entry(self, turn_id: str) -> dict[str, str]:
        """The one ``type=turn`` audit entry of ``turn_id``."""
        found = [
            entry
            for entry in await self.audit_entries()
            if entry["type"] == "turn" and entry["turn_id"] == turn_id
        ]
        if len(found) != 1:
            raise AssertionError(f"expected one turn entry of {turn_id}, found {found}")
        return found[0]

    async def close(self) -> None:
        """Drain summaries, stop tool threads, close the model client."""
        await self.chat.drain(grace_seconds=5)
        self.executor.close()
        await self.llm.close()
