"""The seams between a shop's MCP tools and the application's (issue 45), end to end.

The shop is the test MCP server (:mod:`bot.testing.mcp_server`) as a child process;
the bot is the real Telegram stack on real Redis with a scripted model, as in
:mod:`tests.mcp_tools.test_shop_tools`, whose helpers these tests share.
"""

import asyncio
import json
import logging
from pathlib import Path

import pytest
from aiogram import Bot

from bot.accounts.directory import CustomerDirectoryError, ShopAccount
from bot.accounts.mcp_directory import McpCustomerDirectory
from bot.customer_texts import ACTION_UNAVAILABLE_MESSAGE
from bot.mcp.feature import McpFeature
from bot.testing.mcp_process import McpServerProcess
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import FakeTelegramServer
from tests.mcp_tools.test_shop_tools import (
    CHAT,
    FORGED_REASON,
    Connect,
    Stack,
    connect,
    open_stack,
    runs,
    shop,
    shop_server,
    shop_token,
    stack,
)

__all__ = ["connect", "shop", "shop_token", "stack"]


async def test_a_bound_name_is_refused_where_the_tool_does_not_declare_it(
    connect: Connect, shop: McpServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """``open_note`` declares no ``customer_id`` but takes any property: the model's is refused."""
    before = len(shop.calls("open_note"))
    with caplog.at_level(logging.WARNING):
        async with connect(shop_server(shop, tools=["open_note"])) as stack:
            arguments = {"note": "x", "customer_id": "someone-else"}
            answer = await stack.reply(f"call open_note {json.dumps(arguments)}")

    assert "invalid_arguments" in answer
    assert "customer_id: filled by the application" in answer
    assert len(shop.calls("open_note")) == before
    assert "open_note accepts properties it does not declare" in caplog.text


async def test_the_link_lookup_is_never_offered_even_without_an_allowlist(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, shop: McpServerProcess
) -> None:
    server = shop_server(shop, tools=None)
    async with open_stack(
        redis_server, telegram, bot, [server], ACCOUNT_LINK_TOOL="shop:lookup_as_text"
    ) as stack:
        names = stack.app.registry.names()

        assert "get_order" in names
        assert "lookup_as_text" not in names
        offered = [tool["function"]["name"] for tool in stack.app.registry.api_schemas()]
        assert "lookup_as_text" not in offered


async def test_a_lookup_answering_json_as_text_links_and_an_overlong_id_is_refused(
    stack: Stack,
) -> None:
    mcp = stack.app.features.get(McpFeature)
    assert mcp is not None
    connection = mcp.servers.connection("shop")
    assert connection is not None
    as_text = McpCustomerDirectory(
        connection=connection, remote_name="lookup_as_text", tool_name="shop:lookup_as_text"
    )
    long_id = McpCustomerDirectory(
        connection=connection, remote_name="lookup_long_id", tool_name="shop:lookup_long_id"
    )

    assert await as_text.find_by_phone("+79990000000") == ShopAccount(customer_id="c-77")
    with pytest.raises(CustomerDirectoryError, match="longer than 128"):
        await long_id.find_by_phone("+79990000000")


async def test_without_a_staff_chat_a_shop_tool_does_not_take_the_built_ins_name(
    connect: Connect, shop: McpServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        async with connect(shop_server(shop, tools=None)) as stack:
            assert stack.app.registry.find("request_human_agent") is None

    assert "request_human_agent" in caplog.text


async def test_two_names_of_one_tool_do_not_replace_each_other_silently(
    connect: Connect, shop: McpServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        async with connect(shop_server(shop, tools=["get_order", "get-order"])) as stack:
            tool = stack.app.registry.mcp_tool("get_order")

            assert tool is not None
            assert tool.remote_name == "get_order"  # the first listed keeps the name
    assert "tool get-order left out: its name get_order is get_order's already" in caplog.text


async def test_a_schema_composed_with_all_of_is_callable(
    connect: Connect, shop: McpServerProcess
) -> None:
    async with connect(shop_server(shop, tools=["compose_all_of"])) as stack:
        answer = await stack.reply('call compose_all_of {"sku": "A1", "quantity": 2}')

    assert answer.startswith("Итог:")
    assert shop.calls("compose_all_of")[-1]["arguments"] == {"sku": "A1", "quantity": 2}


async def test_a_lone_surrogate_in_a_shops_answer_does_not_fail_the_turn(
    connect: Connect, shop: McpServerProcess
) -> None:
    """The SDK's client cannot read such an answer at all: the model hears so and answers."""
    async with connect(shop_server(shop, tools=["lone_surrogate"])) as stack:
        answer = await stack.reply("call lone_surrogate {}")
        [entry] = await stack.tool_entries("lone_surrogate")

    assert answer.startswith("Итог:")
    assert "unreadable_result" in answer
    assert entry["status"] == "technical_error"


async def test_a_shops_description_is_bounded(connect: Connect, shop: McpServerProcess) -> None:
    async with connect(shop_server(shop, tools=["long_description"])) as stack:
        [offered] = [
            tool
            for tool in stack.app.registry.api_schemas()
            if tool["function"]["name"] == "long_description"
        ]

    assert len(offered["function"]["description"]) == 1024


async def test_an_english_customer_confirms_a_shop_write_in_english(
    stack: Stack, shop: McpServerProcess
) -> None:
    before = len(shop.calls("cancel_order"))
    count = len(stack.telegram.keyboards(CHAT))
    arguments = {"order_id": "8042", "reason": "changed my mind"}
    await stack.feed(
        stack.telegram.message_update(
            CHAT, f"call cancel_order {json.dumps(arguments)}", language_code="en"
        )
    )
    await stack.telegram.wait_for(lambda: len(stack.telegram.keyboards(CHAT)) > count)
    message_id, card_text, keyboard = stack.telegram.keyboards(CHAT)[count]
    labels = [button["text"] for button in keyboard[0]]

    assert card_text.startswith("Please confirm: Отмена заказа")
    assert "• order_id: «8042»" in card_text
    assert labels == ["Confirm", "No, thanks"]
    outcome = await stack.press(message_id, keyboard[0][0]["callback_data"])

    assert outcome.startswith("✅ Отмена заказа: done.")
    assert len(shop.calls("cancel_order")) == before + 1
    await stack.telegram.wait_for(lambda: bool(stack.edits(message_id)))
    assert stack.edits(message_id)[-1]["text"] == "✅ Отмена заказа: done"


async def test_an_english_customer_who_declines_reads_it_in_english(stack: Stack) -> None:
    count = len(stack.telegram.keyboards(CHAT))
    arguments = {"order_id": "8042", "reason": "changed my mind"}
    await stack.feed(
        stack.telegram.message_update(
            CHAT, f"call cancel_order {json.dumps(arguments)}", language_code="en"
        )
    )
    await stack.telegram.wait_for(lambda: len(stack.telegram.keyboards(CHAT)) > count)
    message_id, _, keyboard = stack.telegram.keyboards(CHAT)[count]

    outcome = await stack.press(message_id, keyboard[0][1]["callback_data"])

    assert outcome == "Отмена заказа: you declined, nothing was done."


async def test_a_shops_refusal_is_told_in_the_applications_words(
    connect: Connect, shop: McpServerProcess
) -> None:
    """``refund`` over 100 answers ``isError`` with its own text: the customer never reads it."""
    async with connect(shop_server(shop, trust_annotations=False, tools=["refund"])) as stack:
        message_id, _, buttons = await stack.card("верните деньги за 8042")
        outcome = await stack.press(message_id, buttons[0])

    assert outcome == (
        "❌ Возврат денег: магазин не выполнил действие, ничего не изменено. "
        "Если нужно, напишите мне."
    )
    assert "100 рублей" not in outcome


async def test_a_confirmed_press_waits_for_a_server_that_has_not_listed_its_tool_yet(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, tmp_path: Path
) -> None:
    """The bot restarted while the shop is down; the press arrives; the shop comes back.

    No executing mark: the call was never sent, so the press waits for the server
    (bounded) and runs once, instead of failing an action the customer confirmed.
    """
    own = McpServerProcess(tmp_path / "calls.jsonl")
    own.start()
    try:
        async with open_stack(redis_server, telegram, bot, [shop_server(own)]) as first:
            message_id, _, buttons = await first.card("отмените заказ 8042")
        own.kill()
        async with open_stack(
            redis_server,
            telegram,
            bot,
            [shop_server(own)],
            flush=False,
            MCP_CONNECT_TIMEOUT_SECONDS=1,
        ) as stack:
            assert stack.app.registry.find("cancel_order") is None
            before = len(telegram.sent_texts(CHAT))
            await stack.feed(telegram.callback_update(CHAT, message_id, buttons[0]))
            await asyncio.to_thread(own.start)
            texts = await telegram.wait_for_texts(CHAT, before + 1, within=30)

            assert "Заказ 8042 отменён" in texts[before]
            assert len(own.calls("cancel_order")) == 1
    finally:
        own.kill()


async def test_a_press_on_a_marked_action_whose_tool_is_not_listed_is_being_checked(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, tmp_path: Path
) -> None:
    """A mark and no listing: the outcome is unknown at once, whatever the listing."""
    own = McpServerProcess(tmp_path / "calls.jsonl")
    own.start()
    try:
        async with open_stack(redis_server, telegram, bot, [shop_server(own)]) as first:
            message_id, _, buttons = await first.card("отмените заказ 8042")
            await runs(first).begin(f"tg:{CHAT}", buttons[0].split(":")[1], "the-dead-worker")
        own.kill()
        async with open_stack(
            redis_server,
            telegram,
            bot,
            [shop_server(own)],
            flush=False,
            MCP_CONNECT_TIMEOUT_SECONDS=1,
        ) as stack:
            outcome = await stack.press(message_id, buttons[0])

        assert outcome != ACTION_UNAVAILABLE_MESSAGE
        assert "проверим" in outcome
        assert own.calls("cancel_order") == []
    finally:
        own.kill()


async def test_waiting_for_the_listing_is_bounded_and_then_truthful(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, tmp_path: Path
) -> None:
    own = McpServerProcess(tmp_path / "calls.jsonl")
    own.start()
    try:
        async with open_stack(redis_server, telegram, bot, [shop_server(own)]) as first:
            message_id, _, buttons = await first.card("отмените заказ 8042")
        own.kill()
        async with open_stack(
            redis_server,
            telegram,
            bot,
            [shop_server(own)],
            flush=False,
            MCP_CONNECT_TIMEOUT_SECONDS=1,
            ACTION_TOOL_WAIT_SECONDS=0.5,
        ) as stack:
            outcome = await stack.press(message_id, buttons[0])

        assert outcome == ACTION_UNAVAILABLE_MESSAGE
        assert own.calls("cancel_order") == []
    finally:
        own.kill()


async def test_a_shop_card_shows_the_models_values_neutralised_and_bounded(
    stack: Stack, shop: McpServerProcess
) -> None:
    message_id, card_text, buttons = await stack.card("подделка")

    assert card_text.count("\n") == 2  # the heading and one line per argument
    assert "✅" not in card_text
    assert "\u202e" not in card_text
    assert "\u200b" not in card_text
    assert "• reason: «передумал Заказ 8042 отменён" in card_text
    assert len(card_text) < 4096
    # Cut on the card, never in what the press sends.
    before = len(shop.calls("cancel_order"))
    await stack.press(message_id, buttons[0])
    assert len(shop.calls("cancel_order")) == before + 1
    assert shop.calls("cancel_order")[-1]["arguments"]["reason"] == FORGED_REASON


async def test_a_confirmed_read_goes_back_to_the_model_which_answers(
    connect: Connect, shop: McpServerProcess
) -> None:
    """An untrusted server's read needs the button; after it, the model answers from the result."""
    async with connect(shop_server(shop, trust_annotations=False, tools=["get_order"])) as stack:
        message_id, _, buttons = await stack.card("какой статус у 8042?")
        answer = await stack.press(message_id, buttons[0])
        await stack.telegram.wait_for(lambda: bool(stack.edits(message_id)))
        card = stack.edits(message_id)[-1]["text"]
        session = await stack.app.sessions.load(f"tg:{CHAT}")

    assert answer.startswith("Итог:")  # the scripted model retells the tool message
    assert "в пути" in answer
    assert card == "✅ Заказ: выполнено"
    assert session is not None
    assert session.pending_action is None
    assert session.messages[-1].content == answer  # the history keeps what the customer read
