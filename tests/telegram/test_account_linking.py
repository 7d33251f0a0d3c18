"""Account linking by a shared contact, through the real pipeline (ACCOUNT_LINK_TOOL set).

The real intake and chat queue in a real redis-server, a worker of this test's
event loop running the real dispatcher, replies to the fake Bot API over HTTP.
Telegram proves a contact is the sender's own when ``contact.user_id`` is the
sender: only then is the shop asked, and its customer id kept in the session
and given to later turns. A number typed as text never links anything.
"""

import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

import pytest
from aiogram import Bot

from bot import customer_texts
from bot.accounts.directory import CustomerDirectoryError, ShopAccount
from bot.accounts.feature import AccountsFeature
from bot.accounts.linking import AccountLinking
from bot.app import Application, build_application
from bot.engine.chat_service import ChatReply, ChatService
from bot.engine.reply_stream import ReplyStream
from bot.ops.startup import StartupError
from bot.queue.delivery import Reply
from bot.queue.job_results import JobContext, JobDone
from bot.queue.staff_actions import HandoffTurn
from bot.sessions.models import ConversationSession
from bot.settings import Settings
from bot.support_audit.cli import main as audit_main
from bot.testing.audit_entries import stream_entries
from bot.testing.mcp_shop import DemoShopMcpProcess
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, echo_responder
from bot.testing.settings import make_settings
from bot.testing.telegram_server import ApiCall, FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from turn import TEXT_INPUT, TurnContext, TurnInput

CHAT = 710
OWN_PHONE = "79161234567"
"""The demo customer 100500's number, as Telegram sends a shared contact's (no ``+``)."""
AUDIT = "linking:audit"
CONTACT_BUTTON = [[{"text": customer_texts.LINK_BUTTON, "request_contact": True}]]


class RecordingChat:
    """The real chat service; records each turn's context (whose shop customer it names)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.contexts: list[TurnContext] = []

    async def reply(
        self,
        context: TurnContext,
        text: str,
        *,
        held: JobContext,
        customer: HandoffTurn | None = None,
        stream: ReplyStream | None = None,
        turn_input: TurnInput = TEXT_INPUT,
    ) -> ChatReply:
        self.contexts.append(context)
        reply: ChatReply = await self.inner.reply(
            context, text, held=held, customer=customer, stream=stream, turn_input=turn_input
        )
        return reply

    async def reset(self, conversation_key: str, *, token: str) -> None:
        await self.inner.reset(conversation_key, token=token)

    async def summarise(self, conversation_key: str, *, token: str) -> None:
        await self.inner.summarise(conversation_key, token=token)

    async def mark_undelivered(self, conversation_key: str, token: str, turn_id: str) -> None:
        await self.inner.mark_undelivered(conversation_key, token, turn_id)

    async def commit_without_turn(
        self,
        conversation_key: str,
        held: JobContext,
        change: Callable[[ConversationSession], ConversationSession],
        reply: Reply,
    ) -> JobDone:
        done: JobDone = await self.inner.commit_without_turn(conversation_key, held, change, reply)
        return done


class Stack(TelegramStack):
    """The Telegram side with account linking on, its chat service watched."""

    def __init__(self, app: Application, bot: Bot, telegram: FakeTelegramServer) -> None:
        self.chat = RecordingChat(app.chat)
        # A stand-in that forwards every call the handlers make to the real service.
        super().__init__(app, bot, telegram=telegram, chat=cast(ChatService, self.chat))

    async def shop_customer(self) -> str | None:
        session = await self.app.sessions.load(f"tg:{CHAT}")
        return session.shop_customer_id if session is not None else None

    async def link_entries(self) -> list[dict[str, str]]:
        return [e for e in await stream_entries(self.app.redis, AUDIT) if e.get("type") == "link"]


class UnreachableShop:
    """A customer directory whose shop never answers (its server is down)."""

    tool_name = "find_customer_by_phone"

    async def find_by_phone(self, phone: str) -> ShopAccount | None:
        raise CustomerDirectoryError("the shop did not answer")


def linking_settings(
    redis_server: RedisServer, telegram: FakeTelegramServer, lookup: str = "find_customer_by_phone"
) -> Settings:
    return make_settings(
        REDIS_URL=redis_server.url,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_KEY_PREFIX="linking",
        AUDIT_STREAM=AUDIT,
        SESSION_LEASE_SECONDS=3,
        ACCOUNT_LINK_TOOL=lookup,
    )


@pytest.fixture
async def stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    settings = linking_settings(redis_server, telegram)
    async with open_application(settings, llm=ScriptedClient(echo_responder)) as app:
        stack = Stack(app, bot, telegram)
        async with stack.running():
            yield stack


@pytest.fixture
async def polling_stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    """The stack taking updates by long polling from the fake Bot API."""
    settings = linking_settings(redis_server, telegram)
    async with open_application(settings, llm=ScriptedClient(echo_responder)) as app:
        stack = Stack(app, bot, telegram)
        async with stack.running(poll=True):
            yield stack


@pytest.fixture
async def unlinked_stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    """The stack without ACCOUNT_LINK_TOOL."""
    settings = linking_settings(redis_server, telegram, lookup="")
    async with open_application(settings, llm=ScriptedClient(echo_responder)) as app:
        stack = Stack(app, bot, telegram)
        async with stack.running():
            yield stack


@pytest.fixture
async def unreachable_stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    """The same stack whose shop lookup fails."""
    settings = linking_settings(redis_server, telegram)
    async with open_application(settings, llm=ScriptedClient(echo_responder)) as app:
        linking = AccountLinking(chat=app.chat, directory=UnreachableShop())
        features = app.features.added(AccountsFeature(linking=linking))
        stack = Stack(dataclasses.replace(app, features=features), bot, telegram)
        async with stack.running():
            yield stack


def contact_update(
    telegram: FakeTelegramServer, phone: str, *, owner: int | None, sender: int = CHAT
) -> dict[str, Any]:
    """A ``contact`` message from ``sender``; ``owner`` is the contact's Telegram user, if any."""
    contact: dict[str, Any] = {"phone_number": phone, "first_name": "Анна"}
    if owner is not None:
        contact["user_id"] = owner
    return telegram.message_update(CHAT, user_id=sender, extra={"contact": contact})


def last_send(telegram: FakeTelegramServer) -> ApiCall:
    sends = [c for c in telegram.calls_of("sendMessage") if c.params.get("chat_id") == CHAT]
    return sends[-1]


async def test_own_contact_links_the_shop_customer_and_later_turns_carry_it(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    await stack.feed(telegram.message_update(CHAT, "/link"))
    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.LINK_ASK]
    keyboard = last_send(telegram).params["reply_markup"]
    assert keyboard["keyboard"] == CONTACT_BUTTON

    await stack.feed(contact_update(telegram, OWN_PHONE, owner=CHAT))
    assert (await telegram.wait_for_texts(CHAT, 2))[-1] == customer_texts.LINK_DONE
    assert last_send(telegram).params["reply_markup"] == {"remove_keyboard": True}
    assert await stack.shop_customer() == "100500"

    await stack.feed(telegram.message_update(CHAT, "Где мой заказ?"))
    assert (await telegram.wait_for_texts(CHAT, 3))[-1] == "Ответ: Где мой заказ?"
    assert stack.chat.contexts[-1].shop_customer_id == "100500"

    await stack.settle(CHAT)
    (entry,) = await stack.link_entries()
    assert (entry["event"], entry["tool_name"]) == ("linked", "find_customer_by_phone")
    # Never the number, in any form, in any audit entry.
    for fields in await stream_entries(stack.app.redis, AUDIT):
        assert not any("9161234567" in value for value in fields.values())


@pytest.fixture
def staff_cli(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``support-audit``'s settings: this test's Redis and stream, no developer's ``.env``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    monkeypatch.setenv("AUDIT_STREAM", AUDIT)
    monkeypatch.setenv("AUDIT_PSEUDONYMIZE_CHAT_IDS", "false")


@pytest.mark.usefixtures("staff_cli")
async def test_staff_find_the_link_with_support_audit(
    stack: Stack, telegram: FakeTelegramServer, capsys: pytest.CaptureFixture[str]
) -> None:
    await stack.feed(contact_update(telegram, OWN_PHONE, owner=CHAT))
    await telegram.wait_for_texts(CHAT, 1)
    await stack.settle(CHAT)
    assert audit_main(["tail", "--type", "link", "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    shown = json.loads(line)
    assert (shown["type"], shown["event"], shown["chat_id"]) == ("link", "linked", str(CHAT))
    assert "9161234567" not in line


async def test_someone_elses_contact_is_refused_kindly(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    # A contact of another Telegram user, and one from the address book (no user at all).
    await stack.feed(contact_update(telegram, OWN_PHONE, owner=CHAT + 1))
    await stack.feed(contact_update(telegram, OWN_PHONE, owner=None))
    assert await telegram.wait_for_texts(CHAT, 2) == [customer_texts.LINK_NOT_OWN] * 2
    assert last_send(telegram).params["reply_markup"]["keyboard"] == CONTACT_BUTTON
    assert await stack.shop_customer() is None
    await stack.settle(CHAT)
    assert [e["event"] for e in await stack.link_entries()] == ["not_own_contact"] * 2


async def test_a_typed_phone_number_links_nothing(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    await stack.feed(telegram.message_update(CHAT, f"+{OWN_PHONE}"))
    assert await telegram.wait_for_texts(CHAT, 1) == [f"Ответ: +{OWN_PHONE}"]
    assert stack.chat.contexts[-1].shop_customer_id is None
    assert await stack.shop_customer() is None
    await stack.settle(CHAT)
    assert await stack.link_entries() == []


async def test_an_own_number_the_shop_does_not_know_links_nothing(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    await stack.feed(contact_update(telegram, "79990000000", owner=CHAT))
    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.LINK_NOT_FOUND]
    assert last_send(telegram).params["reply_markup"] == {"remove_keyboard": True}
    assert await stack.shop_customer() is None


async def test_a_shop_that_does_not_answer_links_nothing_and_keeps_the_button(
    unreachable_stack: Stack, telegram: FakeTelegramServer
) -> None:
    await unreachable_stack.feed(contact_update(telegram, OWN_PHONE, owner=CHAT))
    assert await telegram.wait_for_texts(CHAT, 1) == [customer_texts.LINK_UNAVAILABLE]
    # The button again, to try once the shop answers.
    assert last_send(telegram).params["reply_markup"]["keyboard"] == CONTACT_BUTTON
    assert await unreachable_stack.shop_customer() is None
    await unreachable_stack.settle(CHAT)
    assert [e["event"] for e in await unreachable_stack.link_entries()] == ["unavailable"]


async def test_an_unknown_lookup_stops_the_start_with_one_line(
    redis_server: RedisServer, telegram: FakeTelegramServer
) -> None:
    settings = make_settings(
        REDIS_URL=redis_server.url,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        ACCOUNT_LINK_TOOL="lookup_customer",
    )
    with pytest.raises(StartupError) as raised:
        await build_application(settings)
    assert "ACCOUNT_LINK_TOOL=lookup_customer" in str(raised.value)
    assert "\n" not in str(raised.value)


async def test_a_contact_taken_by_long_polling_links_the_account(
    polling_stack: Stack, telegram: FakeTelegramServer
) -> None:
    await telegram.push(telegram.message_update(CHAT, "/link"))
    await telegram.wait_for_texts(CHAT, 1)
    await telegram.push(contact_update(telegram, OWN_PHONE, owner=CHAT))
    assert (await telegram.wait_for_texts(CHAT, 2))[-1] == customer_texts.LINK_DONE
    assert await polling_stack.shop_customer() == "100500"


async def test_without_a_lookup_link_is_unknown_and_a_contact_is_not_text(
    unlinked_stack: Stack, telegram: FakeTelegramServer
) -> None:
    assert unlinked_stack.app.features.get(AccountsFeature) is None
    await unlinked_stack.feed(telegram.message_update(CHAT, "/link"))
    await unlinked_stack.feed(contact_update(telegram, OWN_PHONE, owner=CHAT))
    assert await telegram.wait_for_texts(CHAT, 2) == [customer_texts.HELP, customer_texts.CONTACT]
    assert await unlinked_stack.shop_customer() is None


async def test_the_lookup_on_the_shops_own_mcp_server_links_the_account(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, tmp_path: Path
) -> None:
    """``ACCOUNT_LINK_TOOL=<server>:<tool>``: the bot itself calls the lookup on the shop's
    MCP server (the demo shop's, a real process); the tool is not offered to the model."""
    shop = DemoShopMcpProcess(redis_server.url, "linking", tmp_path)
    shop.start()
    try:
        server = {"name": "shop", "url": shop.url, "tools": ["get_support_hours"]}
        settings = make_settings(
            REDIS_URL=redis_server.url,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            REDIS_KEY_PREFIX="linking",
            AUDIT_STREAM=AUDIT,
            SESSION_LEASE_SECONDS=3,
            ACCOUNT_LINK_TOOL="shop:find_customer_by_phone",
            MCP_SERVERS=json.dumps([server]),
        )
        async with open_application(settings, llm=ScriptedClient(echo_responder)) as app:
            assert app.registry.mcp_tool("find_customer_by_phone") is None
            stack = Stack(app, bot, telegram)
            async with stack.running():
                await stack.feed(contact_update(telegram, OWN_PHONE, owner=CHAT))
                assert (await telegram.wait_for_texts(CHAT, 1))[-1] == customer_texts.LINK_DONE
                assert await stack.shop_customer() == "100500"
                await stack.feed(contact_update(telegram, "70000000000", owner=CHAT))
                assert (await telegram.wait_for_texts(CHAT, 2))[-1] != customer_texts.LINK_DONE
    finally:
        shop.stop()


async def test_a_lookup_on_a_server_mcp_servers_does_not_name_stops_the_start(
    redis_server: RedisServer, telegram: FakeTelegramServer
) -> None:
    settings = linking_settings(redis_server, telegram, lookup="crm:find_customer_by_phone")

    with pytest.raises(StartupError) as raised:
        await build_application(settings, llm=ScriptedClient(echo_responder))

    assert str(raised.value) == (
        "ACCOUNT_LINK_TOOL=crm:find_customer_by_phone: MCP_SERVERS has no server named crm"
    )
