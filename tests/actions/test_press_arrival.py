"""A press is judged by the time it arrived, not by when a worker got to it.

A press made in time but queued behind a long turn of the same chat (or a
crash and restart: tests/durability/test_action_crash.py) executes; the
verdict uses the press's intake time. Real intake, dispatcher and worker over a
real Redis and the fake Bot API; the model holds one turn until the test lets it go.
"""

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from aiogram import Bot

from bot import customer_texts
from bot.llm.types import LLMResult, Message, TextListener, ToolChoice, ToolDefinition
from bot.queue.jobs import turn_id_for
from bot.storage.keys import telegram_conversation
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient
from bot.testing.telegram_server import FakeTelegramServer
from tests.actions.test_telegram_actions import CHAT, Stack, _stack, shop_model

CONFIRM_SECONDS = 2.0
LONG_QUESTION = "долгий вопрос"


@dataclass
class HeldModel(ScriptedClient):
    """The shop model, holding its answer to :data:`LONG_QUESTION` until ``release`` is set."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    holding: asyncio.Event = field(default_factory=asyncio.Event)

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        if messages[-1]["role"] == "user" and messages[-1]["content"] == LONG_QUESTION:
            self.holding.set()
            await self.release.wait()
        return await super().generate_with_tools(messages, tools, tool_choice, on_text=on_text)


@pytest.fixture
def model() -> HeldModel:
    return HeldModel(shop_model)


@pytest.fixture
async def stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, model: HeldModel
) -> AsyncIterator[Stack]:
    async for built in _stack(
        redis_server, telegram, bot, model, ACTION_CONFIRM_SECONDS=CONFIRM_SECONDS
    ):
        yield built


async def proposed_at(stack: Stack) -> datetime:
    """When the chat's pending action was proposed."""
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert session.pending_action is not None
    return session.pending_action.proposed_at


async def window_over(proposed: datetime) -> None:
    """Return once the confirmation window of an action proposed at ``proposed`` is over."""
    left = CONFIRM_SECONDS + 0.2 - (datetime.now(UTC) - proposed).total_seconds()
    await asyncio.sleep(max(0.0, left))


async def test_a_press_in_time_queued_behind_a_long_turn_executes(
    stack: Stack, telegram: FakeTelegramServer, model: HeldModel
) -> None:
    message_id, _, (yes, _) = await stack.card("отмените заказ 8042")
    proposed = await proposed_at(stack)
    await stack.feed(telegram.message_update(CHAT, LONG_QUESTION))
    await asyncio.wait_for(model.holding.wait(), 10)

    await stack.feed(telegram.callback_update(CHAT, message_id, yes))
    pressed = datetime.now(UTC)
    assert (pressed - proposed).total_seconds() < CONFIRM_SECONDS, "pressed too late"
    # The turn ahead of the press outlives the confirmation window.
    await window_over(proposed)
    model.release.set()

    await telegram.wait_for(lambda: bool(stack.edits(message_id)))
    assert [edit["text"] for edit in stack.edits(message_id)] == ["✅ Заказ 8042 отменён"]
    assert await stack.order("8042") == "cancelled"
    steps = await stack.wait_for_step(yes.split(":")[1], "executed")
    assert [step["event"] for step in steps] == ["proposed", "confirmed", "executed"]
    # The customer decided when they pressed, not when the worker got to it.
    assert float(steps[1]["decide_ms"]) < CONFIRM_SECONDS * 1000


async def test_a_press_that_arrived_late_still_expires(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    message_id, _, (yes, _) = await stack.card("отмените заказ 8042")
    proposed = await proposed_at(stack)
    await window_over(proposed)

    await stack.feed(telegram.callback_update(CHAT, message_id, yes))

    await telegram.wait_for(lambda: bool(stack.edits(message_id)))
    assert [edit["text"] for edit in stack.edits(message_id)] == ["Срок подтверждения истёк"]
    assert await stack.order("8042") == "processing"
    steps = await stack.wait_for_step(yes.split(":")[1], "expired")
    assert [step["event"] for step in steps] == ["proposed", "expired"]


@pytest.fixture
async def burst_stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    """A burst of two messages, then one per ten minutes."""
    async for built in _stack(
        redis_server, telegram, bot, FLOOD_BURST=2, FLOOD_INTERVAL_SECONDS=600
    ):
        yield built


async def test_a_confirm_press_right_after_the_message_burst_executes(
    burst_stack: Stack, telegram: FakeTelegramServer
) -> None:
    stack = burst_stack
    # The proposal and one more message spend the whole burst.
    message_id, _, (yes, _) = await stack.card("отмените заказ 8042")
    await stack.feed(telegram.message_update(CHAT, "а сколько ждать возврата?"))

    await stack.feed(telegram.callback_update(CHAT, message_id, yes))

    await telegram.wait_for(lambda: bool(stack.edits(message_id)))
    assert [edit["text"] for edit in stack.edits(message_id)] == ["✅ Заказ 8042 отменён"]
    assert customer_texts.RATE_LIMITED not in telegram.sent_texts(CHAT)


async def test_a_given_up_press_the_shop_never_applied_closes_its_card_as_failed(
    stack: Stack, telegram: FakeTelegramServer
) -> None:
    # Its earlier attempts are taken as spent (as three crashed runs before the shop's
    # write would leave them): the next worker gives the press up instead of running it.
    message_id, _, (yes, _) = await stack.card("отмените заказ 8042")
    press = telegram.callback_update(CHAT, message_id, yes)
    attempts = stack.app.keys.conversation(telegram_conversation(CHAT)).attempts
    max_attempts = stack.app.settings.worker.job_max_attempts
    await stack.app.redis.hset(attempts, str(press["update_id"]), str(max_attempts))

    await stack.feed(press)

    await telegram.wait_for(lambda: bool(stack.edits(message_id)))
    assert [edit["text"] for edit in stack.edits(message_id)] == [customer_texts.ACTION_FAILED_TEXT]
    assert await stack.order("8042") == "processing"
    incident = turn_id_for(telegram_conversation(CHAT), press["update_id"])
    await telegram.wait_for(lambda: any(incident in text for text in telegram.sent_texts(CHAT)))
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert session.pending_action is None
    steps = await stack.wait_for_step(yes.split(":")[1], "failed")
    assert [(s["event"], s.get("error_code", "")) for s in steps] == [
        ("proposed", ""),
        ("confirmed", ""),
        ("failed", "poison_job"),
    ]
    letters = await stack.app.redis.hkeys(stack.app.keys.dead_letters)
    assert [letter.decode() if isinstance(letter, bytes) else letter for letter in letters] == [
        incident
    ]
