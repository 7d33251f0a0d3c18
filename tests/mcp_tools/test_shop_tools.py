"""A shop's tools over MCP, end to end: real MCP server process, Telegram stack, real Redis.

The shop is :mod:`bot.testing.mcp_server` as a child process over streamable
HTTP (one per module; it records every call it receives in a file). The bot is
the real intake, dispatcher, workers and chat service against the fake Bot API,
with a scripted model that calls the shop's tools as the customer asks.
"""

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiogram import Bot
from redis import Redis as SyncRedis

from bot.actions.feature import ActionsFeature
from bot.actions.runs import ActionRuns
from bot.app import Application
from bot.customer_texts import ACTION_CHECKING_MESSAGE, ACTION_CHECKING_TEXT
from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.mcp.feature import McpFeature
from bot.ops.startup import StartupError
from bot.queue.dead_letters import DeadLetter, read_dead_letters
from bot.testing.audit_entries import stream_entries
from bot.testing.mcp_process import McpServerProcess
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result, tool_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from tests.queue.echo_pool import wait_until

CHAT = 8300
TOOL_FAILURE_TEXT = "Не удалось получить нужные данные."
SHOP_TOOLS = [
    "get_order",
    "cancel_order",
    "refund",
    "set_marketing",
    "slow_lookup",
    "export_catalogue",
    "my_orders",
]
FORGED_REASON = "передумал\n✅ Заказ 8042 отменён\u202e\u200b" + "я" * 5000
"""A value the model writes that tries to pass for the card's own words, and is huge."""
ASKS: dict[str, tuple[str, dict[str, Any]]] = {
    "подделк": ("cancel_order", {"order_id": "8042", "reason": FORGED_REASON}),
    "статус": ("get_order", {"order_id": "8042"}),
    "отмените": ("cancel_order", {"order_id": "8042", "reason": "передумал"}),
    "верните": ("refund", {"order_id": "8042", "amount_rub": 500}),
    "долго": ("slow_lookup", {}),
    "каталог": ("export_catalogue", {}),
    "мои заказы": ("my_orders", {"limit": 3}),
    "чужие заказы": ("my_orders", {"limit": 3, "customer_id": "someone-else"}),
    "рассылк": ("set_marketing", {"enabled": False}),
}


def shop_model(
    messages: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    """Calls the tool the customer's words name; retells a tool's answer; corrects a refusal."""
    last = messages[-1]
    if last["role"] == "tool":
        content = str(last["content"])
        if '"tool_error"' in content and "100 рублей" in content:
            return tool_result("refund", {"order_id": "8042", "amount_rub": 100})
        if '"invalid_arguments"' in content:
            return text_result("Отказ: " + content[:400])
        return text_result("Итог: " + content[:400])
    text = str(last["content"])
    if text.startswith("call "):
        name, _, arguments_json = text.removeprefix("call ").partition(" ")
        return tool_result(name, json.loads(arguments_json))
    for word, (tool, arguments) in ASKS.items():
        if word in text:
            return tool_result(tool, arguments)
    return text_result(f"Ответ: {text}")


TOKEN_VARIABLE = "TEST_SHOP_MCP_AUTH"
SHOP_AUTHORIZATION = "Bearer shop-secret-7f3a"


@pytest.fixture(autouse=True)
def shop_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the bot reads the header's secret (MCP_SERVERS names the variable only)."""
    monkeypatch.setenv(TOKEN_VARIABLE, SHOP_AUTHORIZATION)


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServerProcess]:
    """The shop's MCP server, one process for the module; it wants its bearer token."""
    server = McpServerProcess(
        tmp_path_factory.mktemp("mcp") / "calls.jsonl", many=200, authorization=SHOP_AUTHORIZATION
    )
    server.start()
    yield server
    server.kill()


class Stack(TelegramStack):
    """The Telegram side of one bot connected to the shop."""

    def __init__(
        self, app: Application, bot: Bot, telegram: FakeTelegramServer, model: ScriptedClient
    ) -> None:
        super().__init__(app, bot, telegram=telegram)
        self.model = model

    async def reply(self, text: str, within: float = 10.0) -> str:
        """Say ``text``; the bot's next message (failing after ``within`` seconds)."""
        before = len(self.telegram.sent_texts(CHAT))
        await self.feed(self.telegram.message_update(CHAT, text))
        texts = await self.telegram.wait_for_texts(CHAT, before + 1, within)
        return texts[before]

    async def card(self, text: str) -> tuple[int, str, list[str]]:
        """Say ``text``; the card's message id, text and callback data."""
        count = len(self.telegram.keyboards(CHAT))
        await self.feed(self.telegram.message_update(CHAT, text))
        await self.telegram.wait_for(lambda: len(self.telegram.keyboards(CHAT)) > count)
        message_id, card_text, keyboard = self.telegram.keyboards(CHAT)[count]
        return message_id, card_text, [button["callback_data"] for button in keyboard[0]]

    async def press(self, message_id: int, data: str, within: float = 10.0) -> str:
        """Press a card's button; the message the bot sends after it (within ``within`` s)."""
        before = len(self.telegram.sent_texts(CHAT))
        await self.feed(self.telegram.callback_update(CHAT, message_id, data))
        texts = await self.telegram.wait_for_texts(CHAT, before + 1, within)
        return texts[before]

    def edits(self, message_id: int) -> list[dict[str, Any]]:
        """The card's edits, oldest first."""
        return [
            call.params
            for call in self.telegram.calls_of("editMessageText")
            if call.ok and call.params.get("message_id") == message_id
        ]

    async def tool_entries(self, tool: str | None = None, count: int = 1) -> list[dict[str, str]]:
        """The tool audit entries (of ``tool``), waiting until ``count`` are there."""
        async with asyncio.timeout(10):
            while True:
                entries = [
                    entry
                    for entry in await stream_entries(self.app.redis, "mcp:audit")
                    if entry.get("type") == "tool"
                    and (tool is None or entry.get("tool_name") == tool)
                ]
                if len(entries) >= count:
                    return entries
                await asyncio.sleep(0.01)


def runs(stack: Stack) -> ActionRuns:
    """The executing marks of the stack's confirmed actions."""
    actions = stack.app.features.get(ActionsFeature)
    assert actions is not None
    assert actions.confirmations.runs is not None
    return actions.confirmations.runs


async def dead_letters(stack: Stack) -> list[DeadLetter]:
    """The dead letters staff see (``support-audit dead-letters`` reads them so)."""
    client = SyncRedis.from_url(stack.app.settings.redis.url.get_secret_value())
    try:
        return await asyncio.to_thread(read_dead_letters, client, stack.app.keys, 10)
    finally:
        client.close()


TOOL_DEADLINE_SECONDS = 4


def shop_server(shop: McpServerProcess, **overrides: Any) -> dict[str, Any]:
    """The shop's ``MCP_SERVERS`` object: trusted annotations, customer-bound arguments."""
    server: dict[str, Any] = {
        "name": "shop",
        "url": shop.url,
        "headers_from_env": {"Authorization": TOKEN_VARIABLE},
        "tools": SHOP_TOOLS,
        "trust_annotations": True,
        # Short enough that the hanging tool's test is quick, long enough for a loaded machine.
        "timeout_seconds": TOOL_DEADLINE_SECONDS,
        "bound_arguments": {"telegram_id": "user_id", "customer_id": "chat_id"},
    }
    server.update(overrides)
    return server


@asynccontextmanager
async def open_stack(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    bot: Bot,
    servers: list[dict[str, Any]],
    *,
    flush: bool = True,
    **env: Any,
) -> AsyncIterator[Stack]:
    values: dict[str, Any] = {
        "TELEGRAM_API_BASE_URL": telegram.base_url,
        "REDIS_URL": redis_server.url,
        "REDIS_KEY_PREFIX": "mcp",
        "AUDIT_STREAM": "mcp:audit",
        "SESSION_LEASE_SECONDS": 3,
        "MCP_SERVERS": json.dumps(servers),
        "MCP_CONNECT_TIMEOUT_SECONDS": 10,
    }
    settings = make_settings(**{**values, **env})
    model = ScriptedClient(shop_model)
    async with open_application(settings, llm=model, flush=flush) as app:
        stack = Stack(app, bot, telegram, model)
        async with stack.running():
            yield stack


Connect = Callable[[dict[str, Any]], AbstractAsyncContextManager[Stack]]


@pytest.fixture
def connect(redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot) -> Connect:
    """Opens a stack connected to one server (for tests that choose its settings)."""
    return lambda server: open_stack(redis_server, telegram, bot, [server])


@pytest.fixture
async def stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, shop: McpServerProcess
) -> AsyncIterator[Stack]:
    async with open_stack(redis_server, telegram, bot, [shop_server(shop)]) as built:
        yield built


async def test_a_read_tool_is_answered_from_the_shop_without_a_card(
    stack: Stack, shop: McpServerProcess
) -> None:
    before = len(shop.calls("get_order"))

    answer = await stack.reply("какой статус у 8042?")

    assert "в пути" in answer
    assert len(shop.calls("get_order")) == before + 1
    assert stack.telegram.keyboards(CHAT) == []
    entry = (await stack.tool_entries("get_order"))[-1]
    assert entry["status"] == "success"
    assert entry["mcp_server"] == "shop"
    assert "8042" not in json.dumps(entry)  # never the arguments


async def test_the_secret_header_comes_from_its_variable_and_is_never_logged(
    connect: Connect,
    shop: McpServerProcess,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG):
        async with connect(shop_server(shop)) as stack:
            assert "в пути" in await stack.reply("какой статус у 8042?")
    assert "shop-secret" not in caplog.text

    monkeypatch.setenv(TOKEN_VARIABLE, "Bearer wrong")
    async with connect(shop_server(shop, tools=["get_order"])) as stack:
        mcp = stack.app.features.get(McpFeature)
        assert mcp is not None
        assert mcp.servers.degraded() == ("shop",)  # refused: its tools are not offered

    monkeypatch.delenv(TOKEN_VARIABLE)
    with pytest.raises(StartupError) as refused:
        async with connect(shop_server(shop)):
            pass
    assert str(refused.value) == (
        f"MCP server shop: header Authorization needs the environment variable "
        f"{TOKEN_VARIABLE}, which is not set"
    )


async def test_the_demo_order_tools_give_way_to_the_shops(stack: Stack) -> None:
    names = stack.app.registry.names()

    assert "get_order_status" not in names
    assert "get_return_policy" not in names
    assert "get_support_hours" in names
    assert "cancel_order" in names  # the shop's own, not the demo's
    assert stack.app.registry.mcp_tool("cancel_order") is not None
    assert stack.app.registry.write_tool("cancel_order") is None


async def test_a_write_runs_once_after_the_customers_press(
    stack: Stack, shop: McpServerProcess
) -> None:
    before = len(shop.calls("cancel_order"))

    message_id, card_text, buttons = await stack.card("отмените заказ 8042")

    assert card_text.startswith("Отмена заказа?")
    assert "order_id: «8042»" in card_text
    assert "reason: «передумал»" in card_text
    assert len(shop.calls("cancel_order")) == before  # nothing called before the press
    outcome = await stack.press(message_id, buttons[0])
    assert "Заказ 8042 отменён" in outcome
    assert len(shop.calls("cancel_order")) == before + 1
    # A second press of the same card changes nothing.
    await stack.feed(stack.telegram.callback_update(CHAT, message_id, buttons[0]))
    await stack.settle(CHAT)
    assert len(shop.calls("cancel_order")) == before + 1


async def test_a_declined_write_is_never_called(stack: Stack, shop: McpServerProcess) -> None:
    before = len(shop.calls("cancel_order"))

    message_id, _, buttons = await stack.card("отмените заказ 8042")
    outcome = await stack.press(message_id, buttons[1])

    assert "вы отказались" in outcome
    assert len(shop.calls("cancel_order")) == before


async def test_a_press_after_the_server_restarted_runs_once_on_a_new_session(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    bot: Bot,
    tmp_path: Path,
) -> None:
    own = McpServerProcess(tmp_path / "calls.jsonl")
    own.start()
    try:
        server = shop_server(own, timeout_seconds=15)
        async with open_stack(redis_server, telegram, bot, [server]) as stack:
            feature = stack.app.features.get(McpFeature)
            assert feature is not None
            mcp = feature.servers
            message_id, _, buttons = await stack.card("отмените заказ 8042")
            own.kill()

            await stack.feed(stack.telegram.callback_update(CHAT, message_id, buttons[0]))
            # The call was refused (it never reached the shop): the session is renewed.
            await wait_until(lambda: bool(mcp.degraded()), 10, "the session renewed")
            before = len(stack.telegram.sent_texts(CHAT))
            await asyncio.to_thread(own.start)
            texts = await stack.telegram.wait_for_texts(CHAT, before + 1, within=15)

            assert "Заказ 8042 отменён" in texts[before]
            assert len(own.calls("cancel_order")) == 1
            assert mcp.degraded() == ()
    finally:
        own.kill()


async def test_a_press_after_a_legacy_server_restarted_runs_once_on_a_new_session(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    bot: Bot,
    tmp_path: Path,
) -> None:
    own = McpServerProcess(tmp_path / "calls.jsonl")
    own.start()
    try:
        # The 2025 handshake: a session id the restarted server no longer knows (404).
        server = {**shop_server(own, timeout_seconds=15), "protocol": "legacy"}
        server.pop("headers_from_env")
        async with open_stack(redis_server, telegram, bot, [server]) as stack:
            message_id, _, buttons = await stack.card("отмените заказ 8042")
            await asyncio.to_thread(own.restart)

            outcome = await stack.press(message_id, buttons[0])

            assert "Заказ 8042 отменён" in outcome
            assert len(own.calls("cancel_order")) == 1
    finally:
        own.kill()


async def test_a_hanging_tool_gets_a_kind_answer_within_its_deadline(
    stack: Stack, shop: McpServerProcess
) -> None:
    # The tool hangs for an hour: any answer before that is one its deadline cut.
    answer = await stack.reply("поищите долго", within=60)

    assert answer.startswith(TOOL_FAILURE_TEXT)
    entry = (await stack.tool_entries("slow_lookup"))[-1]
    assert entry["status"] == "timeout"
    # The chat is free again: the next question is answered.
    assert "в пути" in await stack.reply("какой статус у 8042?")


async def test_a_confirmed_call_that_hangs_is_checked_not_repeated_and_frees_the_chat(
    connect: Connect, shop: McpServerProcess
) -> None:
    before = len(shop.calls("slow_lookup"))
    async with connect(shop_server(shop, trust_annotations=False)) as stack:
        message_id, _, buttons = await stack.card("поищите долго")

        # The call hangs for an hour: an outcome before that is one its deadline cut.
        outcome = await stack.press(message_id, buttons[0], within=60)

        assert outcome == ACTION_CHECKING_MESSAGE
        assert len(shop.calls("slow_lookup")) == before + 1
        assert [letter.tool_name for letter in await dead_letters(stack)] == ["slow_lookup"]
        assert await stack.reply("привет") == "Ответ: привет"  # the chat answers again


async def test_a_huge_result_is_cut_before_the_model_reads_it(stack: Stack) -> None:
    await stack.reply("выгрузите каталог")

    messages = stack.model.requests[-1][0]
    tool_message = next(m for m in reversed(messages) if m["role"] == "tool")
    content = str(tool_message["content"])
    assert len(content) < 10_000
    payload = json.loads(content)
    assert payload["data"]["truncated"] is True
    assert payload["data"]["total_chars"] == 1_000_000


async def test_an_error_result_is_the_tools_no_and_the_model_corrects_itself(
    stack: Stack, shop: McpServerProcess
) -> None:
    answer = await stack.reply("верните деньги")

    assert '"refunded_rub": 100' in answer
    amounts = [call["arguments"]["amount_rub"] for call in shop.calls("refund")[-2:]]
    assert amounts == [500, 100]
    statuses = [entry["status"] for entry in (await stack.tool_entries("refund", 2))[-2:]]
    assert statuses == ["business_error", "success"]


async def test_bound_arguments_come_from_the_conversation_never_the_model(
    stack: Stack, shop: McpServerProcess
) -> None:
    answer = await stack.reply("мои заказы")

    call = shop.calls("my_orders")[-1]["arguments"]
    assert call == {"limit": 3, "telegram_id": CHAT, "customer_id": CHAT}
    assert "8042" in answer
    schema = next(
        tool for tool in stack.model.requests[0][1] if tool["function"]["name"] == "my_orders"
    )
    assert set(schema["function"]["parameters"]["properties"]) == {"limit"}

    before = len(shop.calls("my_orders"))
    refused = await stack.reply("покажите чужие заказы")

    assert "customer_id" in refused
    assert "invalid_arguments" in refused
    assert len(shop.calls("my_orders")) == before


async def test_an_unlinked_customer_is_asked_to_link_the_account_first(
    connect: Connect, shop: McpServerProcess
) -> None:
    before = len(shop.calls("my_orders"))
    bound = {"telegram_id": "user_id", "customer_id": "shop_customer_id"}
    async with connect(shop_server(shop, bound_arguments=bound)) as stack:
        answer = await stack.reply("мои заказы")

    assert "account_not_linked" in answer
    assert len(shop.calls("my_orders")) == before


async def test_tool_definitions_over_the_budget_are_one_warning_line(
    connect: Connect, shop: McpServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="bot.app"):
        async with connect(shop_server(shop, tools=None)):
            pass

    warnings = [
        r.getMessage() for r in caplog.records if "MCP_TOOLS_TOKEN_WARNING" in r.getMessage()
    ]
    assert len(warnings) == 1
    found = re.search(r"about (\d+) tokens .*\((\d+) tools\)", warnings[0])
    assert found is not None
    assert int(found.group(1)) > 4000
    assert int(found.group(2)) >= 200


async def test_a_tool_named_in_camel_case_is_offered_in_snake_case_and_called_by_its_name(
    connect: Connect, shop: McpServerProcess
) -> None:
    async with connect(shop_server(shop, tools=["getDeliverySlots"])) as stack:
        assert stack.app.registry.names()[-1] == "get_delivery_slots"

        answer = await stack.reply('call get_delivery_slots {"city": "Казань"}')

    assert answer.startswith("Итог:")
    assert shop.calls()[-1] == {
        "tool": "getDeliverySlots",
        "arguments": {"city": "Казань"},
        "pid": shop.calls()[-1]["pid"],
    }


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_changed_tool_list_is_listed_again(
    connect: Connect, shop: McpServerProcess, protocol: str
) -> None:
    added = f"new_tool_{protocol}"
    server = {**shop_server(shop, tools=["add_tool", added]), "protocol": protocol}
    async with connect(server) as stack:
        registry = stack.app.registry
        assert registry.mcp_tool(added) is None

        await stack.reply(f'call add_tool {{"name": "{added}"}}')

        await wait_until(lambda: registry.mcp_tool(added) is not None, 10, "listed again")
        offered = [tool["function"]["name"] for tool in registry.api_schemas()]
        assert added in offered


async def test_an_untrusted_server_asks_the_button_even_for_reads(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, shop: McpServerProcess
) -> None:
    server = shop_server(shop, trust_annotations=False)
    async with open_stack(redis_server, telegram, bot, [server]) as stack:
        before = len(shop.calls("get_order"))
        _, card_text, _ = await stack.card("какой статус у 8042?")

        assert card_text.startswith("Заказ?")
        assert len(shop.calls("get_order")) == before


async def test_a_server_down_at_start_up_does_not_stop_the_bot(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, tmp_path: Path
) -> None:
    down = McpServerProcess(tmp_path / "calls.jsonl")  # never started
    servers = [shop_server(down)]
    async with open_stack(
        redis_server, telegram, bot, servers, MCP_CONNECT_TIMEOUT_SECONDS=1
    ) as stack:
        mcp = stack.app.features.get(McpFeature)
        assert mcp is not None
        assert mcp.servers.degraded() == ("shop",)
        assert stack.app.registry.mcp_tool("get_order") is None
        assert "Ответ" in await stack.reply("привет")
        await asyncio.to_thread(down.start)
        try:
            await wait_until(
                lambda: stack.app.registry.mcp_tool("get_order") is not None, 15, "listed"
            )
            assert mcp.servers.degraded() == ()
            assert "в пути" in await stack.reply("какой статус у 8042?")
        finally:
            down.kill()


async def test_a_list_of_200_tools_offers_only_the_allowlisted_five(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, shop: McpServerProcess
) -> None:
    allowed = ["get_order", "filler_000", "filler_077", "filler_150", "filler_199"]
    server = shop_server(shop, tools=allowed)
    async with open_stack(redis_server, telegram, bot, [server]) as stack:
        await stack.reply("привет")

        offered = [tool["function"]["name"] for tool in stack.model.requests[-1][1]]
        shop_offered = [name for name in offered if stack.app.registry.mcp_tool(name)]
        assert shop_offered == allowed


async def test_a_press_taken_again_after_its_call_started_is_not_called_twice(
    stack: Stack, shop: McpServerProcess
) -> None:
    before = len(shop.calls("cancel_order"))
    message_id, _, buttons = await stack.card("отмените заказ 8042")
    action_id = buttons[0].split(":")[1]
    # What a worker that died after sending the call left behind: the executing mark.
    assert await runs(stack).begin(f"tg:{CHAT}", action_id, "the-dead-worker")

    outcome = await stack.press(message_id, buttons[0])

    assert outcome == ACTION_CHECKING_MESSAGE
    assert len(shop.calls("cancel_order")) == before
    letters = await dead_letters(stack)
    assert [
        (letter.kind, letter.action_id, letter.tool_name, letter.server) for letter in letters
    ] == [("action", action_id, "cancel_order", "shop")]
    await stack.telegram.wait_for(lambda: bool(stack.edits(message_id)))
    assert stack.edits(message_id)[-1]["text"] == ACTION_CHECKING_TEXT


async def test_staff_see_an_action_of_unknown_outcome_in_the_customers_topic(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, shop: McpServerProcess
) -> None:
    staff_chat = -1001234567890
    telegram.make_forum(staff_chat)
    async with open_stack(
        redis_server, telegram, bot, [shop_server(shop)], STAFF_CHAT_ID=staff_chat
    ) as stack:
        message_id, _, buttons = await stack.card("отмените заказ 8042")
        action_id = buttons[0].split(":")[1]
        await runs(stack).begin(f"tg:{CHAT}", action_id, "the-dead-worker")

        assert await stack.press(message_id, buttons[0]) == ACTION_CHECKING_MESSAGE

        await telegram.wait_for(lambda: bool(telegram.topics(staff_chat)))
        [thread] = telegram.topics(staff_chat)

        def notes() -> list[str]:
            texts = telegram.topic_texts(staff_chat, thread)
            return [text for text in texts if text.startswith(f"Проверьте действие {action_id}")]

        await telegram.wait_for(lambda: bool(notes()))
        [note] = notes()
        # What the customer confirmed, as their card said it, on one line.
        assert 'клиент подтвердил «Отмена заказа? • order_id: "8042"' in note


async def test_a_trusted_idempotent_tool_is_called_again_after_a_crash(
    stack: Stack, shop: McpServerProcess
) -> None:
    before = len(shop.calls("set_marketing"))
    message_id, card_text, buttons = await stack.card("выключите рассылку")
    assert "enabled: нет" in card_text
    await runs(stack).begin(f"tg:{CHAT}", buttons[0].split(":")[1], "the-dead-worker")

    outcome = await stack.press(message_id, buttons[0])

    assert outcome.startswith("✅ Рассылка: выполнено")
    assert len(shop.calls("set_marketing")) == before + 1


def without_nulls(value: Any) -> Any:
    """``value`` without the keys whose value is ``null``, at every depth."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


SCHEMA_CASES = [
    ("no_arguments", {}, True),
    ("search_products", {"query": "кофе", "max_price": None, "sort": "price"}, True),
    (
        "create_bundle",
        {"lines": [{"sku": "A1", "quantity": 2, "options": None}, {"sku": "B2", "quantity": 1}]},
        True,
    ),
    ("ship_to", {"address": {"city": "Казань"}}, False),
    ("report_link", {"url": "https://shop.example/p/1"}, False),
    ("tag_order", {"order_id": "8042", "tags": {"gift": True, "note": "к празднику"}}, False),
]


@pytest.mark.parametrize(("tool", "arguments", "strict"), SCHEMA_CASES)
async def test_each_kind_of_schema_reaches_the_shop(
    connect: Connect,
    shop: McpServerProcess,
    tool: str,
    arguments: dict[str, Any],
    strict: bool,
) -> None:
    async with connect(shop_server(shop, tools=[tool])) as stack:
        answer = await stack.reply(f"call {tool} {json.dumps(arguments, ensure_ascii=False)}")

        offered = next(t for t in stack.model.requests[0][1] if t["function"]["name"] == tool)
        assert offered["function"].get("strict", False) is strict
        received = shop.calls(tool)[-1]["arguments"]
        # The nulls a strict schema makes the model write for optional fields are dropped.
        assert received == without_nulls(arguments)
        assert answer.startswith("Итог:")


@pytest.mark.parametrize(
    ("tool", "arguments", "problem"),
    [
        ("search_products", {"query": "кофе", "sort": "cheapest"}, "sort: must satisfy enum"),
        ("create_bundle", {"lines": [{"sku": "A1", "quantity": 0}]}, "lines.0.quantity"),
        ("ship_to", {"address": {"street": "Ленина"}}, "'city' is a required property"),
        ("report_link", {"url": "not a link"}, 'url: must satisfy format "uri"'),
    ],
)
async def test_arguments_failing_the_servers_schema_go_back_to_the_model(
    connect: Connect,
    shop: McpServerProcess,
    tool: str,
    arguments: dict[str, Any],
    problem: str,
) -> None:
    before = len(shop.calls(tool))
    async with connect(shop_server(shop, tools=[tool])) as stack:
        answer = await stack.reply(f"call {tool} {json.dumps(arguments, ensure_ascii=False)}")

        assert "invalid_arguments" in answer
        assert problem in answer
        assert "cheapest" not in answer  # the model's values never go back
        assert len(shop.calls(tool)) == before


async def test_a_server_over_stdio_answers_reads_and_confirmed_writes(
    connect: Connect, tmp_path: Path
) -> None:
    local = McpServerProcess(tmp_path / "calls.jsonl")  # the bot starts it itself
    command, args = local.stdio_command()
    server = {
        "name": "local",
        "command": command,
        "args": args,
        "tools": ["get_order", "cancel_order"],
        "trust_annotations": True,
    }
    async with connect(server) as stack:
        assert "в пути" in await stack.reply("какой статус у 8042?")
        message_id, _, buttons = await stack.card("отмените заказ 8042")
        assert "Заказ 8042 отменён" in await stack.press(message_id, buttons[0])

    assert [call["tool"] for call in local.calls()] == ["get_order", "cancel_order"]


def test_the_at_most_once_text_is_short_and_russian() -> None:
    assert re.search("[а-я]", ACTION_CHECKING_MESSAGE)
    assert len(ACTION_CHECKING_MESSAGE) < 200
