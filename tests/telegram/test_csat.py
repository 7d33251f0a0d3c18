"""Customer satisfaction end to end: intake, the chat's queue, workers, real Redis, fake Bot API.

The question is due ``CSAT_AFTER_IDLE_MINUTES=0.001`` (60 ms) after the bot's
last answer; the CSAT sweeper of this test's loop queues it, a worker asks.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest
from aiogram import Bot

from bot import customer_texts
from bot.app import Application
from bot.csat.feature import CsatFeature
from bot.csat.schedule import claimed_score
from bot.csat.sweeper import CsatSweeper
from bot.handoff.feature import HandoffFeature
from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.storage.connection import text_of
from bot.storage.keys import telegram_conversation
from bot.testing.audit_entries import stream_entries
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application

pytestmark = pytest.mark.timeout(60)

CHAT = 9100
STAFF = -1009100000001


def _echo(
    messages_: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    return text_result(f"Ответ: {messages_[-1]['content']}")


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    """Wait (10 s at most) until ``check`` holds."""
    async with asyncio.timeout(10):
        while True:
            if await check():
                return
            await asyncio.sleep(0.01)


class Stack(TelegramStack):
    """Intake, a worker pool and (started on demand) the CSAT sweeper."""

    def __init__(self, app: Application, bot: Bot, telegram: FakeTelegramServer) -> None:
        super().__init__(app, bot, telegram=telegram, sweep_period_seconds=0.02)
        self.sweeping: asyncio.Task[None] | None = None

    async def ask(self, text: str) -> None:
        """A customer message, answered by the bot."""
        before = len(self.telegram.sent_texts(CHAT))
        await self.feed(self.telegram.message_update(CHAT, text))
        await self.telegram.wait_for(
            lambda: f"Ответ: {text}" in self.telegram.sent_texts(CHAT)[before:]
        )

    def start_sweeper(self) -> None:
        sweeper = self.side.sweeper("csat")
        assert sweeper is not None
        assert self.sweeping is None
        self.sweeping = asyncio.create_task(sweeper.run())

    async def stop_sweeper(self) -> None:
        sweeper = self.side.sweeper("csat")
        if sweeper is not None and self.sweeping is not None:
            sweeper.stop()
            await self.sweeping

    def questions(self) -> list[tuple[int, str, list[list[dict[str, Any]]]]]:
        return self.telegram.keyboards(CHAT)

    async def due(self) -> int:
        return int(await self.app.redis.zcard(self.app.keys.csat_due))

    async def wait_not_due(self) -> None:
        async def none_due() -> bool:
            return await self.due() == 0

        await until(none_due)

    async def questions_handled(self, count: int) -> None:
        """Wait until ``count`` question jobs were queued in the chat and its worker is done.

        A question job's update id is negative (its seen mark says it was queued); the
        chat's queue, outbox and lease all gone means the worker ran it to the end:
        a question it decided to ask was sent before then.
        """
        keys = self.app.keys.conversation(telegram_conversation(CHAT))
        redis = self.app.redis
        marks = keys.seen(0).removesuffix("0")

        async def handled() -> bool:
            seen = [text_of(key).removeprefix(marks) for key in await redis.keys(marks + "-*")]
            queued = sum(claimed_score(int(update_id)) is not None for update_id in seen)
            return queued >= count and await redis.exists(keys.queue, keys.outbox, keys.lease) == 0

        await until(handled)

    async def settle(self, chat_id: int = CHAT) -> None:
        """Every update queued so far handled (a /help barrier)."""
        await super().settle(chat_id)

    async def feedback(self) -> list[dict[str, str]]:
        entries = await stream_entries(self.app.redis, "csat:audit")
        return [entry for entry in entries if entry.get("type") == "feedback"]

    async def wait_feedback(self, count: int) -> list[dict[str, str]]:
        async def written() -> bool:
            return len(await self.feedback()) >= count

        await until(written)
        return await self.feedback()

    def edits(self, message_id: int) -> list[dict[str, Any]]:
        return [
            call.params
            for call in self.telegram.calls_of("editMessageText")
            if call.ok and call.params.get("message_id") == message_id
        ]


@contextlib.asynccontextmanager
async def _stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, **env: Any
) -> AsyncIterator[Stack]:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="csat",
        AUDIT_STREAM="csat:audit",
        SESSION_LEASE_SECONDS=3,
        CSAT_AFTER_IDLE_MINUTES=0.001,
        **env,
    )
    async with open_application(settings, llm=ScriptedClient(_echo)) as app:
        stack = Stack(app, bot, telegram)
        async with stack.running():
            try:
                yield stack
            finally:
                await stack.stop_sweeper()


@pytest.fixture
async def stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    async with _stack(redis_server, telegram, bot) as built:
        yield built


async def test_asked_after_the_idle_time_a_press_is_recorded_once_and_thanked(
    stack: Stack,
) -> None:
    stack.start_sweeper()
    await stack.ask("где мой заказ?")
    await stack.telegram.wait_for(lambda: len(stack.questions()) == 1)

    [(message_id, text, keyboard)] = stack.questions()
    assert text == customer_texts.CSAT_QUESTION
    assert [button["text"] for button in keyboard[0]] == ["1", "2", "3", "4", "5"]
    four, two = keyboard[0][3]["callback_data"], keyboard[0][1]["callback_data"]
    await stack.feed(stack.telegram.callback_update(CHAT, message_id, four))
    await stack.telegram.wait_for(lambda: bool(stack.edits(message_id)))
    await stack.feed(stack.telegram.callback_update(CHAT, message_id, two))
    await stack.settle()

    [edit] = stack.edits(message_id)
    assert edit["text"] == customer_texts.CSAT_THANKS
    assert "reply_markup" not in edit
    answers = [call.params.get("text") for call in stack.telegram.calls_of("answerCallbackQuery")]
    assert answers == [customer_texts.CSAT_THANKS, customer_texts.CSAT_ALREADY]
    asked, answered = await stack.wait_feedback(2)
    assert (asked["event"], answered["event"]) == ("asked", "answered")
    assert answered["score"] == "4"
    assert (answered["answered_by"], answered["turns"], answered["chat_id"]) == (
        "bot",
        "1",
        str(CHAT),
    )
    # Ids, categories and numbers: never the customer's or the bot's text.
    assert set(answered) == {"type", "chat_id", "turn_id", "event", "answered_by", "turns", "score"}
    assert not any("заказ" in value for entry in (asked, answered) for value in entry.values())
    assert len(await stack.feedback()) == 2
    samples = {
        (s.name, s.labels.get("score")): s.value
        for metric in stack.app.metrics.registry.collect()
        for s in metric.samples
    }
    assert samples[("support_feedback_total", "4")] == 1
    assert samples[("support_feedback_asked_total", None)] == 1


async def test_not_asked_again_within_the_interval(stack: Stack) -> None:
    stack.start_sweeper()
    await stack.ask("первый вопрос")
    await stack.telegram.wait_for(lambda: len(stack.questions()) == 1)
    await stack.ask("второй вопрос")
    # The second answer's question job ran, and decided not to ask.
    await stack.questions_handled(2)
    await stack.wait_not_due()

    assert len(stack.questions()) == 1
    assert [entry["event"] for entry in await stack.feedback()] == ["asked"]


async def test_a_press_on_an_unknown_question_changes_nothing(stack: Stack) -> None:
    await stack.feed(stack.telegram.callback_update(CHAT, 77, "csat:ABCDEFGHJK:5"))
    await stack.settle()

    answers = [call.params.get("text") for call in stack.telegram.calls_of("answerCallbackQuery")]
    assert answers == [customer_texts.CSAT_CLOSED]
    assert stack.telegram.calls_of("editMessageText") == []
    assert await stack.feedback() == []


async def test_never_asked_with_csat_off(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> None:
    async with _stack(redis_server, telegram, bot, CSAT="off") as stack:
        assert stack.app.features.get(CsatFeature) is None
        assert stack.side.sweeper("csat") is None
        await stack.ask("привет")
        await stack.settle()
        assert await stack.app.redis.zcard(stack.app.keys.csat_due) == 0
        assert stack.questions() == []


async def test_never_asked_a_chat_that_blocked_the_bot(stack: Stack) -> None:
    await stack.ask("привет")
    await stack.feed(stack.telegram.member_update(CHAT, "member", "kicked"))
    await until(lambda: stack.app.blocked.is_blocked(CHAT))
    stack.start_sweeper()
    await stack.questions_handled(1)
    await stack.wait_not_due()

    assert stack.questions() == []
    assert await stack.feedback() == []


async def test_a_403_on_the_question_marks_the_chat_blocked(stack: Stack) -> None:
    stack.telegram.fail_next(
        "sendMessage",
        403,
        "Forbidden: bot was blocked by the user",
        when=lambda params: "reply_markup" in params,
    )
    stack.start_sweeper()
    await stack.ask("привет")
    await until(lambda: stack.app.blocked.is_blocked(CHAT))

    assert stack.questions() == []
    assert await stack.feedback() == []


async def test_two_sweepers_on_one_redis_queue_one_question(stack: Stack) -> None:
    csat = stack.app.features.get(CsatFeature)
    assert csat is not None
    feedback = csat.schedule
    chats = [telegram_conversation(9200 + n) for n in range(20)]
    for key in chats:
        await stack.app.redis.zadd(stack.app.keys.csat_due, {key: 0})
    first = CsatSweeper(schedule=feedback, intake=stack.app.intake, period_seconds=0.02)
    second = CsatSweeper(schedule=feedback, intake=stack.app.intake, period_seconds=0.02)

    claimed = await asyncio.gather(*(s.sweep() for s in (first, second, first, second)))

    assert sum(claimed) == len(chats)
    # One question job per chat was accepted (intake marks each update id it queued).
    seen = [
        len(await stack.app.redis.keys(stack.app.keys.conversation(key).seen(0)[:-1] + "*"))
        for key in chats
    ]
    assert seen == [1] * len(chats)
    await stack.telegram.wait_for(
        lambda: all(len(stack.telegram.keyboards(9200 + n)) == 1 for n in range(len(chats)))
    )


async def test_never_asked_during_a_handoff_and_asked_when_it_closes(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> None:
    telegram.make_forum(STAFF)
    async with _stack(redis_server, telegram, bot, STAFF_CHAT_ID=STAFF) as stack:
        feature = stack.app.features.get(HandoffFeature)
        assert feature is not None
        handoff = feature.service
        await stack.ask("вопрос боту")
        await stack.feed(stack.telegram.message_update(CHAT, "/operator"))
        await stack.telegram.wait_for(
            lambda: any(
                t.startswith(customer_texts.OPERATOR_WAITING)
                for t in stack.telegram.sent_texts(CHAT)
            )
        )
        stack.start_sweeper()
        await stack.questions_handled(1)
        await stack.wait_not_due()
        assert stack.questions() == []

        conversation = telegram_conversation(CHAT)

        async def topic_opened() -> bool:
            return await handoff.topics.topic_of(conversation) is not None

        await until(topic_opened)
        thread = await handoff.topics.topic_of(conversation)
        assert thread is not None
        await stack.feed(stack.telegram.topic_message_update(STAFF, thread, "/close"))
        await stack.telegram.wait_for(lambda: len(stack.questions()) == 1)

        [asked] = await stack.wait_feedback(1)
        assert (asked["event"], asked["answered_by"]) == ("asked", "bot_then_person")
