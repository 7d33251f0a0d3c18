"""Human handoff end to end: intake, the chat's queue, workers, a real Redis, the fake Bot API.

Customer and staff updates both go through the real intake (staff topic
messages are mapped to their customer's queue there) and a worker pool of
this test's loop; the staff chat is a forum of the fake Bot API, so topics,
``copyMessage`` and "message thread not found" behave as Telegram's do.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiogram import Bot
from redis.asyncio.client import Monitor

from bot import customer_texts
from bot.app import Application
from bot.customer_texts import HANDOFF_IDLE_NOTE as IDLE_NOTE
from bot.engine.history import STAFF_NOTE
from bot.handoff.feature import HandoffFeature
from bot.handoff.service import CLOSED_TOPIC_NOTE, HandoffService
from bot.handoff.turns import IDLE_TOPIC_NOTE
from bot.llm.errors import LLMTimeoutError
from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.queue.admission import IntakeVerdict
from bot.sessions.handoff_machine import utc_now
from bot.settings import DEMO_SHOP_DATA
from bot.storage.keys import RedisKeys, telegram_conversation
from bot.telegram.staff_desk import NOT_DELIVERED
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result, tool_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from tools.shop_data import ShopData
from tools.support_hours import closed_note

pytestmark = pytest.mark.timeout(60)

STAFF = -1001234567890
CUSTOMER = 701
OTHER_CUSTOMER = 702
ASK_HUMAN = "Позовите, пожалуйста, живого человека"
BROKEN = "Этот вопрос ломает модель"


def _responder(
    messages_: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    """Echoes the question; asked for a person, calls ``request_human_agent`` first."""
    last = messages_[-1]
    if last["content"] == BROKEN:
        raise LLMTimeoutError("the model timed out")
    if last["role"] == "tool":
        return text_result("Я позвал сотрудника поддержки.")
    if last["content"] == ASK_HUMAN and tools:
        return tool_result("request_human_agent", {"reason": "customer_asked"})
    return text_result(f"Ответ: {last['content']}")


class Desk(TelegramStack):
    """The bot with handoff on, fed like the webhook feeds it."""

    def __init__(
        self,
        app: Application,
        bot: Bot,
        telegram: FakeTelegramServer,
        model: ScriptedClient,
        staff_chat: int = STAFF,
        *,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        super().__init__(app, bot, telegram=telegram)
        # The application's support-hours clock.
        self.clock = clock
        feature = app.features.get(HandoffFeature)
        assert feature is not None
        self.handoff: HandoffService = feature.service
        self.model = model
        self.staff_chat = staff_chat

    async def customer(self, text: str | None, chat_id: int = CUSTOMER, **kwargs: Any) -> int:
        update = self.telegram.message_update(chat_id, text, **kwargs)
        await self.feed(update)
        return int(update["message"]["message_id"])

    async def staff(
        self, thread: int, text: str | None, *, chat_id: int | None = None, **kwargs: Any
    ) -> int:
        chat_id = self.staff_chat if chat_id is None else chat_id
        update = self.telegram.topic_message_update(chat_id, thread, text, **kwargs)
        await self.feed(update)
        return int(update["message"]["message_id"])

    async def topic_of(self, chat_id: int = CUSTOMER) -> int:
        topic = await self.handoff.topics.topic_of(telegram_conversation(chat_id))
        assert topic is not None
        return topic

    async def hand_off(self, chat_id: int = CUSTOMER) -> int:
        """``/operator``; returns the topic once its header is posted."""
        waiting = self._waiting_notes(chat_id)
        await self.customer("/operator", chat_id)
        await self.telegram.wait_for(lambda: self._waiting_notes(chat_id) > waiting)
        staff = self.staff_chat
        headers = sum(t.startswith("Клиент:") for t in self.telegram.sent_texts(staff))
        await self.telegram.wait_for(
            lambda: sum(t.startswith("Клиент:") for t in self.telegram.sent_texts(staff)) > headers
        )
        thread = await self.topic_of(chat_id)
        await self.telegram.wait_for(
            lambda: any(t.startswith("Клиент:") for t in self.telegram.topic_texts(staff, thread))
        )
        return thread

    def _waiting_notes(self, chat_id: int) -> int:
        # Outside support hours the hours follow the note.
        texts = self.telegram.sent_texts(chat_id)
        return sum(text.startswith(customer_texts.OPERATOR_WAITING) for text in texts)

    async def audit(self) -> list[dict[str, str]]:
        rows: list[tuple[bytes, dict[bytes, bytes]]] = await self.app.redis.xrange(  # type: ignore[assignment]
            "handoff:audit"
        )
        return [
            {k.decode(): v.decode() for k, v in fields.items()}
            for _, fields in rows
            if fields.get(b"type") == b"handoff"
        ]


async def _desk(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    bot: Bot,
    *,
    sweep: bool = False,
    staff: int = STAFF,
    flush: bool = True,
    clock: Callable[[], datetime] = utc_now,
    **env: Any,
) -> AsyncIterator[Desk]:
    telegram.make_forum(staff)
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="handoff",
        AUDIT_STREAM="handoff:audit",
        SESSION_LEASE_SECONDS=3,
        STAFF_CHAT_ID=staff,
        HANDOFF_AFTER_FAILED_TURNS=2,
        **env,
    )
    model = ScriptedClient(_responder)
    async with open_application(settings, llm=model, flush=flush, clock=clock) as app:
        desk = Desk(app, bot, telegram, model, staff, clock=clock)
        async with desk.running(sweep=sweep):
            yield desk


@pytest.fixture
async def desk(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Desk]:
    async for built in _desk(redis_server, telegram, bot):
        yield built


def _moment_when_support_is(open_now: bool) -> datetime:
    """A fixed moment at which support is open (or closed), and still is an hour later."""
    hours = ShopData.load(DEMO_SHOP_DATA).support_hours
    # A week from a fixed Monday, hour by hour: every weekday's hours are in it.
    monday = datetime(2026, 11, 30, tzinfo=UTC)
    for step in range(7 * 24):
        moment = monday + timedelta(hours=step)
        if all(
            (closed_note(hours, at) is None) == open_now
            for at in (moment, moment + timedelta(hours=1))
        ):
            return moment
    raise AssertionError(f"support is {'open' if open_now else 'closed'} at no hour of a week")


@pytest.fixture(params=["open", "closed"])
async def hours_desk(
    request: pytest.FixtureRequest,
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    bot: Bot,
) -> AsyncIterator[Desk]:
    """A desk whose support is open, or closed, by its clock (fixed at such a moment)."""
    moment = _moment_when_support_is(request.param == "open")
    async for built in _desk(redis_server, telegram, bot, clock=lambda: moment):
        note = built.handoff.waiting_text("")
        assert note.startswith("\n\nСейчас поддержка не работает") == (request.param == "closed")
        assert (note == "") == (request.param == "open")
        yield built


@pytest.fixture
async def quick_desk(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Desk]:
    """Handoffs go idle after 60 ms (noticed on the next message: no sweeper)."""
    async for built in _desk(redis_server, telegram, bot, HANDOFF_IDLE_MINUTES=0.001):
        yield built


@pytest.fixture
async def swept_desk(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Desk]:
    """Handoffs go idle after 600 ms, and the sweeper ends them."""
    async for built in _desk(redis_server, telegram, bot, sweep=True, HANDOFF_IDLE_MINUTES=0.01):
        yield built


async def test_operator_opens_a_topic_with_the_header_and_mirrors_the_waiting_conversation(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    await desk.customer("Где мой заказ 12345?", user_id=CUSTOMER)
    await telegram.wait_for(lambda: "Ответ: Где мой заказ 12345?" in telegram.sent_texts(CUSTOMER))

    thread = await desk.hand_off()

    assert telegram.topics(STAFF)[thread].startswith("Покупатель · ")
    header = telegram.topic_texts(STAFF, thread)[0]
    assert "Клиент: Покупатель" in header
    assert "Где мой заказ 12345?" in header
    assert "Ответ: Где мой заказ 12345?" in header
    assert "Причина: command" in header
    # Staff start from the analysis (the offline analyst here: the scripted chat model
    # has no Structured Outputs), and the analysis is audited without its text.
    assert "Анализ обращения:" in header
    assert "Категория: order_status" in header
    assert "Кратко: Клиент обратился по теме «статус заказа». Номер заказа: 12345." in header
    # Waiting: the bot still answers, and staff see both sides live.
    message_id = await desk.customer("А когда привезут?")
    await telegram.wait_for(lambda: "Ответ: А когда привезут?" in telegram.sent_texts(CUSTOMER))
    await telegram.wait_for(
        lambda: "Ответ: А когда привезут?" in telegram.topic_texts(STAFF, thread)
    )
    copies = telegram.copies(STAFF, thread)
    assert [(c["from_chat_id"], c["message_id"]) for c in copies] == [(CUSTOMER, message_id)]
    opened = [e for e in await desk.audit() if e["event"] == "opened"]
    assert [(e["trigger"], e["chat_id"]) for e in opened] == [("command", str(CUSTOMER))]


async def test_staff_take_over_the_bot_is_silent_and_close_gives_the_bot_the_human_exchange(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    thread = await desk.hand_off()
    staff_message = await desk.staff(thread, "Здравствуйте, я Анна. Верну деньги до пятницы.")
    await telegram.wait_for(lambda: len(telegram.copies(CUSTOMER)) == 1)
    copy = telegram.copies(CUSTOMER)[0]
    assert (copy["from_chat_id"], copy["message_id"]) == (STAFF, staff_message)

    requests_before = len(desk.model.requests)
    texts_before = telegram.sent_texts(CUSTOMER)
    text_id = await desk.customer("Спасибо, жду")
    photo_id = await desk.customer(
        None, extra={"photo": [{"file_id": "p", "file_unique_id": "u", "width": 1, "height": 1}]}
    )
    await telegram.wait_for(lambda: len(telegram.copies(STAFF, thread)) == 2)
    assert [c["message_id"] for c in telegram.copies(STAFF, thread)] == [text_id, photo_id]
    # Human state: no model call, nothing sent to the customer, no typing indicator.
    assert len(desk.model.requests) == requests_before
    assert telegram.sent_texts(CUSTOMER) == texts_before
    assert not [
        c for c in telegram.calls_of("sendChatAction") if c.params.get("chat_id") == CUSTOMER
    ]

    await desk.staff(thread, "/close")
    await telegram.wait_for(lambda: IDLE_NOTE in telegram.sent_texts(CUSTOMER))
    await telegram.wait_for(lambda: CLOSED_TOPIC_NOTE in telegram.topic_texts(STAFF, thread))

    await desk.customer("Что мне обещали?")
    await telegram.wait_for(lambda: "Ответ: Что мне обещали?" in telegram.sent_texts(CUSTOMER))
    request = desk.model.requests[-1][0]
    # The person's words are marked as theirs, not the bot's; the customer's are questions.
    assert {
        "role": "assistant",
        "content": f"{STAFF_NOTE}\nЗдравствуйте, я Анна. Верну деньги до пятницы.",
    } in request
    assert {"role": "user", "content": "Спасибо, жду"} in request
    events = [(e["event"], e["closed_by"]) for e in await desk.audit()]
    assert events == [("opened", ""), ("first_reply", ""), ("closed", "staff")]
    first_reply = next(e for e in await desk.audit() if e["event"] == "first_reply")
    assert float(first_reply["wait_ms"]) >= 0


async def test_the_model_calling_request_human_agent_hands_off(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    await desk.customer(ASK_HUMAN)
    await telegram.wait_for(
        lambda: "Я позвал сотрудника поддержки." in telegram.sent_texts(CUSTOMER)
    )
    await telegram.wait_for(lambda: bool(telegram.sent_texts(STAFF)))
    thread = await desk.topic_of()
    assert "Причина: tool/customer_asked" in telegram.topic_texts(STAFF, thread)[0]
    opened = [e for e in await desk.audit() if e["event"] == "opened"]
    assert [(e["trigger"], e["reason"]) for e in opened] == [("tool", "customer_asked")]
    # Every handoff has one of the seven reasons: in the topic and the audit.
    assert [e["handoff_reason"] for e in opened] == ["customer_asked"]
    assert "Причина передачи: клиент попросил человека" in telegram.topic_texts(STAFF, thread)[0]


async def test_a_deleted_topic_is_created_again_on_the_next_handoff(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    first = await desk.hand_off()
    await desk.staff(first, "/close")
    await telegram.wait_for(lambda: IDLE_NOTE in telegram.sent_texts(CUSTOMER))
    telegram.delete_topic(STAFF, first)

    second = await desk.hand_off()

    assert second != first
    assert second in telegram.topics(STAFF)
    assert telegram.topic_texts(STAFF, second)[0].startswith("Клиент:")
    # The old topic maps to nobody: a late message there is not relayed.
    assert await desk.handoff.topics.conversation_of(first) is None


async def test_only_a_staff_member_in_the_customers_own_topic_is_relayed(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    mine = await desk.hand_off(CUSTOMER)
    other = await desk.hand_off(OTHER_CUSTOMER)
    telegram.non_members.add(666)

    verdicts = [
        await desk.feed(telegram.topic_message_update(-1009999, mine, "из чужой группы")),
        await desk.feed(telegram.topic_message_update(STAFF, 123456, "из темы без клиента")),
        await desk.feed(telegram.topic_message_update(STAFF, mine, "от бота", is_bot=True)),
        await desk.feed(telegram.topic_message_update(STAFF, mine, "не участник", user_id=666)),
        await desk.feed(
            telegram.topic_message_update(STAFF, mine, extra={"forum_topic_edited": {"name": "x"}})
        ),
        await desk.feed(telegram.message_update(STAFF, "из общего чата", chat_type="supergroup")),
    ]
    # Each is refused at intake, or queued in the topic's customer's chat (the non-member's:
    # membership is checked by the worker, with the chat in hand).
    assert verdicts == [None, None, None, IntakeVerdict.QUEUED, None, None]
    # Barriers: the customer's own chat queue runs its jobs in order, so once a member's
    # message in its topic is relayed, every update queued before it there was handled.
    barrier = await desk.staff(mine, "от сотрудника")
    relayed = await desk.staff(other, "для второго клиента")
    await telegram.wait_for(lambda: len(telegram.copies(CUSTOMER)) >= 1)
    await telegram.wait_for(lambda: len(telegram.copies(OTHER_CUSTOMER)) >= 1)

    assert [c["message_id"] for c in telegram.copies(CUSTOMER)] == [barrier]
    assert [c["message_id"] for c in telegram.copies(OTHER_CUSTOMER)] == [relayed]


async def test_a_relay_to_a_customer_who_blocked_the_bot_is_reported_in_the_topic(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    thread = await desk.hand_off()
    telegram.fail_next("copyMessage", 403, "Forbidden: bot was blocked by the user")
    await desk.staff(thread, "Вы здесь?")
    await telegram.wait_for(lambda: NOT_DELIVERED in telegram.topic_texts(STAFF, thread))


@pytest.fixture
async def limited_desk(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Desk]:
    """Two model turns a day per customer (and no flood control in the way)."""
    async for built in _desk(redis_server, telegram, bot, DAILY_TURN_LIMIT=2, FLOOD_BURST=50):
        yield built


async def test_messages_to_a_person_do_not_use_up_the_daily_model_turns(
    limited_desk: Desk, telegram: FakeTelegramServer
) -> None:
    """The daily limit caps model turns; a customer talking to staff is relayed every time."""
    desk = limited_desk
    await desk.customer("Первый вопрос боту")
    await telegram.wait_for(lambda: "Ответ: Первый вопрос боту" in telegram.sent_texts(CUSTOMER))
    thread = await desk.hand_off()
    sent = [await desk.customer(f"Сообщение сотруднику {n}") for n in range(4)]
    await telegram.wait_for(lambda: len(telegram.copies(STAFF, thread)) == len(sent))
    assert [c["message_id"] for c in telegram.copies(STAFF, thread)] == sent
    assert not [
        t for t in telegram.sent_texts(CUSTOMER) if t.startswith(customer_texts.DAILY_LIMIT)
    ]

    await desk.staff(thread, "/close")
    await telegram.wait_for(lambda: IDLE_NOTE in telegram.sent_texts(CUSTOMER))
    # Back with the bot: its second turn of the day is answered, the third is not.
    await desk.customer("Второй вопрос боту")
    await telegram.wait_for(lambda: "Ответ: Второй вопрос боту" in telegram.sent_texts(CUSTOMER))
    await desk.customer("Третий вопрос боту")
    await telegram.wait_for(
        lambda: any(t.startswith(customer_texts.DAILY_LIMIT) for t in telegram.sent_texts(CUSTOMER))
    )
    assert "Ответ: Третий вопрос боту" not in telegram.sent_texts(CUSTOMER)


async def test_failed_turns_in_a_row_call_a_person_with_their_incident_codes(
    hours_desk: Desk, telegram: FakeTelegramServer
) -> None:
    """Open or closed: the call follows the failure's own text (closed: then the hours)."""
    desk = hours_desk
    await desk.customer(BROKEN)
    await telegram.wait_for(lambda: len(telegram.sent_texts(CUSTOMER)) == 1)
    assert not telegram.topics(STAFF)
    await desk.customer("Всё ещё тут?")
    await telegram.wait_for(lambda: len(telegram.sent_texts(CUSTOMER)) == 2)
    await desk.customer(BROKEN)
    await desk.customer(BROKEN)
    await telegram.wait_for(lambda: bool(telegram.sent_texts(STAFF)))

    texts = telegram.sent_texts(CUSTOMER)
    # An answered turn in between: the second failure alone is not "in a row".
    assert customer_texts.FAILED_HANDOFF not in texts[2]
    failure, called, hours = texts[3].partition(f"\n\n{customer_texts.FAILED_HANDOFF}")
    assert called
    assert "Код обращения" in failure
    # Nothing more while support is open; the hours by the desk's clock while it is closed.
    note = closed_note(ShopData.load(DEMO_SHOP_DATA).support_hours, desk.clock())
    assert hours == (f"\n\n{note}" if note else "")
    header = telegram.topic_texts(STAFF, await desk.topic_of())[0]
    assert "Причина: failed_turns" in header
    assert "Причина передачи: несколько сбоев подряд" in header
    opened = [e for e in await desk.audit() if e["event"] == "opened"]
    assert [e["handoff_reason"] for e in opened] == ["repeated_failures"]
    codes = await desk.handoff.topics.recent_failures(telegram_conversation(CUSTOMER))
    assert len(codes) == 3
    assert all(code in header for code in codes)


async def test_an_answered_turn_ends_the_failure_streak_inside_its_commit(
    desk: Desk, telegram: FakeTelegramServer, redis_server: RedisServer
) -> None:
    """With handoff on, an answered turn costs no Redis command of its own for the streak."""
    await desk.customer(BROKEN)
    await telegram.wait_for(lambda: len(telegram.sent_texts(CUSTOMER)) == 1)
    streak = RedisKeys("handoff").conversation(telegram_conversation(CUSTOMER)).failed_streak
    assert await desk.app.redis.exists(streak) == 1
    watcher = aioredis.Redis.from_url(redis_server.url)
    seen: list[tuple[str, str]] = []
    deleted = asyncio.Event()

    async def watch(monitor: Monitor) -> None:
        while True:
            command = await monitor.next_command()
            seen.append((command["client_type"], command["command"]))
            if seen[-1] == ("lua", f"DEL {streak}"):
                deleted.set()

    try:
        async with watcher.monitor() as monitor:
            watching = asyncio.create_task(watch(monitor))
            await desk.customer("Всё ещё тут?")
            await telegram.wait_for(lambda: len(telegram.sent_texts(CUSTOMER)) == 2)
            # MONITOR's lines may trail the turn a little on a busy machine.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(deleted.wait(), timeout=5)
            await asyncio.sleep(0.1)
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching
    finally:
        await watcher.aclose()

    assert await desk.app.redis.exists(streak) == 0
    # Only a script deletes it; the bot sends no command of its own for the streak.
    assert ("lua", f"DEL {streak}") in seen, seen
    own = [command for client, command in seen if client != "lua" and streak in command]
    assert all(command.startswith("EVALSHA ") for command in own), own


async def test_an_idle_handoff_returns_to_the_bot_with_a_note(
    quick_desk: Desk, telegram: FakeTelegramServer
) -> None:
    thread = await quick_desk.hand_off()
    await quick_desk.staff(thread, "Сейчас посмотрю")
    await telegram.wait_for(lambda: len(telegram.copies(CUSTOMER)) == 1)
    await asyncio.sleep(0.2)

    await quick_desk.customer("Вы ещё здесь?")

    await telegram.wait_for(
        lambda: f"{IDLE_NOTE}\n\nОтвет: Вы ещё здесь?" in telegram.sent_texts(CUSTOMER)
    )
    await telegram.wait_for(lambda: IDLE_TOPIC_NOTE in telegram.topic_texts(STAFF, thread))
    # (On a slow machine the wait before staff wrote may have gone idle too: also "idle".)
    closed = [e for e in await quick_desk.audit() if e["event"] == "closed"]
    assert closed
    assert {e["closed_by"] for e in closed} == {"idle"}


async def test_the_sweeper_ends_an_idle_handoff_without_a_customer_message(
    swept_desk: Desk, telegram: FakeTelegramServer
) -> None:
    thread = await swept_desk.hand_off()
    await swept_desk.staff(thread, "Сейчас посмотрю")
    await telegram.wait_for(lambda: len(telegram.copies(CUSTOMER)) == 1)
    # (On a slow machine the sweeper may also have ended the wait before staff wrote.)
    notes = telegram.sent_texts(CUSTOMER).count(IDLE_NOTE)

    await telegram.wait_for(lambda: telegram.sent_texts(CUSTOMER).count(IDLE_NOTE) > notes)
    await telegram.wait_for(lambda: IDLE_TOPIC_NOTE in telegram.topic_texts(STAFF, thread))

    closed = [e for e in await swept_desk.audit() if e["event"] == "closed"]
    assert closed
    assert {e["closed_by"] for e in closed} == {"idle"}
    assert await swept_desk.handoff.topics.idle(2**50) == []
    # Back with the bot: the next question is answered by the model.
    await swept_desk.customer("Вопрос боту")
    await telegram.wait_for(lambda: "Ответ: Вопрос боту" in telegram.sent_texts(CUSTOMER))


async def test_a_new_staff_chat_never_mixes_customers_whose_topics_share_a_thread_id(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> None:
    """Thread ids are per group: A's old topic 5 must not be B's topic 5 in the new group."""
    old_group, new_group = STAFF, -1009876543210
    telegram.make_forum(old_group, first_thread_id=5)
    telegram.make_forum(new_group, first_thread_id=5)
    async for old_desk in _desk(redis_server, telegram, bot, staff=old_group):
        assert await old_desk.hand_off(CUSTOMER) == 5
        await old_desk.staff(5, "/close")
        await telegram.wait_for(lambda: IDLE_NOTE in telegram.sent_texts(CUSTOMER))

    # STAFF_CHAT_ID changed; Redis kept everything.
    async for new_desk in _desk(redis_server, telegram, bot, staff=new_group, flush=False):
        await _two_customers_in_a_new_group(new_desk, telegram, new_group)


async def _two_customers_in_a_new_group(
    desk: Desk, telegram: FakeTelegramServer, group: int
) -> None:
    """B gets topic 5 of ``group``; A (topic 5 of the old group) must get a topic of its own."""
    assert await desk.hand_off(OTHER_CUSTOMER) == 5
    mine = await desk.hand_off(CUSTOMER)
    question = await desk.customer("Номер карты 4111 1111 1111 1111, где возврат?")
    await telegram.wait_for(lambda: len(telegram.copies(group, mine)) == 1)
    await telegram.wait_for(
        lambda: any("где возврат?" in t for t in telegram.topic_texts(group, mine))
    )

    assert mine != 5
    assert [c["message_id"] for c in telegram.copies(group, mine)] == [question]
    # B's topic holds B's header and nothing of A's.
    assert [c["from_chat_id"] for c in telegram.copies(group, 5)] == []
    assert len(telegram.topic_texts(group, 5)) == 1
    assert not any("где возврат" in t for t in telegram.topic_texts(group, 5))

    # A staff reply in B's topic goes to B only; one in A's topic to A only.
    for_b = await desk.staff(5, "Ответ клиенту B")
    for_a = await desk.staff(mine, "Ответ клиенту A")
    await telegram.wait_for(lambda: len(telegram.copies(OTHER_CUSTOMER)) == 1)
    await telegram.wait_for(lambda: len(telegram.copies(CUSTOMER)) == 1)
    assert [c["message_id"] for c in telegram.copies(OTHER_CUSTOMER)] == [for_b]
    assert [c["message_id"] for c in telegram.copies(CUSTOMER)] == [for_a]
    topics = desk.handoff.topics
    assert await topics.conversation_of(5) == telegram_conversation(OTHER_CUSTOMER)
    assert await topics.conversation_of(mine) == telegram_conversation(CUSTOMER)


async def test_a_429_on_the_staff_desks_calls_is_waited_and_nothing_is_doubled(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    def to_staff(params: dict[str, Any]) -> bool:
        return str(params.get("chat_id")) == str(STAFF)

    telegram.fail_next("createForumTopic", 429, "Too Many Requests: retry after 1", retry_after=1)
    telegram.fail_next(
        "sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1, when=to_staff
    )
    telegram.fail_next(
        "copyMessage", 429, "Too Many Requests: retry after 1", retry_after=1, when=to_staff
    )

    thread = await desk.hand_off()
    message_id = await desk.customer("А когда привезут?")
    await telegram.wait_for(lambda: bool(telegram.copies(STAFF, thread)))

    # Each call was retried after the 429, and each made its one topic, header, copy.
    assert [call.status for call in telegram.calls_of("createForumTopic")] == [429, 200]
    assert list(telegram.topics(STAFF)) == [thread]
    staff_sends = [
        call.status for call in telegram.calls_of("sendMessage") if to_staff(call.params)
    ]
    assert staff_sends[:2] == [429, 200]
    headers = [t for t in telegram.topic_texts(STAFF, thread) if t.startswith("Клиент:")]
    assert len(headers) == 1
    copies = [call.status for call in telegram.calls_of("copyMessage") if to_staff(call.params)]
    assert copies == [429, 200]
    assert [c["message_id"] for c in telegram.copies(STAFF, thread)] == [message_id]
