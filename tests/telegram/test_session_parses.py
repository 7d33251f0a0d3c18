"""How often one job reads the session's JSON into a ``ConversationSession``.

The whole Telegram side runs in this loop (intake, the real dispatcher, the
worker's job runner, a real Redis, the fake Bot API) with handoff (a staff
chat) and the request analysis on, the features whose filters and handlers
read the session. Every parse is counted by wrapping
``ConversationSession.model_validate_json``, which ``session_of`` and the
session store both use.
"""

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from aiogram import Bot

from bot.actions.buttons import ActionPress
from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.sessions.models import ConversationSession
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application

pytestmark = pytest.mark.timeout(60)

STAFF = -1001234567891
CUSTOMER = 7_041
ACTION = "gq9nzjuu9rusv4be"
PARSES_PER_JOB = 1
"""The worker reads the session once per job, and every reader of the job shares it
(six before issue 49: the handoff filter and the chat handler's handoff checks,
the language middleware, the photo check and the store's hold each parsed it).
A commit writes the new session without reading it again: a turn that starts a
session parses nothing."""
PRESS_WORKER_PARSES = 1
"""A press on a card: the job's one parse, shared by ``CardPresses.press`` and the
press's turn (two before, when the press read ``session_data`` itself)."""
PRESS_INTAKE_PARSES = 1
"""Intake predicts a card press's verdict from the session it loads."""


def _responder(
    messages_: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    return text_result(f"Ответ: {messages_[-1]['content']}")


class Parses:
    """Counts ``ConversationSession.model_validate_json`` calls."""

    def __init__(self) -> None:
        self.count = 0


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Parses:
    seen = Parses()
    original = ConversationSession.model_validate_json

    def counted(cls: type[ConversationSession], *args: Any, **kwargs: Any) -> ConversationSession:
        seen.count += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(ConversationSession, "model_validate_json", classmethod(counted))
    return seen


@pytest.fixture
async def stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[TelegramStack]:
    telegram.make_forum(STAFF)
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="parses",
        AUDIT_STREAM="parses:audit",
        STAFF_CHAT_ID=STAFF,
        ANALYSIS="on",
    )
    async with open_application(settings, llm=ScriptedClient(_responder)) as app:
        built = TelegramStack(app, bot, telegram=telegram)
        # No workers of their own: each job is run by ``drain``, one at a time.
        async with built.running(work=False):
            yield built


async def _turn(stack: TelegramStack, telegram: FakeTelegramServer, text: str) -> None:
    await stack.feed(telegram.message_update(CUSTOMER, text))
    await stack.drain(CUSTOMER)
    assert f"Ответ: {text}" in telegram.sent_texts(CUSTOMER)


async def test_a_text_turn_parses_the_stored_session_once(
    stack: TelegramStack, telegram: FakeTelegramServer, parses: Parses
) -> None:
    # The first turn starts the session: nothing stored to read, and its commit reads nothing.
    await _turn(stack, telegram, "Где мой заказ 12345?")
    assert parses.count == 0
    before = parses.count

    await _turn(stack, telegram, "А когда привезут?")

    assert parses.count - before == PARSES_PER_JOB


async def test_a_card_press_parses_the_session_once_at_intake_and_twice_in_the_worker(
    stack: TelegramStack, telegram: FakeTelegramServer, parses: Parses
) -> None:
    await _turn(stack, telegram, "Где мой заказ 12345?")
    before = parses.count

    # A press on a card whose action is not (or no longer) the chat's pending one.
    await stack.feed(telegram.callback_update(CUSTOMER, 7, ActionPress.of(ACTION, "yes").pack()))
    at_intake = parses.count - before
    await stack.drain(CUSTOMER)

    assert at_intake == PRESS_INTAKE_PARSES
    assert parses.count - before - at_intake == PRESS_WORKER_PARSES
