"""Actions through Telegram: the card, the press, the outcome (fake Bot API, real Redis).

The real intake queues messages and button presses; a worker of this test's
event loop runs them through the real dispatcher and chat service over a
scripted model; the fake Bot API records the card, the callback answers and
the edits.
"""

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from aiogram import Bot
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from bot.app import Application
from bot.engine.history import ACTION_NOTE
from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.testing.audit_entries import stream_entries
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result, tool_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from bot.tryout.demo_shop import RedisDemoShop
from tools.shop_backend import Customer

CHAT = 8100
STRANGER = 8199
ADDRESS = re.compile(r"адрес .* на (.+)$")


def shop_model(
    messages_: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    """Proposes the write the customer asked for; after a tool result, says to press."""
    if messages_[-1]["role"] == "tool":
        return text_result("Проверьте карточку и нажмите «Подтвердить».")
    text = str(messages_[-1]["content"])
    if "отмените" in text:
        order = re.search(r"\d{4}", text)
        return tool_result(
            "cancel_order", {"order_id": order.group() if order else "", "reason": "передумал"}
        )
    if (address := ADDRESS.search(text)) is not None:
        return tool_result(
            "change_delivery_address", {"order_id": "8042", "address": address.group(1)}
        )
    return text_result(f"Ответ: {text}")


class Stack(TelegramStack):
    """Intake and one worker pool over a real Redis and the fake Bot API."""

    def __init__(
        self, app: Application, bot: Bot, telegram: FakeTelegramServer, model: ScriptedClient
    ) -> None:
        super().__init__(app, bot, telegram=telegram)
        self.model = model

    async def settle(self, chat_id: int = CHAT) -> None:
        """Wait until every update queued so far was handled (a /help barrier)."""
        await super().settle(chat_id)

    async def card(self, text: str, count: int = 1) -> tuple[int, str, list[str]]:
        """Ask ``text``; the ``count``-th card's message id, text and callback data."""
        await self.feed(self.telegram.message_update(CHAT, text))
        await self.telegram.wait_for(lambda: len(self.telegram.keyboards(CHAT)) >= count)
        message_id, card_text, keyboard = self.telegram.keyboards(CHAT)[count - 1]
        return message_id, card_text, [button["callback_data"] for button in keyboard[0]]

    def edits(self, message_id: int) -> list[dict[str, Any]]:
        return [
            call.params
            for call in self.telegram.calls_of("editMessageText")
            if call.ok and call.params.get("message_id") == message_id
        ]

    def callback_answers(self) -> list[str | None]:
        return [call.params.get("text") for call in self.telegram.calls_of("answerCallbackQuery")]

    async def action_steps(self, action_id: str) -> list[dict[str, str]]:
        entries = await stream_entries(self.app.redis, "actions:audit")
        return [
            entry
            for entry in entries
            if entry.get("type") == "action" and entry.get("action_id") == action_id
        ]

    async def wait_for_step(self, action_id: str, event: str) -> list[dict[str, str]]:
        """Poll the audit stream until ``event`` of ``action_id`` is there (it follows delivery)."""
        async with asyncio.timeout(10):
            while True:
                steps = await self.action_steps(action_id)
                if any(step["event"] == event for step in steps):
                    return steps
                await asyncio.sleep(0.01)

    async def order(self, order_id: str) -> str:
        shop = RedisDemoShop(self.app.redis, self.app.keys, self.app.shop)
        order = await shop.order(Customer(user_id=CHAT, chat_id=CHAT), order_id)
        assert order is not None
        return order.status


async def _stack(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    bot: Bot,
    model: ScriptedClient | None = None,
    **env: Any,
) -> AsyncIterator[Stack]:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="actions",
        AUDIT_STREAM="actions:audit",
        SESSION_LEASE_SECONDS=3,
        **env,
    )
    model = model or ScriptedClient(shop_model)
    async with open_application(settings, llm=model) as app:
        stack = Stack(app, bot, telegram, model)
        async with stack.running():
            yield stack


@pytest.fixture
async def stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    async for built in _stack(redis_server, telegram, bot):
        yield built


async def test_confirm_executes_once_edits_the_card_and_tells_the_outcome(stack: Stack) -> None:
    message_id, text, (yes, no) = await stack.card("отмените заказ 8042")

    assert text == (
        "Отменить заказ 8042: наушники, чехол для наушников. "
        "Деньги вернутся на карту в течение 5 дней."
    )
    [(_, _, keyboard)] = stack.telegram.keyboards(CHAT)
    assert [button["text"] for button in keyboard[0]] == ["Подтвердить", "Не нужно"]
    assert all(len(data.encode()) <= 64 for data in (yes, no))
    # The model's reply came first, the card after it.
    assert stack.telegram.sent_texts(CHAT)[-2:] == [
        "Проверьте карточку и нажмите «Подтвердить».",
        text,
    ]
    assert await stack.order("8042") == "processing"

    await stack.feed(stack.telegram.callback_update(CHAT, message_id, yes))
    await stack.telegram.wait_for(lambda: bool(stack.edits(message_id)))

    [edit] = stack.edits(message_id)
    assert edit["text"] == "✅ Заказ 8042 отменён"
    assert "reply_markup" not in edit
    await stack.telegram.wait_for(
        lambda: (
            "Заказ 8042 отменён. Деньги вернутся на карту в течение 5 дней."
            in stack.telegram.sent_texts(CHAT)
        )
    )
    assert await stack.order("8042") == "cancelled"
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert session.pending_action is None
    assert session.messages[-1].action_id is not None

    # A second press on the same card: nothing changes, a short answer on the callback.
    await stack.feed(stack.telegram.callback_update(CHAT, message_id, yes))
    await stack.settle()
    assert len(stack.edits(message_id)) == 1
    assert stack.callback_answers()[-1] == "Уже выполнено или больше не действует"
    outcomes = [t for t in stack.telegram.sent_texts(CHAT) if t.startswith("Заказ 8042 отменён")]
    assert len(outcomes) == 1

    # The model reads the outcome on the next turn, marked as the application's.
    await stack.feed(stack.telegram.message_update(CHAT, "спасибо"))
    await stack.telegram.wait_for(lambda: "Ответ: спасибо" in stack.telegram.sent_texts(CHAT))
    history = [str(m["content"]) for m in stack.model.requests[-1][0] if m["role"] == "assistant"]
    assert any(text.startswith(ACTION_NOTE) and "Заказ 8042 отменён" in text for text in history)

    steps = await stack.wait_for_step(yes.split(":")[1], "executed")
    assert [step["event"] for step in steps] == ["proposed", "confirmed", "executed"]
    assert {step["tool_name"] for step in steps} == {"cancel_order"}
    assert float(steps[1]["decide_ms"]) >= 0
    assert float(steps[2]["duration_ms"]) > 0
    assert all("передумал" not in value for step in steps for value in step.values())
    registry = stack.app.metrics.registry
    for event in ("proposed", "confirmed", "executed"):
        labels = {"tool": "cancel_order", "event": event}
        assert registry.get_sample_value("support_actions_total", labels) == 1


async def test_decline_changes_nothing_and_says_so(stack: Stack) -> None:
    message_id, _, (_, no) = await stack.card("отмените заказ 8042")

    await stack.feed(stack.telegram.callback_update(CHAT, message_id, no))
    await stack.telegram.wait_for(lambda: bool(stack.edits(message_id)))

    assert stack.edits(message_id)[0]["text"] == "Отмена не выполнена: вы отказались"
    assert await stack.order("8042") == "processing"
    await stack.telegram.wait_for(
        lambda: "Отмена не выполнена: вы отказались." in stack.telegram.sent_texts(CHAT)
    )


async def test_a_double_press_within_milliseconds_executes_once(stack: Stack) -> None:
    message_id, _, (yes, _) = await stack.card("отмените заказ 8042")

    await asyncio.gather(
        stack.feed(stack.telegram.callback_update(CHAT, message_id, yes)),
        stack.feed(stack.telegram.callback_update(CHAT, message_id, yes)),
    )
    await stack.settle()

    assert len(stack.edits(message_id)) == 1
    outcomes = [t for t in stack.telegram.sent_texts(CHAT) if t.startswith("Заказ 8042 отменён")]
    assert len(outcomes) == 1
    assert len(stack.telegram.calls_of("answerCallbackQuery")) == 2


async def test_forged_and_foreign_presses_change_nothing(stack: Stack) -> None:
    message_id, _, (yes, _) = await stack.card("отмените заказ 8042")
    action_id = yes.split(":")[1]

    await stack.feed(stack.telegram.callback_update(CHAT, message_id, "act:forged:y"))
    await stack.feed(stack.telegram.callback_update(CHAT, message_id, f"act:{'z' * 16}:y"))
    await stack.feed(stack.telegram.callback_update(CHAT, message_id, yes, user_id=STRANGER))
    await stack.settle()

    assert stack.edits(message_id) == []
    assert await stack.order("8042") == "processing"
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert session.pending_action is not None
    assert session.pending_action.action_id == action_id
    assert stack.callback_answers() == [
        "Кнопка больше не действует",
        "Уже выполнено или больше не действует",
        "Эта кнопка не для вас",
    ]


async def test_a_press_on_a_superseded_card_changes_nothing(stack: Stack) -> None:
    old_id, _, (old_yes, _) = await stack.card("отмените заказ 8042")
    new_id, new_text, _ = await stack.card(
        "поменяйте адрес доставки заказа 8042 на Казань, ул. Баумана, 5", count=2
    )
    assert new_text == "Изменить адрес доставки заказа 8042 на: «Казань, ул. Баумана, 5»"

    # The superseded card says so, its buttons gone.
    [superseded] = stack.edits(old_id)
    assert superseded["text"] == "Предложение заменено новым: смотрите карточку ниже"
    assert "reply_markup" not in superseded

    await stack.feed(stack.telegram.callback_update(CHAT, old_id, old_yes))
    await stack.settle()

    assert await stack.order("8042") == "processing"
    assert len(stack.edits(old_id)) == 1
    assert stack.callback_answers()[-1] == "Уже выполнено или больше не действует"
    assert new_id != old_id


@pytest.fixture
async def hasty_stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    async for built in _stack(redis_server, telegram, bot, ACTION_CONFIRM_SECONDS=0.001):
        yield built


async def test_a_press_after_the_deadline_expires_the_action(hasty_stack: Stack) -> None:
    stack = hasty_stack
    message_id, _, (yes, _) = await stack.card("отмените заказ 8042")

    await stack.feed(stack.telegram.callback_update(CHAT, message_id, yes))
    await stack.telegram.wait_for(lambda: bool(stack.edits(message_id)))

    assert stack.edits(message_id)[0]["text"] == "Срок подтверждения истёк"
    assert stack.callback_answers() == ["Срок подтверждения истёк"]
    assert await stack.order("8042") == "processing"
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert session.pending_action is None


async def test_precondition_failure_goes_back_to_the_model_and_no_card(stack: Stack) -> None:
    await stack.feed(stack.telegram.message_update(CHAT, "отмените заказ 8041"))
    await stack.settle()

    assert stack.telegram.keyboards(CHAT) == []
    [tool_message] = [m for m in stack.model.requests[-1][0] if m["role"] == "tool"]
    error = json.loads(str(tool_message["content"]))["error"]
    assert error["code"] == "not_cancellable"
    assert await stack.order("8041") == "in_transit"
    session = await stack.app.sessions.load(f"tg:{CHAT}")
    assert session is not None
    assert session.pending_action is None


_examples = itertools.count(1)
# Never shaped like anything the audit writes on its own: a leak is the only way in.
MARK = "ПРИЗНАК-"


@hypothesis_settings(
    max_examples=15,
    deadline=None,
    # No shrinking: each example costs a whole turn and a press; the first leak is enough.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    # The stack is built once (it is costly); each example uses a chat of its own.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    address=st.text(min_size=1, max_size=200).map(lambda text: MARK + text),
    reason=st.text(min_size=1, max_size=200).map(lambda text: MARK + text),
    confirm=st.booleans(),
)
async def test_the_audit_never_holds_an_actions_arguments(
    planned_stack: "PlannedStack", address: str, reason: str, confirm: bool
) -> None:
    stack = planned_stack
    chat = 20_000 + next(_examples)
    tool, arguments = (
        ("change_delivery_address", {"order_id": "8042", "address": address})
        if confirm
        else ("cancel_order", {"order_id": "8042", "reason": reason})
    )
    stack.plans[f"план {chat}"] = (tool, arguments)
    await stack.stack.feed(stack.stack.telegram.message_update(chat, f"план {chat}"))
    await stack.stack.telegram.wait_for(lambda: bool(stack.stack.telegram.keyboards(chat)))
    message_id, _, keyboard = stack.stack.telegram.keyboards(chat)[0]
    yes, no = (button["callback_data"] for button in keyboard[0])
    await stack.stack.feed(
        stack.stack.telegram.callback_update(chat, message_id, yes if confirm else no)
    )
    action_id = yes.split(":")[1]
    steps = await stack.stack.wait_for_step(action_id, "executed" if confirm else "declined")

    every_value = [
        value
        for entry in await stream_entries(stack.stack.app.redis, "actions:audit")
        for value in entry.values()
    ]
    assert all(MARK not in value for value in every_value)
    assert steps[0]["event"] == "proposed"


@dataclass
class PlannedStack:
    """A stack whose model calls the write tool planned for each message text."""

    stack: Stack
    plans: dict[str, tuple[str, dict[str, Any]]]


@pytest.fixture
async def planned_stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[PlannedStack]:
    plans: dict[str, tuple[str, dict[str, Any]]] = {}

    def planned(
        messages_: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
    ) -> LLMResult:
        if messages_[-1]["role"] == "tool":
            return text_result("Нажмите кнопку на карточке.")
        name, arguments = plans[str(messages_[-1]["content"])]
        return tool_result(name, arguments)

    async for built in _stack(redis_server, telegram, bot, model=ScriptedClient(planned)):
        yield PlannedStack(built, plans)


async def test_a_429_on_a_press_answer_is_waited_and_the_spinner_stopped(stack: Stack) -> None:
    message_id, _, (_, no) = await stack.card("отмените заказ 8042")
    stack.telegram.fail_next(
        "answerCallbackQuery", 429, "Too Many Requests: retry after 1", retry_after=1
    )

    await stack.feed(stack.telegram.callback_update(CHAT, message_id, no))
    await stack.telegram.wait_for(lambda: bool(stack.edits(message_id)))

    # Answered once Telegram let it, with the same short text: not dropped, not doubled.
    answers = stack.telegram.calls_of("answerCallbackQuery")
    assert [call.status for call in answers] == [429, 200]
    assert answers[0].params.get("text") == answers[1].params.get("text")
