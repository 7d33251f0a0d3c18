"""The help center in the application as production builds it: the real SDK over HTTP, Redis.

The scripted model asks for ``search_help_center``; the test reads what the
tool sent back to the model, what the audit stream kept (the count and the top
article, never the query) and the metrics, and sees an article added to
KNOWLEDGE_DIR reach the next turn without a restart.
"""

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from prometheus_client import generate_latest

from bot.app import build_application
from bot.knowledge.feature import KnowledgeFeature
from bot.ops.startup import StartupError
from bot.testing.audit_entries import stream_entries
from bot.testing.openai_server import ScriptedOpenAIServer, text_answer, tool_call_answer
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings
from tests.knowledge.conftest import write_article
from turn import TurnContext, new_turn_id

PREFIX = "kb"


def _tool_results(server: ScriptedOpenAIServer) -> list[dict[str, Any]]:
    last = server.requests[-1]
    return [json.loads(m["content"]) for m in last.messages if m["role"] == "tool"]


async def test_search_help_center_end_to_end_over_http(
    redis_server: RedisServer,
    redis_client: aioredis.Redis,
    openai_server: ScriptedOpenAIServer,
    articles_dir: Path,
) -> None:
    settings = make_settings(
        LLM_BACKEND="openai",
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=openai_server.base_url,
        LLM_MODEL="scripted-model",
        LLM_MAX_RETRIES=0,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX=PREFIX,
        AUDIT_STREAM=f"{PREFIX}:audit",
        KNOWLEDGE_DIR=str(articles_dir),
        KNOWLEDGE_RELOAD_SECONDS=0.05,
    )
    app = await build_application(settings)
    try:
        assert "search_help_center" in app.registry.names()
        assert app.chat.prompt.version == "1.7.0"

        # A policy question: the model searches, the article comes back, the answer cites it.
        openai_server.script(
            tool_call_answer("search_help_center", {"query": "как вернуть деньги за заказ"}),
            text_answer("По статье «Когда вернутся деньги»: в течение 10 дней."),
        )
        found_turn = new_turn_id()
        context = TurnContext(conversation_key="c1", chat_id="c1", user_id=7, turn_id=found_turn)
        reply = await app.local_turns().answer(context, "Когда мне вернут деньги?")
        assert reply.tool_names == ("search_help_center",)
        [result] = _tool_results(openai_server)
        assert result["ok"] is True
        top = result["data"]["results"][0]
        assert (top["article_id"], top["url"]) == (
            "refunds",
            "https://help.shop.example/returns/refunds",
        )
        # The model was told about the tool in the request that asked for it.
        offered = [tool["function"]["name"] for tool in openai_server.requests[0].body["tools"]]
        assert "search_help_center" in offered

        # Nothing relevant: an ordinary empty answer, not an error.
        openai_server.script(
            tool_call_answer("search_help_center", {"query": "аренда"}),
            text_answer("В справочном центре об этом нет статьи."),
        )
        empty_turn = new_turn_id()
        await app.local_turns().answer(
            TurnContext(conversation_key="c2", chat_id="c2", user_id=8, turn_id=empty_turn),
            "Можно взять кофемашину в аренду?",
        )
        assert _tool_results(openai_server) == [{"ok": True, "data": {"results": []}}]

        # An article added while the application runs answers the next turn.
        write_article(
            articles_dir,
            "coffee-rent.md",
            "---\nid: coffee-rent\nurl: https://help.shop.example/rent\n---\n"
            "# Аренда кофемашин\n\nКофемашину BrewMaster можно взять в аренду для офиса.\n",
        )
        deadline = time.monotonic() + 10
        knowledge = app.features.get(KnowledgeFeature)
        while knowledge is not None and not knowledge.watcher.center.snapshot.index.search(
            "аренда"
        ):
            assert time.monotonic() < deadline, "the new article was not indexed in time"
            await asyncio.sleep(0.02)
        openai_server.script(
            tool_call_answer("search_help_center", {"query": "аренда кофемашины для офиса"}),
            text_answer("Да, по статье «Аренда кофемашин»."),
        )
        await app.local_turns().answer(
            TurnContext(conversation_key="c3", chat_id="c3", user_id=9, turn_id=new_turn_id()),
            "Можно взять кофемашину в аренду?",
        )
        assert _tool_results(openai_server)[0]["data"]["results"][0]["article_id"] == "coffee-rent"

        await app.audit.flush()
        entries = await stream_entries(redis_client, settings.audit.stream)
        searches = {
            entry["turn_id"]: entry
            for entry in entries
            if entry["type"] == "tool" and entry["tool_name"] == "search_help_center"
        }
        assert (searches[found_turn]["result_count"], searches[found_turn]["top_result"]) == (
            str(len(result["data"]["results"])),
            "refunds",
        )
        assert (searches[empty_turn]["result_count"], searches[empty_turn]["top_result"]) == (
            "0",
            "",
        )
        # The query (customer's words, as the model wrote them) is in no audit field.
        assert not any(
            "аренд" in value or "вернуть" in value for e in entries for value in e.values()
        )

        exposition = generate_latest(app.metrics.registry).decode()
        assert 'support_knowledge_searches_total{result="found"} 2.0' in exposition
        assert 'support_knowledge_searches_total{result="empty"} 1.0' in exposition
        assert "support_knowledge_search_duration_seconds_count 3.0" in exposition
    finally:
        await app.aclose()


async def test_an_unreadable_knowledge_dir_stops_start_up_with_one_line(tmp_path: Path) -> None:
    settings = make_settings(
        REDIS_URL="redis://127.0.0.1:1/0", KNOWLEDGE_DIR=str(tmp_path / "missing")
    )
    with pytest.raises(StartupError) as error:
        await build_application(settings)
    assert str(error.value).startswith(f"KNOWLEDGE_DIR {tmp_path / 'missing'} cannot be read")
    assert "\n" not in str(error.value)
