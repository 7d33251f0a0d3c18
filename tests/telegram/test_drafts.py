"""Answers shown as drafts while they are written: the whole bot over real sockets.

The real runner polls the fake Bot API in this process, the model is the real
``AsyncOpenAI`` client streaming from the scripted server (a slow trickle of
SSE events), sessions and the outbox live in the suite's redis-server. The fake
records every ``sendMessageDraft`` with the time it arrived.
"""

import itertools
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis

from bot.sessions.models import ConversationSession
from bot.testing.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    cut_stream,
    delay,
    text_answer,
    tool_call_answer,
    trickle,
)
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer
from bot.testing.settings import stack_settings
from bot.testing.telegram_server import ApiCall, FakeTelegramServer

PREFIX = "drafts"
CHAT = 701
INTERVAL = 0.2
ANSWER = "**Заказ 8041** передан в службу доставки и приедет завтра. Спасибо, что подождали!"
SHOWN = "Заказ 8041 передан в службу доставки и приедет завтра. Спасибо, что подождали!"


def streamed(text: str = ANSWER) -> Reply:
    """``text`` trickling in 4-character pieces, 40 ms apart (about 0.8 s in all)."""
    return trickle(text_answer(text), chunk_chars=4, interval_seconds=0.04)


def draft_texts(telegram: FakeTelegramServer, chat_id: int = CHAT) -> list[str]:
    return [str(call.params.get("text", "")) for call in telegram.drafts(chat_id)]


def final_sends(telegram: FakeTelegramServer, chat_id: int = CHAT) -> list[ApiCall]:
    return [
        call
        for call in telegram.calls_of("sendMessage")
        if call.ok and call.params.get("chat_id") == chat_id
    ]


async def stored_roles(redis: aioredis.Redis, chat_id: int) -> list[str]:
    raw = await redis.hget(f"{PREFIX}:{{tg:{chat_id}}}:session", "d")
    if not raw:
        return []
    return [m.role for m in ConversationSession.model_validate_json(raw).messages]


BotFactory = Callable[..., AsyncIterator[PollingBot]]


@pytest.fixture
async def start_bot(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_client: aioredis.Redis,
    redis_server: RedisServer,
) -> AsyncIterator[Callable[..., object]]:
    """Starts the bot (drafts every ``INTERVAL`` s unless told otherwise); stops it after."""
    bots: list[PollingBot] = []

    async def start(**env: object) -> PollingBot:
        settings = stack_settings(
            telegram,
            openai_server,
            redis_server.url,
            prefix=PREFIX,
            **{"STREAM_DRAFT_INTERVAL_SECONDS": INTERVAL, **env},
        )
        bot = PollingBot(settings, telegram)
        await bot.start()
        bots.append(bot)
        return bot

    yield start
    for bot in bots:
        assert await bot.stop() == 0


async def test_drafts_grow_in_order_no_faster_than_the_interval_then_the_answer_is_sent_once(
    start_bot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.script(streamed())
    await start_bot()

    await telegram.push_message(CHAT, "Где заказ 8041?")
    await telegram.wait_for_texts(CHAT, 1)

    # The last draft is the empty one before the final message (its own test below).
    drafts = telegram.drafts(CHAT)[:-1]
    texts = draft_texts(telegram)[:-1]
    assert len(drafts) >= 2, texts
    # One draft per reply, its id non-zero; plain text (the Markdown as written so far).
    assert {call.params["draft_id"] for call in drafts} != {0}
    assert len({call.params["draft_id"] for call in drafts}) == 1
    assert all("entities" not in call.params for call in drafts)
    for shorter, longer in itertools.pairwise(texts):
        assert len(longer) > len(shorter)
        assert longer.startswith(shorter)
    assert all(ANSWER.startswith(text) for text in texts)
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(drafts)]
    assert min(gaps) >= INTERVAL * 0.9, gaps
    # The answer itself: once, formatted, after the last draft; no "typing" besides drafts.
    [final] = final_sends(telegram)
    assert final.params["text"] == SHOWN
    assert final.params["entities"][0]["type"] == "bold"
    assert final.at > drafts[-1].at
    assert telegram.calls_of("sendChatAction") == []


async def test_an_empty_draft_with_the_same_id_goes_right_before_the_final_message(
    start_bot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    # Without it the draft and the final message show twice for a moment (openclaw #36697).
    openai_server.script(streamed())
    await start_bot()

    await telegram.push_message(CHAT, "Где заказ 8041?")
    await telegram.wait_for_texts(CHAT, 1)

    drafts = telegram.drafts(CHAT)
    [final] = final_sends(telegram)
    assert drafts[-2].params.get("text"), draft_texts(telegram)
    assert drafts[-1].params.get("text", "") == ""
    assert drafts[-1].params["draft_id"] == drafts[0].params["draft_id"]
    calls = [c for c in telegram.calls if c.params.get("chat_id") == CHAT]
    assert [c.method for c in calls][-2:] == ["sendMessageDraft", "sendMessage"]
    assert drafts[-1].at <= final.at


async def test_while_a_tool_runs_the_draft_names_its_purpose_not_its_arguments(
    start_bot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.script(
        tool_call_answer("get_order_status", {"order_id": "8041"}),
        delay(0.5, streamed("Заказ в пути и приедет завтра, ждите курьера.")),
    )
    await start_bot()

    await telegram.push_message(CHAT, "Где заказ 8041?")
    await telegram.wait_for_texts(CHAT, 1)

    texts = draft_texts(telegram)
    assert texts[0] == "Проверяю заказ…"
    assert len(texts) >= 2
    assert all("Заказ в пути и приедет завтра, ждите курьера.".startswith(t) for t in texts[1:])
    assert telegram.sent_texts(CHAT) == ["Заказ в пути и приедет завтра, ждите курьера."]


async def test_a_slow_first_token_shows_the_thinking_draft_instead_of_typing(
    start_bot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.script(delay(1.6, streamed()))
    await start_bot()

    await telegram.push_message(CHAT, "Где заказ 8041?")
    await telegram.wait_for_texts(CHAT, 1)

    texts = draft_texts(telegram)
    assert texts[0] == ""  # Telegram's "thinking" placeholder
    assert len(texts) >= 2
    assert telegram.calls_of("sendChatAction") == []


async def test_a_429_on_a_draft_pauses_drafts_and_does_not_delay_the_answer(
    start_bot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    # Ten minutes: an answer that waited for it would never come within the test's waits.
    telegram.fail_next(
        "sendMessageDraft", 429, "Too Many Requests: retry after 600", retry_after=600
    )
    openai_server.script(streamed(), streamed("Второй ответ, тоже по кусочкам, без черновиков."))
    await start_bot()

    await telegram.push_message(CHAT, "Где заказ 8041?")
    await telegram.wait_for_texts(CHAT, 1, within=60)
    await telegram.push_message(CHAT, "А когда приедет?")
    await telegram.wait_for_texts(CHAT, 2, within=60)

    # The refused draft, then nothing for that chat: not in this reply, nor the next.
    [refused] = telegram.calls_of("sendMessageDraft")
    assert refused.status == 429
    first, _ = final_sends(telegram)
    assert first.at > refused.at
    assert telegram.sent_texts(CHAT) == [SHOWN, "Второй ответ, тоже по кусочкам, без черновиков."]


async def test_another_draft_error_turns_drafts_off_for_that_reply_only(
    start_bot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    telegram.fail_next("sendMessageDraft", 400, "Bad Request: something new")
    openai_server.script(streamed(), streamed())
    await start_bot()

    await telegram.push_message(CHAT, "Где заказ 8041?")
    await telegram.wait_for_texts(CHAT, 1, within=5)
    assert [call.status for call in telegram.calls_of("sendMessageDraft")] == [400]
    await telegram.push_message(CHAT, "Повторите, пожалуйста.")
    await telegram.wait_for_texts(CHAT, 2, within=5)

    # The next reply drafts again, under a draft id of its own.
    later = telegram.drafts(CHAT)
    assert later
    assert (
        later[0].params["draft_id"] != telegram.calls_of("sendMessageDraft")[0].params["draft_id"]
    )
    assert telegram.sent_texts(CHAT) == [SHOWN, SHOWN]


async def test_a_stream_cut_mid_way_fails_the_turn_without_committing_it(
    start_bot,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_client: aioredis.Redis,
) -> None:
    openai_server.script(trickle(cut_stream(text_answer(ANSWER), after_chunks=12), chunk_chars=4))
    await start_bot()

    await telegram.push_message(CHAT, "Где заказ 8041?")
    [sent] = await telegram.wait_for_texts(CHAT, 1)

    assert draft_texts(telegram)  # part of the answer was shown as a draft...
    assert "8041" not in sent  # ...but the customer is told the turn failed
    assert "Код обращения" in sent or "код" in sent.lower()
    assert "assistant" not in await stored_roles(redis_client, CHAT)


@pytest.mark.parametrize(
    ("env", "chat_id", "chat_type", "extra"),
    [
        pytest.param(
            {"TELEGRAM_ALLOW_GROUPS": "true"},
            -100701,
            "supergroup",
            {"entities": [{"type": "mention", "offset": 0, "length": 17}]},
            id="group",
        ),
        pytest.param({}, CHAT, "private", {"message_thread_id": 5}, id="private-topic"),
        pytest.param({"STREAMING": "off"}, CHAT, "private", {}, id="streaming-off"),
    ],
)
async def test_no_drafts_in_groups_topics_or_with_streaming_off(  # noqa: PLR0917 - parameters
    env: dict[str, str],
    chat_id: int,
    chat_type: str,
    extra: dict[str, object],
    start_bot,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
) -> None:
    openai_server.script(streamed())
    await start_bot(**env)

    await telegram.push(
        telegram.message_update(
            chat_id, "@support_test_bot где заказ 8041?", chat_type=chat_type, extra=extra
        )
    )
    await telegram.wait_for_texts(chat_id, 1)

    assert telegram.calls_of("sendMessageDraft") == []
    assert telegram.sent_texts(chat_id) == [SHOWN]
