"""Intake's decisions travel in the queued job: the worker does not take them again.

The whole Telegram side runs in this loop (intake, the real dispatcher, the
worker's job runner, a real Redis, the fake Bot API). Whether a message is
meant for the bot (``AddressedToBot``) is decided at intake and carried in the
job (``QueuedJob.addressed``); a job an older version queued (no such field)
is still decided by the worker's router.
"""

from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any, cast

import pytest
from aiogram import Bot
from aiogram.filters.callback_data import CallbackData
from aiogram.types import Message

from bot.actions.buttons import ActionPress
from bot.actions.presses import CardPresses, Press, Verdict
from bot.customer_texts import ACTION_STALE_ANSWER
from bot.llm.types import LLMResult, ToolChoice, ToolDefinition
from bot.llm.types import Message as ModelMessage
from bot.queue.job_results import JobContext
from bot.queue.jobs import QueuedJob
from bot.sessions.models import ConversationSession
from bot.telegram.filters import AddressedToBot
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application

pytestmark = pytest.mark.timeout(60)

GROUP = -3_051


def _responder(
    messages_: Sequence[ModelMessage], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    return text_result(f"Ответ: {messages_[-1]['content']}")


@pytest.fixture
async def stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[TelegramStack]:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="decisions",
        AUDIT_STREAM="decisions:audit",
        TELEGRAM_ALLOW_GROUPS=True,
    )
    async with open_application(settings, llm=ScriptedClient(_responder)) as app:
        built = TelegramStack(app, bot, telegram=telegram)
        # No workers of their own: each job is run by ``drain``, one at a time.
        async with built.running(work=False):
            yield built


def _mention(telegram: FakeTelegramServer, text: str) -> dict[str, Any]:
    mention = f"@{telegram.bot_username}"
    update = telegram.message_update(GROUP, f"{mention} {text}", user_id=5, chat_type="group")
    update["message"]["entities"] = [{"type": "mention", "offset": 0, "length": len(mention)}]
    return update


async def test_a_group_message_is_judged_addressed_once_and_the_job_carries_it(
    stack: TelegramStack, telegram: FakeTelegramServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    decided: list[int] = []
    original = AddressedToBot.decide

    async def counted(self: AddressedToBot, message: Message, bot: Bot) -> bool:
        decided.append(message.message_id)
        return await original(self, message, bot)

    monkeypatch.setattr(AddressedToBot, "decide", counted)
    update = _mention(telegram, "где заказ 1234?")

    await stack.feed(update)

    queue = stack.app.keys.conversation(f"tg:{GROUP}").queue
    (raw,) = await stack.app.redis.lrange(queue, 0, -1)
    assert QueuedJob.model_validate_json(raw).addressed is True
    await stack.drain(GROUP)
    assert "Ответ: где заказ 1234?" in telegram.sent_texts(GROUP)
    # Intake decided; the worker's router read the job (before: decided again there).
    assert decided == [update["message"]["message_id"]]


def _context(telegram: FakeTelegramServer, update: dict[str, Any], **job: Any) -> JobContext:
    return JobContext(
        job=QueuedJob(
            job_id="1", update_id=1, turn_id="T", enqueued_ms=0, chat_id=GROUP, update=update, **job
        ),
        job_raw="",
        token="t",
        queue_ms=None,
        session_version="",
        session_data="",
    )


async def test_a_job_queued_before_the_decision_travelled_is_still_judged_by_the_router(
    telegram: FakeTelegramServer, bot: Bot
) -> None:
    # A job an older version stored: no ``addressed`` field; read, it is undecided.
    older = QueuedJob.model_validate_json(
        '{"job_id":"1","update_id":1,"turn_id":"T","enqueued_ms":0,"chat_id":-3051,'
        '"notice":null,"update":{}}'
    )
    assert older.addressed is None
    chatter = telegram.message_update(GROUP, "просто болтаем", user_id=5, chat_type="group")
    message = Message.model_validate(chatter["message"], context={"bot": bot})
    addressed = AddressedToBot(allow_groups=True)

    # Undecided: the router judges the message itself (a group's chatter is not ours).
    assert await addressed(message, bot, job=_context(telegram, chatter)) is False
    assert await addressed(message, bot) is False
    # Decided at intake: the job's word is taken.
    assert await addressed(message, bot, job=_context(telegram, chatter, addressed=True)) is True


CHAT = 3_052
ACTION = "gq9nzjuu9rusv4be"


async def test_a_card_press_is_read_once_a_process_and_judged_by_one_function_over_one_value(
    stack: TelegramStack, telegram: FakeTelegramServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Intake reads the press and predicts its verdict; the worker reads it once for every
    router, and its verdict is the same function over the same ``Press`` value."""
    unpacked: list[str] = []
    unpack = CallbackData.unpack.__func__  # type: ignore[attr-defined]

    def counted(cls: type[CallbackData], value: str) -> CallbackData:
        unpacked.append(cls.__name__)
        return cast(CallbackData, unpack(cls, value))

    monkeypatch.setattr(CallbackData, "unpack", classmethod(counted))
    judged: list[tuple[Press, Verdict]] = []
    verdict = CardPresses.verdict

    def watched(
        self: CardPresses,
        session: ConversationSession | None,
        press: Press,
        at: datetime | None = None,
    ) -> Verdict:
        judged.append((press, verdict(self, session, press, at)))
        return judged[-1][1]

    monkeypatch.setattr(CardPresses, "verdict", watched)

    # A press on a card whose action is gone (no pending action): intake says so at once.
    await stack.feed(telegram.callback_update(CHAT, 7, ActionPress.of(ACTION, "yes").pack()))
    await stack.drain(CHAT)

    answers = [call.params.get("text") for call in telegram.calls_of("answerCallbackQuery")]
    assert answers == [ACTION_STALE_ANSWER]
    # Once at intake, once in the worker (before: once more per button router tried).
    assert unpacked == ["ActionPress", "ActionPress"]
    # The prediction and the worker's verdict: one function, one value, one answer.
    (intake_press, predicted), (worker_press, decided) = judged
    assert intake_press == worker_press
    assert predicted == decided == Verdict.STALE
