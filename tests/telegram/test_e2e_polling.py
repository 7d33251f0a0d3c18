"""The whole bot over real sockets: fake Bot API, scripted OpenAI server, real redis-server.

Each test runs the real runner (``bot.telegram.process.run_bot``: the engine from
``build_application``, the dispatcher, long polling, graceful shutdown) in this
process, pushes updates into the fake Bot API and waits, bounded, for the
messages the bot sends back. The model is the real ``AsyncOpenAI`` client
talking to the scripted server.
"""

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot import customer_texts
from bot.telegram.text_split import utf16_length
from bot.testing.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    error,
    text_answer,
    tool_call_answer,
    tool_calls_answer,
    user_texts,
)
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer
from bot.testing.settings import stack_settings
from bot.testing.telegram_server import FakeTelegramServer

Body = dict[str, Any]


def tool_results(body: Body) -> list[dict[str, Any]]:
    """The tool results of the current turn, decoded."""
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def echo(body: Body) -> Reply:
    """Answers ``Ответ: <last user text>``."""
    return text_answer(f"Ответ: {user_texts(body)[-1]}")


@pytest.fixture
async def running(
    telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer, redis_client, redis_server
) -> AsyncIterator[PollingBot]:
    """The bot running against the three servers (the shared Redis, flushed)."""
    process = PollingBot(
        stack_settings(telegram, openai_server, redis_server.url, prefix="e2e"), telegram
    )
    await process.start()
    yield process
    assert await process.stop() == 0


async def test_start_registers_the_command_menu_and_greets(
    running: PollingBot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    assert [c["command"] for c in telegram.commands] == ["start", "help", "new"]
    # The default language's menu without a code, English for Telegram set to English.
    assert telegram.commands[0]["description"] == customer_texts.COMMANDS[0][1]
    assert set(telegram.commands_by_language) == {"", "en"}
    english = telegram.commands_by_language["en"]
    assert [c["command"] for c in english] == ["start", "help", "new"]
    assert english[0]["description"] == "What the bot can do"
    assert telegram.calls_of("deleteWebhook")
    await telegram.push_message(10, "/start")
    assert await telegram.wait_for_texts(10, 1) == [customer_texts.GREETING]
    assert openai_server.requests == []


async def test_one_tool_then_two_tools_answer_from_the_demo_store(
    running: PollingBot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.script(
        tool_call_answer("get_order_status", {"order_id": "8041"}),
        text_answer("Заказ **8041** передан в службу доставки."),
        tool_calls_answer([("get_order_status", {"order_id": "8042"}), ("get_support_hours", {})]),
        text_answer("Заказ 8042 собирается на складе. Поддержка работает ежедневно."),
    )
    await telegram.push_message(11, "Где мой заказ 8041?")
    assert await telegram.wait_for_texts(11, 1) == ["Заказ 8041 передан в службу доставки."]
    await telegram.push_message(11, "А заказ 8042? И когда вы работаете?")
    texts = await telegram.wait_for_texts(11, 2)
    assert texts[1] == "Заказ 8042 собирается на складе. Поддержка работает ежедневно."
    first_results = tool_results(openai_server.requests[1].body)
    assert first_results[0]["ok"] is True
    assert first_results[0]["data"]["status"] == "in_transit"
    second = tool_results(openai_server.requests[3].body)
    assert [result["ok"] for result in second] == [True, True]
    assert openai_server.pending_steps == 0


async def test_history_survives_a_second_turn_and_a_restart_and_new_forgets_it(
    telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer, redis_client, redis_server
) -> None:
    openai_server.responder = lambda body: text_answer(" | ".join(user_texts(body)))
    process = PollingBot(
        stack_settings(telegram, openai_server, redis_server.url, prefix="e2e"), telegram
    )
    await process.start()
    await telegram.push_message(12, "первый")
    await telegram.wait_for_texts(12, 1)
    await telegram.push_message(12, "второй")
    assert (await telegram.wait_for_texts(12, 2))[1] == "первый | второй"
    assert await process.stop() == 0

    await process.start()
    await telegram.push_message(12, "после перезапуска")
    texts = await telegram.wait_for_texts(12, 3)
    assert texts[2] == "первый | второй | после перезапуска"
    await telegram.push_message(12, "/new")
    await telegram.push_message(12, "заново")
    texts = await telegram.wait_for_texts(12, 5)
    assert texts[3:] == [customer_texts.NEW_CONVERSATION, "заново"]
    assert await process.stop() == 0


async def test_two_chats_are_isolated(
    running: PollingBot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.responder = lambda body: text_answer(" | ".join(user_texts(body)))
    await telegram.push_message(21, "я из чата 21")
    await telegram.push_message(22, "я из чата 22")
    await telegram.wait_for_texts(21, 1)
    await telegram.wait_for_texts(22, 1)
    await telegram.push_message(21, "ещё")
    assert (await telegram.wait_for_texts(21, 2))[1] == "я из чата 21 | ещё"
    assert telegram.sent_texts(22) == ["я из чата 22"]


async def test_non_text_message_gets_a_reply_without_a_model_call(
    running: PollingBot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    photo = [{"file_id": "p", "file_unique_id": "u", "width": 90, "height": 90}]
    await telegram.push_message(13, None, extra={"photo": photo})
    assert await telegram.wait_for_texts(13, 1) == [customer_texts.PHOTO]
    assert openai_server.requests == []


async def test_operator_without_a_staff_group_names_the_hours_without_a_model_call(
    running: PollingBot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    """The text the console and the offline demo model give (tests/chat/test_console_tryout.py)."""
    await telegram.push_message(14, "/operator")
    (text,) = await telegram.wait_for_texts(14, 1)
    assert text.startswith(customer_texts.OPERATOR_OFF + "\n\n")
    assert "График (Europe/Moscow): понедельник: 09:00–21:00" in text
    assert openai_server.requests == []


async def test_a_ten_thousand_character_answer_arrives_in_valid_pieces(
    telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer, redis_client, redis_server
) -> None:
    paragraph = ("Это **подробное** предложение длинного ответа. " * 25).strip()
    answer = "\n\n".join([paragraph] * 9)
    assert len(answer) >= 10_000
    openai_server.script(text_answer(answer))
    process = PollingBot(
        stack_settings(
            telegram, openai_server, redis_server.url, prefix="e2e", HISTORY_TOKEN_BUDGET=50_000
        ),
        telegram,
    )
    await process.start()
    await telegram.push_message(14, "Расскажите подробно")
    await telegram.wait_for(lambda: "".join(telegram.sent_texts(14)).count("подробное") == 225)
    calls = telegram.calls_of("sendMessage")
    assert len(calls) >= 3
    assert all(call.ok for call in calls)  # no piece refused: length and entities valid
    assert all(utf16_length(text) <= 4096 for text in telegram.sent_texts(14))
    assert all(text.endswith(".") for text in telegram.sent_texts(14))
    assert await process.stop() == 0


async def test_a_redelivered_update_is_answered_once(
    running: PollingBot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.responder = echo
    update = telegram.message_update(15, "вопрос один раз")
    await telegram.push(update)
    await telegram.wait_for_texts(15, 1)
    await telegram.redeliver(update)
    await telegram.push_message(15, "следующий")
    texts = await telegram.wait_for_texts(15, 2)
    assert texts == ["Ответ: вопрос один раз", "Ответ: следующий"]
    assert [user_texts(r.body)[-1] for r in openai_server.requests] == [
        "вопрос один раз",
        "следующий",
    ]


async def test_ten_messages_in_one_batch_are_answered_in_order(
    telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer, redis_client, redis_server
) -> None:
    openai_server.responder = echo
    openai_server.latency_seconds = 0.01
    # A burst of ten is allowed here; flood control has its own tests.
    process = PollingBot(
        stack_settings(telegram, openai_server, redis_server.url, prefix="e2e", FLOOD_BURST=10),
        telegram,
    )
    await process.start()
    await telegram.push(*(telegram.message_update(16, f"сообщение {n}") for n in range(10)))
    texts = await telegram.wait_for_texts(16, 10, within=20)
    assert texts == [f"Ответ: сообщение {n}" for n in range(10)]
    # Each turn saw the ones before it: they ran one at a time, in order.
    assert user_texts(openai_server.requests[-1].body)[-10:] == [
        f"сообщение {n}" for n in range(10)
    ]
    assert await process.stop() == 0


async def test_flooding_user_is_told_once_and_costs_no_model_calls(
    running: PollingBot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.responder = echo
    await telegram.push(*(telegram.message_update(23, f"спам {n}") for n in range(8)))
    await telegram.wait_for_texts(23, 6)
    # A graceful stop lets every update in flight finish: after it, nothing more comes.
    assert await running.stop() == 0
    assert telegram.sent_texts(23) == [
        *(f"Ответ: спам {n}" for n in range(5)),
        customer_texts.RATE_LIMITED,
    ]
    assert len(openai_server.requests) == 5


async def test_a_model_that_always_wants_tools_is_bounded_and_the_customer_told(
    running: PollingBot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.responder = lambda body: tool_call_answer("get_support_hours", {})
    await telegram.push_message(17, "Когда вы работаете?")
    (text,) = await telegram.wait_for_texts(17, 1)
    assert len(openai_server.requests) == 3  # TOOL_MAX_STEPS
    assert "несколько простых" in text
    assert "Код обращения: " in text


async def test_a_model_that_is_down_gets_an_incident_message_then_works_again(
    running: PollingBot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    down: Callable[[Body], Reply] = lambda body: error(  # noqa: E731
        503, "overloaded", headers={"x-should-retry": "false"}
    )
    openai_server.responder = down
    await telegram.push_message(18, "Где заказ 8041?")
    (incident,) = await telegram.wait_for_texts(18, 1)
    assert "повторите" in incident
    assert "overloaded" not in incident
    assert "503" not in incident
    code = incident.split("Код обращения: ")[1].split(".")[0]
    assert len(code) == 10
    openai_server.responder = echo
    await telegram.push_message(18, "Где заказ 8041?")
    assert (await telegram.wait_for_texts(18, 2))[1] == "Ответ: Где заказ 8041?"


async def test_redis_stopped_during_a_turn_then_restarted(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    own_redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def stop_redis_then_answer(body: Body) -> Reply:
        if user_texts(body)[-1] == "во время сбоя":
            own_redis_server.stop()
        return echo(body)

    openai_server.responder = stop_redis_then_answer
    process = PollingBot(
        stack_settings(telegram, openai_server, own_redis_server.url, prefix="e2e"), telegram
    )
    caplog.set_level(logging.WARNING, logger="bot.queue.redis_patience")
    await process.start()
    await telegram.push_message(19, "во время сбоя")
    # The turn could store nothing: the worker waits for Redis to see whether the job
    # survives (tests/reliability/test_turn_during_redis_outage.py has both endings).
    async with asyncio.timeout(20):
        while True:
            if any("outcome was not stored" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.05)
    # Restarted empty: the job is gone and nobody will answer it, so now the customer is told.
    own_redis_server.start()
    (during,) = await telegram.wait_for_texts(19, 1)
    assert "временно недоступен" in during
    assert "Код обращения: " in during
    await telegram.push_message(19, "после сбоя")
    texts = await telegram.wait_for_texts(19, 2)
    assert texts[1] == "Ответ: после сбоя"
    assert await process.stop() == 0


async def test_half_an_emoji_is_cleaned_and_answered_not_a_model_error(
    running: PollingBot, telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.responder = echo
    await telegram.push_message(11, "Где заказ 8041? \ud83d")
    (reply,) = await telegram.wait_for_texts(11, 1)
    assert reply == "Ответ: Где заказ 8041? \ufffd"
    assert user_texts(openai_server.requests[0].body)[-1] == "Где заказ 8041? \ufffd"
