"""The idle analysis end to end: two bot applications (two processes' worth of parts) on one
real Redis, the fake Bot API, and the real openai SDK against the scripted server.

The conversation counts as idle ``CSAT_AFTER_IDLE_MINUTES=0.002`` (120 ms) after the
bot's answer; both applications' sweepers race for it.
"""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiogram import Bot

from bot.analysis.feature import AnalysisFeature
from bot.storage.keys import telegram_conversation
from bot.testing.audit_entries import stream_entries
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, text_answer
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings, stack_env
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application

pytestmark = pytest.mark.timeout(60)

CHAT = 9300
PREFIX = "idle"
ANALYSIS = {
    "category": "order_status",
    "sentiment": "neutral",
    "urgency": "normal",
    "language": "ru",
    "resolved": True,
    "summary": "Клиент спросил, где заказ 8041; бот назвал статус.",
    "next_step": None,
}


async def until(check: Callable[[], Awaitable[bool]], within: float = 15.0) -> None:
    async with asyncio.timeout(within):
        while True:
            if await check():
                return
            await asyncio.sleep(0.02)


class Model:
    """The scripted model: chat requests are echoed, analysis requests answered by ``analysis``."""

    def __init__(self, server: ScriptedOpenAIServer) -> None:
        self.server = server
        self.analysis: Callable[[], Reply] = lambda: text_answer(
            json.dumps(ANALYSIS, ensure_ascii=False)
        )
        server.responder = self.answer

    def answer(self, body: Any) -> Reply:
        if "response_format" in body:
            return self.analysis()
        return text_answer(f"Ответ: {body['messages'][-1]['content']}")

    def analysis_requests(self) -> int:
        return sum("response_format" in r.body for r in self.server.requests)


@contextlib.asynccontextmanager
async def two_processes(
    redis_server: RedisServer, telegram: FakeTelegramServer, model: ScriptedOpenAIServer, bot: Bot
) -> AsyncIterator[list[TelegramStack]]:
    settings = make_settings(
        **stack_env(telegram, model, redis_server.url, prefix=PREFIX),
        CSAT="off",
        CSAT_AFTER_IDLE_MINUTES=0.002,
    )
    async with contextlib.AsyncExitStack() as stack:
        first = await stack.enter_async_context(open_application(settings))
        second = await stack.enter_async_context(open_application(settings, flush=False))
        stacks = [
            TelegramStack(app, bot, telegram=telegram, sweep_period_seconds=0.02)
            for app in (first, second)
        ]
        for each in stacks:
            await stack.enter_async_context(each.running(sweep=True))
        yield stacks


async def analysis_entries(stack: TelegramStack) -> list[dict[str, str]]:
    entries = await stream_entries(stack.app.redis, f"{PREFIX}:audit")
    return [entry for entry in entries if entry.get("type") == "analysis"]


async def ask(stack: TelegramStack, telegram: FakeTelegramServer, text: str) -> None:
    await stack.feed(telegram.message_update(CHAT, text))
    await telegram.wait_for(lambda: f"Ответ: {text}" in telegram.sent_texts(CHAT))


async def test_an_idle_conversation_is_analysed_once_by_two_processes_and_again_after_more(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
):
    model = Model(openai_server)
    async with two_processes(redis_server, telegram, openai_server, bot) as (first, second):
        await ask(first, telegram, "Где заказ 8041?")

        async def analysed(count: int) -> bool:
            return len(await analysis_entries(first)) >= count

        await until(lambda: analysed(1))
        # Both sweepers had their chance at the due conversation: it left the schedule.
        await until(lambda: _not_due(first))
        for each in (first, second):
            sweeper = each.side.sweeper("analysis")
            assert sweeper is not None
            await sweeper.sweep()
        assert model.analysis_requests() == 1
        [entry] = await analysis_entries(second)
        assert entry["event"] == "analysed"
        assert {k: entry[k] for k in ("category", "sentiment", "urgency", "language")} == {
            "category": "order_status",
            "sentiment": "neutral",
            "urgency": "normal",
            "language": "ru",
        }
        assert (entry["resolved"], entry["turns"], entry["person"]) == ("1", "1", "0")
        # The summary is for staff, under the conversation; never in the audit.
        assert not any("8041" in value for value in entry.values())
        analysis = first.app.features.get(AnalysisFeature)
        assert analysis is not None
        stored = await analysis.schedule.latest(telegram_conversation(CHAT))
        assert stored is not None
        assert stored.analysis.summary == ANALYSIS["summary"]
        # The customer read the answer and nothing else.
        assert telegram.sent_texts(CHAT) == ["Ответ: Где заказ 8041?"]

        await ask(second, telegram, "А можно его отменить?")
        await until(lambda: analysed(2))
        await until(lambda: _not_due(first))
        assert model.analysis_requests() == 2
        assert [e["turns"] for e in await analysis_entries(first)] == ["1", "2"]


async def _not_due(stack: TelegramStack) -> bool:
    return int(await stack.app.redis.zcard(stack.app.keys.analysis_due)) == 0


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (lambda: text_answer("{not json"), "invalid"),
        (
            lambda: Reply(
                body={"error": {"message": "no", "type": "server_error"}},
                status=500,
                headers={"x-should-retry": "false"},
            ),
            "unavailable",
        ),
    ],
)
async def test_a_failed_analysis_is_one_audit_entry_and_nothing_else(  # noqa: PLR0917
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
    reply: Callable[[], Reply],
    kind: str,
):
    model = Model(openai_server)
    model.analysis = reply
    async with two_processes(redis_server, telegram, openai_server, bot) as (first, _):
        await ask(first, telegram, "Где заказ 8041?")

        async def failed() -> bool:
            return len(await analysis_entries(first)) >= 1

        await until(failed)
        await until(lambda: _not_due(first))
        [entry] = await analysis_entries(first)
        assert (entry["event"], entry["error"]) == ("analysis_failed", kind)
        assert entry["category"] == ""
        analysis = first.app.features.get(AnalysisFeature)
        assert analysis is not None
        assert await analysis.schedule.latest(telegram_conversation(CHAT)) is None
        assert telegram.sent_texts(CHAT) == ["Ответ: Где заказ 8041?"]
        assert model.analysis_requests() == 1


async def test_a_satisfaction_answer_carries_the_analysed_category(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    bot: Bot,
):
    """Idle: the question is asked and the conversation analysed; the customer's score is
    audited with the category, so ``stats`` can give CSAT per category."""
    Model(openai_server)
    settings = make_settings(
        **stack_env(telegram, openai_server, redis_server.url, prefix=PREFIX),
        CSAT_AFTER_IDLE_MINUTES=0.002,
    )
    async with open_application(settings) as app:
        stack = TelegramStack(app, bot, telegram=telegram, sweep_period_seconds=0.02)
        async with stack.running(sweep=True):
            await ask(stack, telegram, "Где заказ 8041?")

            async def analysed() -> bool:
                return len(await analysis_entries(stack)) >= 1

            await until(analysed)
            await telegram.wait_for(lambda: len(telegram.keyboards(CHAT)) == 1)
            [(message_id, _, keyboard)] = telegram.keyboards(CHAT)
            await stack.feed(
                telegram.callback_update(CHAT, message_id, keyboard[0][4]["callback_data"])
            )

            async def answered() -> list[dict[str, str]]:
                entries = await stream_entries(app.redis, f"{PREFIX}:audit")
                return [e for e in entries if e.get("event") == "answered"]

            async def scored() -> bool:
                return bool(await answered())

            await until(scored)
            [entry] = await answered()
            assert (entry["type"], entry["score"], entry["category"]) == (
                "feedback",
                "5",
                "order_status",
            )
