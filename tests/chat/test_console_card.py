"""A card waiting in the console: commands stay commands, yes and no in both languages.

The console in this process (``Console`` over a real Redis, the offline demo model that
proposes the write actions), fed lines as a developer types them.
"""

import io
import itertools
from dataclasses import dataclass

import pytest

from bot import customer_texts
from bot.app import build_application
from bot.console import Console, ConsoleScreen, decision_of
from bot.testing.audit_entries import stream_entries
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings

pytestmark = pytest.mark.timeout(90)

_prefixes = itertools.count()

CANCEL_8042_CARD = (
    "[Карточка] Отменить заказ 8042: наушники, чехол для наушников. "
    "Деньги вернутся на карту в течение 5 дней."
)
CANCELLED_8042 = "Заказ 8042 отменён. Деньги вернутся на карту в течение 5 дней."


@dataclass(frozen=True)
class Chat:
    """What the console printed, and what it left in the audit and in Redis."""

    out: str
    events: list[str]
    turns: int
    session_language: str | None
    language_chosen: bool
    pending: bool


async def chat(
    redis_server: RedisServer, lines: str, *, prefix: str | None = None, **env: str
) -> Chat:
    """Run the console over ``lines`` (a conversation of its own unless ``prefix``)."""
    prefix = prefix or f"console-card-{next(_prefixes)}"
    settings = make_settings(
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX=prefix,
        AUDIT_STREAM=f"{prefix}:audit",
        STREAMING="off",
        **env,
    )
    app = await build_application(settings)
    stdin = io.StringIO(lines)
    stdout = io.StringIO()
    console = Console(app, "dev", stdin, ConsoleScreen(stdin, stdout, io.StringIO()))
    try:
        assert await console.run() == 0
        session = await app.sessions.load("dev")
        entries = await stream_entries(app.redis, f"{prefix}:audit")
    finally:
        await app.aclose()
    return Chat(
        out=stdout.getvalue(),
        events=[entry["event"] for entry in entries if entry.get("type") == "action"],
        turns=sum(1 for entry in entries if entry.get("type") == "turn"),
        session_language=session.language if session is not None else None,
        language_chosen=session.language_chosen if session is not None else False,
        pending=session is not None and session.pending_action is not None,
    )


@pytest.mark.parametrize("word", ["д", "да", "Да", "ДА!", "y", "yes", "Yes", "YES."])
def test_yes_in_either_language_is_understood(word: str) -> None:
    assert decision_of(word) == "yes"


@pytest.mark.parametrize("word", ["н", "нет", "Нет", "n", "no", "No", "NO!"])
def test_no_in_either_language_is_understood(word: str) -> None:
    assert decision_of(word) == "no"


@pytest.mark.parametrize("line", ["да, но позже", "yes please cancel", "нету", "д/н", ""])
def test_anything_else_is_no_decision(line: str) -> None:
    assert decision_of(line) is None


async def test_da_confirms_the_card_and_nobody_is_told_to_press_a_button(
    redis_server: RedisServer,
) -> None:
    result = await chat(redis_server, "отмените заказ 8042\nда\n/exit\n")
    assert CANCEL_8042_CARD in result.out
    assert f"Бот: {CANCELLED_8042}" in result.out
    assert "нажмите кнопку" not in result.out
    assert "Карточка ждёт решения" not in result.out
    assert result.events == ["proposed", "confirmed", "executed"]
    assert result.turns == 1  # «да» was a decision, not a message to the model


async def test_no_in_english_declines_the_card(redis_server: RedisServer) -> None:
    result = await chat(redis_server, "отмените заказ 8042\nno\n/exit\n")
    assert result.events == ["proposed", "declined"]
    assert result.turns == 1
    assert not result.pending


async def test_commands_while_a_card_waits_are_commands_and_the_card_still_waits(
    redis_server: RedisServer,
) -> None:
    result = await chat(
        redis_server,
        "отмените заказ 8042\n/help\n/operator\n/analyze\n/language\nд\n/exit\n",
    )
    out = result.out
    # One turn (the request); none of the commands reached the model.
    assert result.turns == 1
    assert out.count("model=offline-demo steps=") == 1
    assert "Анализ обращения:" in out
    assert out.count(customer_texts.CONSOLE_HELP) == 2  # the greeting's and /help's
    assert f"Бот: {customer_texts.OPERATOR_OFF}" in out
    assert "Выберите язык бота:" in out
    # The card was shown once; after each command a one-line reminder, never the card again.
    assert out.count(CANCEL_8042_CARD) == 1
    assert out.count(customer_texts.CONSOLE_CARD_WAITING) == 4
    # ... and «д» still answered it.
    assert f"Бот: {CANCELLED_8042}" in out
    assert result.events == ["proposed", "confirmed", "executed"]


async def test_new_while_a_card_waits_closes_it_truthfully_through_the_press_path(
    redis_server: RedisServer,
) -> None:
    result = await chat(redis_server, "отмените заказ 8042\n/new\nд\nГде заказ 8042?\n/exit\n")
    out = result.out
    assert customer_texts.CONSOLE_CARD_CLOSED in out
    assert customer_texts.CONSOLE_NEW_CONVERSATION in out
    # Declined, as a press of «Не нужно» is: the audit says what happened.
    assert result.events == ["proposed", "declined"]
    assert not result.pending
    # «д» after /new is an ordinary message (no card waits), and the order was not touched.
    assert result.turns == 3
    assert CANCELLED_8042 not in out
    assert "Заказ 8042: Собирается на складе." in out


async def test_an_english_conversation_gets_its_card_prompt_in_english(
    redis_server: RedisServer,
) -> None:
    result = await chat(redis_server, "please cancel order 8042\nWhat time is it?\nyes\n/exit\n")
    out = result.out
    assert "You: " in out
    assert "[Card] " in out
    assert "Confirm [y] / No, thanks [n]?" in out
    assert "The card is waiting for your decision" in out
    # Only the greeting (before the first words decided the language) is in Russian.
    assert "Карточка" not in out
    assert "Подтвердить" not in out
    assert result.events == ["proposed", "confirmed", "executed"]
    assert result.session_language == "en"


async def test_language_is_a_console_command_like_telegrams(redis_server: RedisServer) -> None:
    result = await chat(
        redis_server,
        "/language\n/language de\n/language en-US\n/help\nГде заказ 8041?\n/exit\n",
    )
    out = result.out
    assert result.turns == 1  # only the question reached the model
    assert "Выберите язык бота:" in out
    assert "/language en — English" in out
    assert "Такого языка у бота нет." in out
    assert "Bot: OK, from now on I write in English." in out
    # The console's own texts follow the chosen language.
    assert "Commands: /new" in out
    assert (result.session_language, result.language_chosen) == ("en", True)


async def test_the_console_speaks_the_default_language_from_the_start(
    redis_server: RedisServer,
) -> None:
    result = await chat(redis_server, "/help\n/exit\n", DEFAULT_LANGUAGE="en")
    assert result.out.startswith("Support chat (conversation dev).")
    assert "Чат поддержки" not in result.out
    assert "Вы: " not in result.out
    assert result.out.count("Commands: /new") == 2


async def test_a_card_left_waiting_is_shown_again_when_the_console_comes_back(
    redis_server: RedisServer,
) -> None:
    prefix = f"console-card-{next(_prefixes)}"
    left = await chat(redis_server, "отмените заказ 8042\n/exit\n", prefix=prefix)
    assert left.pending
    back = await chat(redis_server, "да\n/exit\n", prefix=prefix)
    assert back.out.count(CANCEL_8042_CARD) == 1
    assert f"Бот: {CANCELLED_8042}" in back.out
    assert back.events == ["proposed", "confirmed", "executed"]
    assert back.turns == 1  # the first console's request only
