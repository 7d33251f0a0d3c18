"""Help-center links in answers must name an article that exists.

The rules on the check itself, then the whole way: the model's answer cites a
real article and an invented one; the real intake and worker send it through
the fake Bot API, and the customer and the stored history see only the real one;
streamed from the scripted OpenAI server, the drafts never show the invented one.
"""

from collections.abc import Sequence

import pytest
from aiogram import Bot

from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.testing.openai_server import ScriptedOpenAIServer, text_answer, trickle
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result
from bot.testing.settings import make_settings, stack_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from tests.telegram.conftest import bot
from tools.knowledge.citations import CitationCheck

__all__ = ["bot"]

REAL = "https://help.shop.example/returns/refunds"
INVENTED = "https://help.shop.example/returns/instant-refund-guarantee"
CHAT = 9500

check = CitationCheck(lambda: [REAL, "https://help.shop.example/business"])


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        (f"Подробнее: {REAL}", f"Подробнее: {REAL}"),
        (f"Подробнее: {REAL}/ и {REAL}#section", f"Подробнее: {REAL}/ и {REAL}#section"),
        (f"См. {INVENTED}.", "См."),
        (f"См. [статью]({INVENTED}) о возврате.", "См. статью о возврате."),
        (f"[Возврат]({REAL})", f"[Возврат]({REAL})"),
        ("Ссылка: http://www.HELP.shop.example/returns/fake, и всё", "Ссылка: и всё"),
        ("Наш сайт: https://shop.example/catalog", "Наш сайт: https://shop.example/catalog"),
        (f"Две: {INVENTED}\nи {REAL}", f"Две:\nи {REAL}"),
        ("https://help.shop.example/business?x=1", ""),
    ],
)
def test_only_links_to_existing_articles_stay(answer: str, shown: str) -> None:
    assert check(answer).text == shown


def test_the_count_of_removed_links_is_told() -> None:
    checked = check(f"{INVENTED} и [ещё]({INVENTED}x) и {REAL}")
    assert checked.removed == 2
    assert checked.text == f"и ещё и {REAL}"


def test_without_article_urls_nothing_is_checked() -> None:
    assert CitationCheck(list)(f"См. {INVENTED}").text == f"См. {INVENTED}"


def model(
    messages_: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    return text_result(
        f"Деньги вернутся за 5 дней, подробнее: [Возврат денег]({REAL}). "
        f"Гарантия мгновенного возврата: {INVENTED}"
    )


async def test_an_invented_help_center_link_never_reaches_the_customer_or_the_history(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> None:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="citations",
        AUDIT_STREAM="citations:audit",
        STREAMING="off",
    )
    async with open_application(settings, llm=ScriptedClient(model)) as app:
        stack = TelegramStack(app, bot, telegram=telegram)
        async with stack.running():
            await stack.feed(telegram.message_update(CHAT, "когда вернутся деньги?"))
            [shown] = await telegram.wait_for_texts(CHAT, 1)
            session = await app.sessions.load(f"tg:{CHAT}")

    assert INVENTED not in shown
    assert "instant-refund" not in shown
    assert shown.startswith("Деньги вернутся за 5 дней")
    [message] = [call for call in telegram.calls_of("sendMessage") if call.ok]
    assert any(entity.get("url") == REAL for entity in message.params.get("entities", []))
    assert session is not None
    answer = session.messages[-1].content
    assert INVENTED not in answer
    assert REAL in answer


async def test_the_draft_preview_never_shows_the_invented_link_either(
    telegram: FakeTelegramServer, openai_server: ScriptedOpenAIServer, redis_server: RedisServer
) -> None:
    answer = f"Подробнее: [Возврат денег]({REAL}). Гарантия: {INVENTED} — вот и всё."
    openai_server.script(trickle(text_answer(answer), chunk_chars=4, interval_seconds=0.03))
    settings = stack_settings(
        telegram,
        openai_server,
        redis_server.url,
        prefix="citedrafts",
        STREAM_DRAFT_INTERVAL_SECONDS=0.1,
    )
    polling = PollingBot(settings, telegram)
    await polling.start()
    try:
        await telegram.push_message(CHAT + 1, "когда вернутся деньги?")
        [shown] = await telegram.wait_for_texts(CHAT + 1, 1)
    finally:
        assert await polling.stop() == 0

    drafts = [str(call.params.get("text", "")) for call in telegram.drafts(CHAT + 1)]
    assert any("Гарантия" in text for text in drafts), drafts
    assert not [text for text in drafts if "instant-refund" in text]
    assert "instant-refund" not in shown
