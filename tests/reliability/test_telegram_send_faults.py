"""Telegram refusing ``sendMessage`` (429 with ``retry_after``, 502): the whole bot, real sockets.

The real runner polls the fake Bot API in this process; the model is the real
``AsyncOpenAI`` client against the scripted server; sessions, de-duplication
and the audit live in the suite's redis-server. The fake records every call with
the status it answered, so a refused send and an accepted one are told apart:
``sent_texts`` lists only what Telegram accepted.

The waits are real (``retry_after`` is 1 s, the 5xx back-off 0.5 s then 1 s):
the point is the production sender inside the production dispatcher.
"""

import logging
from dataclasses import dataclass
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.engine.history import UNDELIVERED_NOTE
from bot.sessions.models import ConversationSession
from bot.testing.audit_entries import stream_entries
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, text_answer, user_texts
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer
from bot.testing.settings import stack_settings
from bot.testing.telegram_server import ApiCall, FakeTelegramServer

PREFIX = "sendfault"
STREAM = f"{PREFIX}:audit"
CHAT = 601


def echo(body: dict[str, Any]) -> Reply:
    """Answers ``Ответ: <last user text>``."""
    return text_answer(f"Ответ: {user_texts(body)[-1]}")


def answer_to(question: str) -> str:
    """What ``echo`` answers to ``question``."""
    return f"Ответ: {question}"


def refused_sends(telegram: FakeTelegramServer) -> list[ApiCall]:
    """The ``sendMessage`` calls the fake answered with an error."""
    return [call for call in telegram.calls_of("sendMessage") if not call.ok]


async def stored_pairs(redis: aioredis.Redis, chat_id: int) -> list[tuple[str, str]]:
    """The (role, content) messages of the chat's session in Redis."""
    raw = await redis.hget(f"{PREFIX}:{{tg:{chat_id}}}:session", "d")
    assert raw, f"no session for chat {chat_id}"
    session = ConversationSession.model_validate_json(raw)
    return [(message.role, message.content) for message in session.messages]


async def turn_entries(redis: aioredis.Redis, chat_id: int) -> list[dict[str, str]]:
    """The ``type=turn`` audit entries of one chat."""
    return [
        entry
        for entry in await stream_entries(redis, STREAM)
        if entry["type"] == "turn" and entry["chat_id"] == str(chat_id)
    ]


@dataclass(frozen=True)
class Fault:
    """How the fake refuses the first ``times`` sends of the reply."""

    status: int
    description: str
    retry_after: int | None
    times: int


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(Fault(429, "Too Many Requests: retry after 1", 1, 1), id="429-retry-after-1s"),
        pytest.param(Fault(502, "Bad Gateway", None, 1), id="502-once"),
        pytest.param(Fault(502, "Bad Gateway", None, 2), id="502-twice"),
    ],
)
async def test_a_refused_reply_is_delivered_once_when_telegram_recovers(
    fault: Fault,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_client: aioredis.Redis,
    redis_server: RedisServer,
) -> None:
    """The reply is re-sent after the refusal and accepted exactly once; the turn is not re-run.

    The chat's next message arrives while the first reply is still held back: it
    waits its turn and is answered normally, after the first reply.
    """
    openai_server.responder = echo
    first, second = "Где заказ 8041?", "А когда вы работаете?"
    bot = PollingBot(
        stack_settings(telegram, openai_server, redis_server.url, prefix=PREFIX), telegram
    )
    await bot.start()
    telegram.fail_next(
        "sendMessage",
        fault.status,
        fault.description,
        retry_after=fault.retry_after,
        times=fault.times,
        when=lambda params: params.get("chat_id") == CHAT,
    )
    await telegram.push_message(CHAT, first)
    await telegram.wait_for(lambda: len(refused_sends(telegram)) >= 1)
    await telegram.push_message(CHAT, second)
    await telegram.wait_for_texts(CHAT, 2, within=15)
    # A graceful stop finishes everything in flight: what is recorded now is final.
    assert await bot.stop() == 0

    assert telegram.sent_texts(CHAT) == [answer_to(first), answer_to(second)]
    statuses = [call.status for call in telegram.calls_of("sendMessage")]
    assert statuses == [fault.status] * fault.times + [200, 200]
    assert [call.params["text"] for call in refused_sends(telegram)] == [
        answer_to(first)
    ] * fault.times
    # The delivery was retried, not the turn: the model answered each question once.
    assert [user_texts(request.body)[-1] for request in openai_server.requests] == [first, second]
    assert await stored_pairs(redis_client, CHAT) == [
        ("user", first),
        ("assistant", answer_to(first)),
        ("user", second),
        ("assistant", answer_to(second)),
    ]
    turns = await turn_entries(redis_client, CHAT)
    assert [entry["outcome"] for entry in turns] == ["answered", "answered"]


async def test_a_reply_refused_beyond_the_attempt_limit_is_given_up_and_the_bot_serves_on(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_client: aioredis.Redis,
    redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``TELEGRAM_SEND_MAX_ATTEMPTS`` sends, then the reply is recorded undelivered; no crash.

    The next update of the same chat is answered normally, the lost reply's turn
    is not run again, its audit outcome is ``undelivered``, and the next turn's
    model request says the customer never saw it.
    """
    openai_server.responder = echo
    lost, served = "Первый вопрос", "Второй вопрос"
    bot = PollingBot(
        stack_settings(
            telegram, openai_server, redis_server.url, prefix=PREFIX, TELEGRAM_SEND_MAX_ATTEMPTS=2
        ),
        telegram,
    )
    await bot.start()
    # Telegram would refuse this reply for ever (more times than the bot may try).
    telegram.fail_next(
        "sendMessage",
        502,
        "Bad Gateway",
        times=100,
        when=lambda params: params.get("text") == answer_to(lost),
    )
    await telegram.push_message(CHAT, lost)
    await telegram.push_message(CHAT, served)
    assert await telegram.wait_for_texts(CHAT, 1, within=15) == [answer_to(served)]
    assert await bot.stop() == 0

    assert telegram.sent_texts(CHAT) == [answer_to(served)]
    refused = refused_sends(telegram)
    assert len(refused) == 2
    assert {call.params["text"] for call in refused} == {answer_to(lost)}
    assert [user_texts(request.body)[-1] for request in openai_server.requests] == [lost, served]
    assert any(
        record.levelno >= logging.WARNING and "not delivered" in record.getMessage()
        for record in caplog.records
    )
    turns = await turn_entries(redis_client, CHAT)
    assert [entry["outcome"] for entry in turns] == ["undelivered", "answered"]
    second_request = openai_server.requests[1].body["messages"]
    undelivered = [m["content"] for m in second_request if m["role"] == "assistant"]
    assert undelivered == [f"{UNDELIVERED_NOTE}\n{answer_to(lost)}"]
