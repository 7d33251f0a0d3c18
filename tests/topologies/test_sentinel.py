"""Sentinel: start-up refuses the wrong node; a fail-over during a burst of turns is survived."""

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

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
from bot.storage.health import RedisHealthProbe
from bot.storage.keys import RedisKeys
from bot.testing.redis_sentinel import SERVICE, SentinelGroup
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

ROOT = Path(__file__).resolve().parents[2]


def _console(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", "console", "--session", "dev"],
        input="",
        capture_output=True,
        text=True,
        env={**os.environ, "LLM_BACKEND": "offline", **env},
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_start_up_pointed_at_a_sentinel_or_a_replica_exits_1_with_one_line(
    sentinel_group: SentinelGroup,
):
    sentinel_url = f"redis://127.0.0.1:{sentinel_group.sentinels[0].port}/0"
    line = _one_error_line(_console({"REDIS_URL": sentinel_url}))
    assert "Sentinel" in line

    line = _one_error_line(_console({"REDIS_URL": sentinel_group.replica.url}))
    assert "read-only replica" in line

    ok = _console(
        {
            "REDIS_MODE": "sentinel",
            "REDIS_SENTINELS": sentinel_group.addresses,
            "REDIS_SENTINEL_SERVICE": SERVICE,
        }
    )
    assert ok.returncode == 0, ok.stderr


# redis-py leaves some connections of a fail-over during a burst (the Sentinel
# queries among them) to the garbage collector: they are collected at this test's
# teardown, under its filters, not in whichever later test the collector next runs.
@pytest.mark.leaves_connections_to_gc
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_fail_over_during_a_burst_loses_no_answer_silently(
    sentinel_group: SentinelGroup,
):
    settings = RedisSettings(
        REDIS_MODE="sentinel",
        REDIS_SENTINELS=sentinel_group.addresses,
        REDIS_SENTINEL_SERVICE=SERVICE,
        REDIS_SOCKET_TIMEOUT_SECONDS="1",
    )
    client = async_client(settings)
    probe_client = async_client(settings, max_connections=2)
    probe = RedisHealthProbe(probe_client, key_prefix="fo", timeout_seconds=1)
    llm = ScriptedClient(echo_responder)
    registry = build_default_tool_registry(ShopData.load(DEMO_SHOP_DATA))
    executor = ToolExecutor(registry)
    # Short leases (as the durable-turns work makes them): a lease replicated from
    # the dead master must not hold a chat for the default minutes.
    audit = RedisStreamAuditSink(client, stream="fo:audit", maxlen=10_000, timeout_seconds=1)
    prompts = build_default_prompt_registry()
    chat = ChatService(
        store=RedisSessionStore(
            client, keys=RedisKeys("fo"), ttl_seconds=3600, archive_ttl_seconds=60
        ),
        loop=BoundedToolLoop(llm, registry, executor, max_steps=3),
        window=HistoryWindow(2000),
        summaries=ConversationSummaryService(llm, prompts.get(SUMMARY_PROMPT_ID, "1.0.0")),
        prompt=prompts.get(SUPPORT_CHAT_PROMPT_ID, "1.2.0"),
        limits=ChatLimits(lease_seconds=3, wait_seconds=15, max_message_chars=500),
        model_name="scripted",
    )
    turns = LocalTurns(chat, audit)
    chats = [str(n) for n in range(20)]
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
        for round_number in range(30):
            outcomes.extend(
                await asyncio.gather(*(turn(c, f"сообщение {round_number}") for c in chats))
            )
            await asyncio.sleep(0.05)

    try:
        assert (await probe.check()).writable
        running = asyncio.create_task(burst())
        await asyncio.sleep(0.5)
        sentinel_group.master.stop()  # SIGKILL
        killed_at = time.monotonic()
        saw_unhealthy = not (await probe.check()).writable
        await running
        assert set(outcomes) <= {"answered", "storage_unavailable"}, set(outcomes)
        assert "answered" in outcomes

        # The next message of every chat is answered after the fail-over (about 10 s on an
        # idle machine; the bound only stops a test that waits in vain).
        deadline = killed_at + 60
        pending = set(chats)
        while pending and time.monotonic() < deadline:
            results = await asyncio.gather(*(turn(c, "после") for c in sorted(pending)))
            pending = {c for c, r in zip(sorted(pending), results, strict=True) if r != "answered"}
            if pending:
                await asyncio.sleep(0.5)
        assert pending == set()
        assert saw_unhealthy
        assert (await probe.check()).writable
    finally:
        await chat.drain(grace_seconds=2)
        executor.close()
        await client.aclose()
        await probe_client.aclose()
