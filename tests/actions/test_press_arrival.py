"""A press is judged by the time it arrived, not by when a worker got to it.

A press made in time but queued behind a long turn of the same chat (or a
crash and restart: tests/durability/test_action_crash.py) executes; the
verdict uses the press's intake time. Real intake, dispatcher and worker over a
real Redis and the fake Bot API; the model holds one turn until the test lets it go.
When a press arrived is what the intake's clock says: the test sets it (in time, or
late), so the verdict does not depend on how fast a loaded machine gets there.
"""

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

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
from tests.queue.echo_pool import wait_until

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


def press_arrives_at(stack: Stack, monkeypatch: pytest.MonkeyPatch, at: datetime) -> None:
    """The intake's clock (the ``clock_ms`` it was built with) says presses arrive ``at``."""
    monkeypatch.setattr(stack.app.intake, "clock_ms", lambda: int(at.timestamp() * 1000))


async def test_a_press_in_time_queued_behind_a_long_turn_executes(
    stack: Stack, telegram: FakeTelegramServer, model: HeldModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    message_id, _, (yes, _) = await stack.card("отмените заказ 8042")
    proposed = await proposed_at(stack)
    await stack.feed(telegram.message_update(CHAT, LONG_QUESTION))
    await asyncio.wait_for(model.holding.wait(), 10)

    # Pressed in time: halfway through the window.
    press_arrives_at(stack, monkeypatch, proposed + timedelta(seconds=CONFIRM_SECONDS / 2))
    await stack.feed(telegram.callback_update(CHAT, message_id, yes))
    # The turn ahead of the press outlives the confirmation window: the worker gets to the
    # press when, by its own clock, the window is over.
    window_end = proposed + timedelta(seconds=CONFIRM_SECONDS)
    await wait_until(lambda: datetime.now(UTC) > window_end, 10, "the window is over")
    model.release.set()

    await telegram.wait_for(lambda: bool(stack.edits(message_id)))
    assert [edit["text"] for edit in stack.edits(message_id)] == ["✅ Заказ 8042 отменён"]
    assert await stack.order("8042") == "cancelled"
    steps = await stack.wait_for_step(yes.split(":")[1], "executed")
    assert [step["event"] for step in steps] == ["proposed", "confirmed", "executed"]
    # The customer decided when they pressed, not when the worker got to it.
    # (Within two milliseconds: the intake and the audit each keep whole milliseconds.)
    assert abs(float(steps[1]["decide_ms"]) - CONFIRM_SECONDS * 1000 / 2) <= 2


async def test_a_press_that_arrived_late_still_expires(
    stack: Stack, telegram: FakeTelegramServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    message_id, _, (yes, _) = await stack.card("отмените заказ 8042")
    proposed = await proposed_at(stack)
    # Arrived a second after the window, whenever the worker gets to it.
    press_arrives_at(stack, monkeypatch, proposed + timedelta(seconds=CONFIRM_SECONDS + 1))

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
