"""search_help_center as the executor runs it, the audit records it and the demo model uses it."""

import json
from pathlib import Path

from bot.app import build_offline_model
from bot.audit.schema import ToolAuditEntry
from bot.engine.tool_loop import BoundedToolLoop
from bot.llm.types import Message
from bot.settings import DEMO_SHOP_DATA
from bot.testing.audit_entries import tool_entry
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.help_center import SEARCH_HELP_CENTER_TOOL_NAME
from tools.knowledge.library import HelpCenter
from tools.shop_data import ShopData
from turn import ToolCall, ToolStatus, TurnContext

CONTEXT = TurnContext(conversation_key="c1", chat_id="c1", user_id=1, turn_id="t1")


def _call(query: str) -> ToolCall:
    return ToolCall(
        id="call_1",
        name=SEARCH_HELP_CENTER_TOOL_NAME,
        arguments=json.dumps({"query": query}, ensure_ascii=False),
    )


def _executor(directory: Path, top_k: int = 3) -> ToolExecutor:
    registry = build_default_tool_registry(
        ShopData.load(DEMO_SHOP_DATA), help_center=HelpCenter.load(directory, top_k=top_k)
    )
    return ToolExecutor(registry)


async def test_the_tool_returns_articles_with_title_url_and_a_short_snippet(
    articles_dir: Path,
) -> None:
    executor = _executor(articles_dir)
    try:
        done = await executor.execute(_call("как вернуть деньги за возврат"), CONTEXT)
    finally:
        executor.close()
    payload = json.loads(done.content)
    assert payload["ok"] is True
    results = payload["data"]["results"]
    assert 1 <= len(results) <= 3
    assert set(results[0]) == {"article_id", "title", "url", "snippet", "lang"}
    assert results[0]["lang"] == "ru"
    assert results[0]["article_id"] == "refunds"
    assert results[0]["url"] == "https://help.shop.example/returns/refunds"
    assert all(len(result["snippet"]) <= 600 for result in results)
    assert (done.audit.status, done.audit.result_count, done.audit.top_result_id) == (
        ToolStatus.SUCCESS,
        len(results),
        "refunds",
    )


async def test_nothing_found_is_an_ordinary_empty_answer(articles_dir: Path) -> None:
    executor = _executor(articles_dir)
    try:
        done = await executor.execute(_call("рецепт борща"), CONTEXT)
    finally:
        executor.close()
    assert json.loads(done.content) == {"ok": True, "data": {"results": []}}
    assert (done.audit.status, done.audit.result_count, done.audit.top_result_id) == (
        ToolStatus.SUCCESS,
        0,
        None,
    )


async def test_top_k_bounds_the_results(articles_dir: Path) -> None:
    executor = _executor(articles_dir, top_k=1)
    try:
        done = await executor.execute(_call("доставка курьером"), CONTEXT)
    finally:
        executor.close()
    assert len(json.loads(done.content)["data"]["results"]) == 1


async def test_the_audit_entry_keeps_the_count_and_top_article_never_the_query(
    articles_dir: Path,
) -> None:
    executor = _executor(articles_dir)
    try:
        done = await executor.execute(_call("промокод не работает секретное слово"), CONTEXT)
    finally:
        executor.close()
    fields = ToolAuditEntry.from_record(done.audit, chat_id="c1", turn_id="t1", step=1).to_fields()
    assert fields["result_count"] == str(done.audit.result_count)
    assert fields["top_result"] == "promo-not-working"
    assert not any("секрет" in value or "промокод" in value for value in fields.values())
    back = ToolAuditEntry.from_fields(fields)
    assert (back.result_count, back.top_result_id) == (done.audit.result_count, "promo-not-working")


def test_other_tools_write_no_search_fields() -> None:
    assert "result_count" not in tool_entry("t1").to_fields()


def _conversation(text: str) -> list[Message]:
    return [{"role": "developer", "content": "Инструкция."}, {"role": "user", "content": text}]


async def test_the_demo_model_answers_from_the_article_and_names_it(articles_dir: Path) -> None:
    shop_data = ShopData.load(DEMO_SHOP_DATA)
    registry = build_default_tool_registry(shop_data, help_center=HelpCenter.load(articles_dir))
    executor = ToolExecutor(registry)
    try:
        loop = BoundedToolLoop(build_offline_model(shop_data, registry), registry, executor, 3)
        result = await loop.run(_conversation("Как применить промокод к заказу?"), CONTEXT)
        nothing = await loop.run(_conversation("Посоветуйте рецепт борща на ужин"), CONTEXT)
        hours = await loop.run(_conversation("Когда вы работаете?"), CONTEXT)
        thanks = await loop.run(_conversation("Спасибо большое!"), CONTEXT)
    finally:
        executor.close()
    assert result.tool_names == (SEARCH_HELP_CENTER_TOOL_NAME,)
    assert "«Как применить промокод» (https://help.shop.example/promo/how-to-use)" in result.text
    assert "поле «Промокод»" in result.text
    assert nothing.tool_names == (SEARCH_HELP_CENTER_TOOL_NAME,)
    assert "нет статьи" in nothing.text
    # A question a rule covers keeps its live-data tool.
    assert hours.tool_names == ("get_support_hours",)
    # Small talk is not a question for the help center.
    assert thanks.tool_names == ()
