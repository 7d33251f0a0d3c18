"""Redis Cluster: a master killed during a burst of turns; its replica takes over.

A 6-node cluster of this test alone (a master is killed), with a short node
timeout so the fail-over takes seconds. The client is built by the bot's
factory and is fresh: the burst is its first use (redis-py 8.1 lost commands
of a first concurrent burst on a client that had not read the topology).
Every turn is answered or fails as ``storage_unavailable``, never otherwise,
and every chat is answered again within two leases of the fail-over.
"""

import asyncio
import time
from collections.abc import Iterator

import pytest

from bot.audit.redis_sink import RedisStreamAuditSink
from bot.chat_errors import ChatServiceError
from bot.engine.chat_service import ChatLimits, ChatService
from bot.engine.history import HistoryWindow
from bot.engine.local_turns import LocalTurns
from bot.engine.summary import ConversationSummaryService
from bot.engine.tool_loop import BoundedToolLoop
from bot.sessions.redis_store import RedisSessionStore
from bot.settings import DEMO_SHOP_DATA, RedisSettings
from bot.storage.connection import async_client
from bot.storage.keys import RedisKeys
from bot.testing.redis_cluster import RedisClusterProcesses
from bot.testing.scripted_client import ScriptedClient, echo_responder
from prompts.registry import (
    SUMMARY_PROMPT_ID,
    SUPPORT_CHAT_PROMPT_ID,
    build_default_prompt_registry,
)
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.shop_data import ShopData
from turn import TurnContext, new_turn_id

LEASE_SECONDS = 3
CHATS = [f"c{n}" for n in range(20)]
ROUNDS = 30


@pytest.fixture
def own_cluster() -> Iterator[RedisClusterProcesses]:
    """A cluster of this test alone: a master is killed; voted out after 1.5 s."""
    cluster = RedisClusterProcesses(node_timeout_ms=1500)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


async def _wait(predicate: object, within: float, what: str) -> float:
    """Poll ``predicate()`` (sync) until true; the monotonic time it became true."""
    assert callable(predicate)
    deadline = time.monotonic() + within
    while True:
        if predicate():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.05)


@pytest.mark.leaves_connections_to_gc
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_master_killed_during_a_burst_loses_no_answer_silently(
    own_cluster: RedisClusterProcesses,
) -> None:
    settings = RedisSettings(
        REDIS_MODE="cluster", REDIS_URL=own_cluster.url, REDIS_SOCKET_TIMEOUT_SECONDS="1"
    )
    client = async_client(settings)
    llm = ScriptedClient(echo_responder)
    registry = build_default_tool_registry(ShopData.load(DEMO_SHOP_DATA))
    executor = ToolExecutor(registry)
    audit = RedisStreamAuditSink(client, stream="cfo:audit", maxlen=10_000, timeout_seconds=1)
    prompts = build_default_prompt_registry()
    chat = ChatService(
        store=RedisSessionStore(
            client, keys=RedisKeys("cfo"), ttl_seconds=3600, archive_ttl_seconds=60
        ),
        loop=BoundedToolLoop(llm, registry, executor, max_steps=3),
        window=HistoryWindow(2000),
        summaries=ConversationSummaryService(llm, prompts.get(SUMMARY_PROMPT_ID, "1.0.0")),
        prompt=prompts.get(SUPPORT_CHAT_PROMPT_ID, "1.2.0"),
        limits=ChatLimits(lease_seconds=LEASE_SECONDS, wait_seconds=15, max_message_chars=500),
        model_name="scripted",
    )
    turns = LocalTurns(chat, audit)
    outcomes: list[str] = []

    async def turn(conversation: str, text: str) -> str:
        try:
            reply = await turns.answer(
                TurnContext(
                    conversation_key=conversation,
                    chat_id=conversation,
                    user_id=None,
                    turn_id=new_turn_id(),
                ),
                text,
            )
        except ChatServiceError as error:
            return error.kind
        assert reply.text == f"Ответ: {text}"
        return "answered"

    async def burst() -> None:
        for round_number in range(ROUNDS):
            outcomes.extend(
                await asyncio.gather(*(turn(c, f"сообщение {round_number}") for c in CHATS))
            )

    try:
        running = asyncio.create_task(burst())
        await _wait(lambda: outcomes.count("answered") >= 3 * len(CHATS), 30, "the burst going")
        # The first round is the fresh client's first concurrent burst: nothing lost there.
        assert outcomes[: len(CHATS)] == ["answered"] * len(CHATS)
        killed = own_cluster.masters()[0]
        killed.stop()  # SIGKILL
        failed_over_at = await _wait(lambda: own_cluster.failed_over(killed), 30, "a fail-over")
        await running
        assert len(outcomes) == len(CHATS) * ROUNDS
        assert set(outcomes) <= {"answered", "storage_unavailable"}, set(outcomes)

        # Each chat is answered again within two leases of the fail-over.
        deadline = failed_over_at + 2 * LEASE_SECONDS
        pending = set(CHATS)
        while pending and time.monotonic() < deadline:
            results = await asyncio.gather(*(turn(c, "после") for c in sorted(pending)))
            pending = {c for c, r in zip(sorted(pending), results, strict=True) if r != "answered"}
            if pending:
                await asyncio.sleep(0.2)
        assert pending == set()
    finally:
        await chat.drain(grace_seconds=2)
        executor.close()
        await client.aclose()
