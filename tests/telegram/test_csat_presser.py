"""Only the customer asked may answer the satisfaction question.

The real intake, worker pool and CSAT sweeper over a real Redis and the fake
Bot API: the question is asked after an answer; a press on it by another user
(a forwarded question, a forged update) records nothing; the customer's does.
"""

import asyncio
from collections.abc import Sequence

from aiogram import Bot

from bot import customer_texts
from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.testing.audit_entries import stream_entries
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import ApiCall, FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application

CHAT = 9150
STRANGER = 9151
PREFIX = "csatpresser"


def _echo(
    messages_: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    return text_result(f"Ответ: {messages_[-1]['content']}")


async def test_a_press_by_someone_else_records_nothing_the_customers_does(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> None:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX=PREFIX,
        AUDIT_STREAM=f"{PREFIX}:audit",
        CSAT_AFTER_IDLE_MINUTES=0.001,
    )
    async with open_application(settings, llm=ScriptedClient(_echo)) as app:
        stack = TelegramStack(app, bot, telegram=telegram, sweep_period_seconds=0.02)
        async with stack.running():
            sweeper = stack.side.sweeper("csat")
            assert sweeper is not None
            sweeping = asyncio.create_task(sweeper.run())
            try:
                await stack.feed(telegram.message_update(CHAT, "Где заказ?"))
                await telegram.wait_for(lambda: len(telegram.keyboards(CHAT)) == 1)
            finally:
                sweeper.stop()
                await sweeping
            [(question_id, _, keyboard)] = telegram.keyboards(CHAT)
            five = keyboard[0][-1]["callback_data"]

            async def feedback() -> list[dict[str, str]]:
                entries = await stream_entries(app.redis, f"{PREFIX}:audit")
                return [e for e in entries if e.get("type") == "feedback"]

            def edits() -> list[ApiCall]:
                return [
                    call
                    for call in telegram.calls_of("editMessageText")
                    if call.ok and call.params.get("message_id") == question_id
                ]

            # Someone else presses «5» on the customer's question.
            await stack.feed(telegram.callback_update(CHAT, question_id, five, user_id=STRANGER))
            # The barrier: everything queued before it in this chat was handled.
            await stack.settle(CHAT)
            assert edits() == []
            assert [e["event"] for e in await feedback()] == ["asked"]

            # The customer's own press is the answer.
            await stack.feed(telegram.callback_update(CHAT, question_id, five))
            await telegram.wait_for(lambda: len(edits()) == 1)
            assert edits()[0].params["text"] == customer_texts.CSAT_THANKS

            async with asyncio.timeout(10):
                answered = await feedback()
                while len(answered) < 2:
                    await asyncio.sleep(0.02)
                    answered = await feedback()
            assert [e["event"] for e in answered] == ["asked", "answered"]
            assert answered[1]["score"] == "5"
