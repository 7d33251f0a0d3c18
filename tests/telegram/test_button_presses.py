"""Typed button presses: each kind's data, its router's filter, and presses of no kind.

The bot's buttons carry aiogram ``CallbackData`` (:class:`ActionPress`,
:class:`FeedbackPress`, :class:`OfferPress`). These tests prove that the data
packs to the format buttons already sent to customers carry (they keep
working), that each router takes its own kind of press only (so the routers'
order does not matter: end to end with the routers reversed), and that a press
no button of the bot sends (forged, malformed, the corpus's inline press) gets
the kind «Кнопка больше не действует» and no stack trace.
"""

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from aiogram import Bot, Router
from aiogram.dispatcher.event.bases import UNHANDLED
from aiogram.types import CallbackQuery

from bot import customer_texts
from bot.actions.buttons import ActionPress
from bot.csat.callback import FeedbackPress
from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.queue.delivery import Reply
from bot.sessions.pending import new_action_id
from bot.storage.keys import telegram_conversation
from bot.telegram.callbacks import read_press
from bot.telegram.escalation_offer import CALLBACK_DATA, OfferPress
from bot.telegram.handlers import actions as action_handlers
from bot.telegram.handlers import escalation as escalation_handlers
from bot.telegram.handlers import feedback as feedback_handlers
from bot.testing.audit_entries import stream_entries
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from tests.support.corpus import TELEGRAM_UPDATES, absent, load_corpus
from turn import new_turn_id

pytestmark = pytest.mark.timeout(60)

CHAT = 9300
# Fixed ids (test ids name them, and pytest-xdist's workers must collect the same ones).
QUESTION = "J8GDJTGQY4"
ACTION = "gq9nzjuu9rusv4be"

_CORPUS_PRESSES = [u for u in load_corpus(TELEGRAM_UPDATES) if "callback_query" in u]

# Data no button of the bot sends: near misses of each kind, and things from elsewhere.
MALFORMED = (
    "act:",
    "act:forged:y",
    f"act:{ACTION}:yes",
    f"act:{ACTION}:y:again",
    f"act:{ACTION.upper()}:y",
    f"csat:{QUESTION}:05",
    f"csat:{QUESTION}: 5",
    f"csat:{QUESTION}:5.0",
    f"csat:{QUESTION}:6",
    f"csat:{QUESTION.lower()}:5",
    "csat:",
    "esc:",
    "esc:person ",
    "esc:person:now",
    "esc:staff",
    "some_data",
    "кнопка:нажата",
    "x" * 64,
)


def test_each_kind_packs_to_the_data_its_buttons_already_carry() -> None:
    """Cards, questions and offers sent before the data was typed keep working."""
    assert len(new_turn_id()) == len(QUESTION)
    assert len(new_action_id()) == len(ACTION)
    assert ActionPress.of(ACTION, "yes").pack() == f"act:{ACTION}:y"
    assert ActionPress.of(ACTION, "no").pack() == f"act:{ACTION}:n"
    assert [FeedbackPress(question_id=QUESTION, score=n).pack() for n in (1, 5)] == [
        f"csat:{QUESTION}:1",
        f"csat:{QUESTION}:5",
    ]
    assert CALLBACK_DATA == OfferPress(whom="person").pack() == "esc:person"
    assert read_press(f"act:{ACTION}:n") == ActionPress.of(ACTION, "no")
    assert read_press(f"csat:{QUESTION}:4") == FeedbackPress(question_id=QUESTION, score=4)
    assert read_press("esc:person") == OfferPress(whom="person")


@pytest.mark.parametrize("data", [*MALFORMED, "", None])
def test_data_no_button_sends_reads_as_no_press(data: str | None) -> None:
    assert read_press(data) is None


def _callback(data: str) -> CallbackQuery:
    """The customer's press with ``data`` under the bot's message in their private chat."""
    return CallbackQuery.model_validate(
        {
            "id": "cb1",
            "from": {"id": CHAT, "is_bot": False, "first_name": "Анна"},
            "chat_instance": "ci",
            "message": {
                "message_id": 7,
                "date": 1_700_000_000,
                "chat": {"id": CHAT, "type": "private", "first_name": "Анна"},
                "from": {"id": 1, "is_bot": True, "first_name": "Bot"},
                "text": "карточка",
            },
            "data": data,
        }
    )


KINDS = {
    "action": (action_handlers.build_router, ActionPress.of(ACTION, "yes").pack()),
    "feedback": (
        feedback_handlers.build_router,
        FeedbackPress(question_id=QUESTION, score=3).pack(),
    ),
    "offer": (escalation_handlers.build_router, CALLBACK_DATA),
}


@pytest.mark.parametrize(("router_kind", "press_kind"), list(itertools.product(KINDS, KINDS)))
async def test_a_button_router_takes_its_own_kind_of_press_only(
    router_kind: str, press_kind: str
) -> None:
    """No router takes another kind's press, so their order in the dispatcher does not matter.

    Without services (``actions``, ``feedback``, ``handoff`` absent) a router's
    handler that runs returns ``None`` or the offer's «no operator» reply; a
    router whose filter refuses the press leaves it unhandled.
    """
    build, _ = KINDS[router_kind]
    router: Router = build()
    _, data = KINDS[press_kind]

    result = await router.propagate_event("callback_query", _callback(data), job=None)

    if router_kind != press_kind:
        assert result is UNHANDLED
    elif router_kind == "offer":
        assert isinstance(result, Reply)
        assert result.text == customer_texts.OPERATOR_OFF
    else:
        assert result is None


def _echo(
    messages_: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    return text_result(f"Ответ: {messages_[-1]['content']}")


BUTTON_ROUTERS = {
    action_handlers.__name__,
    feedback_handlers.__name__,
    escalation_handlers.__name__,
}


@pytest.fixture
async def reversed_stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[TelegramStack]:
    """The bot with the satisfaction question on and its button routers in reverse order.

    The confirmation card's router comes first: it once took every press.
    """
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="presses",
        AUDIT_STREAM="presses:audit",
        SESSION_LEASE_SECONDS=3,
        CSAT_AFTER_IDLE_MINUTES=0.001,
    )
    async with open_application(settings, llm=ScriptedClient(_echo)) as app:
        stack = TelegramStack(app, bot, telegram=telegram, sweep_period_seconds=0.02)
        routers = stack.side.front.dispatcher.sub_routers
        places = [n for n, router in enumerate(routers) if router.name in BUTTON_ROUTERS]
        assert len(places) == len(BUTTON_ROUTERS)
        for place, router in zip(places, reversed([routers[n] for n in places]), strict=True):
            routers[place] = router
        assert routers[places[0]].name == action_handlers.__name__
        async with stack.running(sweep=True):
            yield stack


def _answers(telegram: FakeTelegramServer) -> list[Any]:
    return [call.params.get("text") for call in telegram.calls_of("answerCallbackQuery")]


async def test_a_score_is_recorded_with_the_card_router_first(
    reversed_stack: TelegramStack,
) -> None:
    stack, telegram = reversed_stack, reversed_stack.telegram
    await stack.feed(telegram.message_update(CHAT, "где мой заказ?"))
    await telegram.wait_for(lambda: len(telegram.keyboards(CHAT)) == 1)
    [(message_id, text, keyboard)] = telegram.keyboards(CHAT)
    assert text == customer_texts.CSAT_QUESTION

    await stack.feed(telegram.callback_update(CHAT, message_id, keyboard[0][4]["callback_data"]))

    def thanked() -> bool:
        return any(
            call.ok and call.params.get("message_id") == message_id
            for call in telegram.calls_of("editMessageText")
        )

    await telegram.wait_for(thanked)
    assert _answers(telegram) == [customer_texts.CSAT_THANKS]
    answered = await _answered(stack)
    assert [entry["score"] for entry in answered] == ["5"]


async def _answered(stack: TelegramStack) -> list[dict[str, str]]:
    """The satisfaction answers audited, once there is one (the audit follows the delivery)."""
    async with asyncio.timeout(10):
        while True:
            entries = await stream_entries(stack.app.redis, "presses:audit")
            found = [e for e in entries if e.get("type") == "feedback" and e["event"] == "answered"]
            if found:
                return found
            await asyncio.sleep(0.01)


async def test_presses_of_no_known_button_get_a_kind_answer_and_no_stack_trace(
    reversed_stack: TelegramStack, caplog: pytest.LogCaptureFixture
) -> None:
    """Malformed data in the customer's chat and the corpus's press under an inline message."""
    stack, telegram = reversed_stack, reversed_stack.telegram
    if not _CORPUS_PRESSES:
        pytest.skip(absent(TELEGRAM_UPDATES))
    caplog.set_level(logging.INFO)
    without_data = telegram.callback_update(CHAT, 7, "x")
    del without_data["callback_query"]["data"]
    updates = [
        *(telegram.callback_update(CHAT, 7, data) for data in MALFORMED),
        without_data,
        *_CORPUS_PRESSES,
    ]

    verdicts = [await stack.feed(update) for update in updates]

    assert verdicts == [None] * len(updates), "a press of no known button was queued"
    assert _answers(telegram) == [customer_texts.BUTTON_FORGED_ANSWER] * len(updates)
    queue = stack.app.keys.conversation(telegram_conversation(CHAT)).queue
    assert await stack.app.redis.llen(queue) == 0
    # The chat goes on as before.
    await stack.settle(CHAT)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
