"""The offline demo model on the fifth review's questions (issue 46), labelled, end to end.

The review found 35 of 41 Russian and 27 of 32 English questions answered right
(7 English answers partly Russian). Its questions are not in the repository;
these are the ones it names («Спасибо», «пока», "Thanks!", "Goodbye", delivery
to Kazan, «как долго ждать курьера?», «Доставка в Санкт-Петербург сколько
дней?», "My package arrived damaged", "I received the wrong item", Russian tool
refusals to English customers) among others written the way customers write,
41 in Russian and 32 in English. Each turn runs as the console's does (see
``test_offline_phrasings.py``). An English answer is right only when nothing of
it is Russian, except the shop's own data where the case says so (a product's
catalogue name). Before the fixes of issue 46: 31 of 41 and 18 of 32 right, 5 of
the English answers partly Russian; after them all 73 (docs/knowledge.md, "Measured").
"""

import re
from dataclasses import dataclass

import pytest

from bot.testing.chat_harness import ChatHarness
from tests.chat.test_offline_phrasings import (
    ASKS,
    CATALOGUE,
    ENGLISH_HOURS,
    ENGLISH_URLS,
    HOURS,
    URLS,
    Article,
    Call,
    Proposal,
    english_order,
    english_policy,
    harness,
    help_center,
    order,
    redis_client,
)

# The fixtures this module shares with the phrasings' (pytest finds them by name here).
__all__ = ["harness", "help_center", "redis_client"]


@dataclass(frozen=True, slots=True)
class Says:
    """No tool: the answer holds ``shown`` (small talk)."""

    shown: str


@dataclass(frozen=True, slots=True)
class Case:
    """A question, what a real model would do, and whether Russian data may show in English."""

    text: str
    expected: Call | Article | Proposal | Says | str
    shop_data_in_russian: bool = False


THANKS = Says("Пожалуйста")
BYE = Says("До свидания")
HELLO = Says("Здравствуйте")

RUSSIAN: list[Case] = [
    # Small talk: a short answer, not the demo's disclaimer.
    Case("Спасибо", THANKS),
    Case("спасибо большое", THANKS),
    Case("пока", BYE),
    Case("До свидания!", BYE),
    Case("Спасибо, до свидания", THANKS),
    Case("Привет", HELLO),
    # Delivery: a city the articles do not name is still a question of delivery times.
    Case("Сколько идёт доставка в Казань?", Article("delivery-times")),
    Case("доставка в казань сколько дней", Article("delivery-times")),
    Case("как долго ждать курьера?", Article("delivery-times")),
    Case("Доставка в Санкт-Петербург сколько дней?", Article("delivery-times")),
    Case("сколько ехать заказу до Екатеринбурга", Article("delivery-times")),
    Case("Сколько стоит доставка в Казань?", Article("delivery-cost")),
    Case("Доставляете в Минск?", Article("delivery-regions")),
    Case("Где ближайший пункт выдачи?", Article("delivery-pickup")),
    # Something went wrong with the parcel.
    Case("Посылка пришла повреждённой, что делать?", Article("damaged-parcel")),
    Case("коробка пришла мятая", Article("damaged-parcel")),
    Case("привезли не тот товар", Article("missing-item")),
    Case("в заказе не хватает товара", Article("missing-item")),
    Case("Товар сломался через неделю", Article("defective-item")),
    # Orders.
    Case("Где заказ 8041?", order("8041")),
    Case("где заказ 9999", Call("get_order_status", "Заказ 9999 не найден")),
    Case("Как отследить посылку?", ASKS),
    Case("Как отменить заказ?", ASKS),
    Case("Отмените заказ 8043", Call("cancel_order", "Заказ 8043 нельзя отменить")),
    Case("Можно изменить состав заказа?", Article("order-change")),
    # Returns and money.
    Case("Когда вернут деньги?", Article("refunds")),
    Case("Как вернуть товар?", Article("returns-how")),
    Case("Гарантия на наушники сколько?", Article("warranty")),
    # The rest of the help center.
    Case("Как подключить наушники?", Article("headphones-pairing")),
    Case("Как почистить кофемашину от накипи?", Article("coffee-machine-care")),
    Case("Как удалить аккаунт?", Article("account-delete")),
    Case("Забыл пароль от личного кабинета", Article("account-password")),
    Case("Как зарегистрироваться на сайте?", Article("account-registration")),
    Case("Промокод не работает", Article("promo-not-working")),
    Case("Где взять чек на покупку?", Article("receipts")),
    Case("Сколько бонусов начисляется за покупку?", Article("loyalty-bonuses")),
    Case("Можно оплатить подарочной картой?", Article("gift-cards")),
    Case("Работаете с юрлицами?", Article("business-customers")),
    # Hours, people and the catalogue.
    Case("Какие часы работы поддержки?", HOURS),
    Case("Хочу поговорить с оператором", HOURS),
    Case("Сколько стоит кофемашина?", CATALOGUE),
]

ENGLISH_THANKS = Says("You're welcome")
ENGLISH_BYE = Says("Goodbye")

ENGLISH: list[Case] = [
    Case("Thanks!", ENGLISH_THANKS),
    Case("thank you", ENGLISH_THANKS),
    Case("Goodbye", ENGLISH_BYE),
    Case("bye", ENGLISH_BYE),
    Case("Hello", Says("Hello! How can I help?")),
    Case("My package arrived damaged", Article("damaged-parcel")),
    Case("The box was crushed when it arrived", Article("damaged-parcel")),
    Case("I received the wrong item", Article("missing-item")),
    Case("An item is missing from my order", Article("missing-item")),
    Case("The item stopped working after a week", Article("defective-item")),
    Case("How long does delivery to Kazan take?", Article("delivery-times")),
    Case("How long does shipping take?", Article("delivery-times")),
    Case("How much is delivery?", Article("delivery-cost")),
    Case("Do you ship to Belarus?", Article("delivery-regions")),
    Case("Can I pick up my order myself?", Article("delivery-pickup")),
    Case("Where is order 8041?", english_order("8041")),
    Case("Where is order 9999?", Call("get_order_status", "Order 9999 was not found")),
    Case("Where is my order?", ASKS),
    Case("I want to cancel my order", ASKS),
    Case("Cancel order 8042", Proposal("cancel_order", "8042")),
    Case("Cancel order 8043", Call("cancel_order", "Order 8043 cannot be cancelled")),
    Case("Can I return the headphones?", english_policy("headphones")),
    Case("Can I return the coffee machine?", english_policy("coffee machine")),
    Case("When will I get my money back?", Article("refunds")),
    Case("How do I return an item?", Article("returns-how")),
    Case("What payment methods do you accept?", Article("payment-methods")),
    Case("Can I pay in installments?", Article("payment-installments")),
    Case("My payment was declined", Article("payment-failed")),
    Case("What's the warranty?", Article("warranty")),
    Case("When are you open?", ENGLISH_HOURS),
    Case("I want to talk to a human", ENGLISH_HOURS),
    Case(
        "How much is the kettle?",
        Call("search_products", "Found in the catalogue:\n•"),
        shop_data_in_russian=True,
    ),
]

_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)


def test_the_review_set_has_41_russian_and_32_english_questions() -> None:
    assert (len(RUSSIAN), len(ENGLISH)) == (41, 32)
    assert len({case.text for case in RUSSIAN + ENGLISH}) == 73


def _check(reply_text: str, tools: tuple[str, ...], expected: object, *, english: bool) -> None:
    match expected:
        case Says(shown=shown):
            assert tools == (), reply_text
            assert shown in reply_text
            assert "демо-режим" not in reply_text
            assert "demo mode" not in reply_text
        case Call(tool=tool, shown=shown):
            assert tools == (tool,), reply_text
            assert shown in reply_text
        case Article(article_id=article_id):
            assert tools == ("search_help_center",), reply_text
            first_line = reply_text.split("\n", 1)[0]
            if english:
                assert first_line.startswith("Here is what the article "), reply_text
                url = ENGLISH_URLS.get(article_id, URLS[article_id])
            else:
                assert first_line.startswith("Вот что сказано в статье «"), reply_text
                url = URLS[article_id]
            assert f"({url})" in first_line, reply_text
        case Proposal(tool=tool):
            assert tools == (tool,), reply_text
        case _:
            assert tools == (), reply_text
            assert ("order number" if english else "номер заказа") in reply_text


@pytest.mark.parametrize("case", RUSSIAN, ids=[f"ru-{n:02d}" for n in range(1, len(RUSSIAN) + 1)])
async def test_a_russian_question_of_the_review_is_answered_right(
    harness: ChatHarness, case: Case
) -> None:
    reply = await harness.ask("customer", case.text, user_id=100)
    _check(reply.text, reply.tool_names, case.expected, english=False)


@pytest.mark.parametrize("case", ENGLISH, ids=[f"en-{n:02d}" for n in range(1, len(ENGLISH) + 1)])
async def test_an_english_question_of_the_review_is_answered_right_and_in_english(
    harness: ChatHarness, case: Case
) -> None:
    reply = await harness.ask("customer", case.text, user_id=100)
    _check(reply.text, reply.tool_names, case.expected, english=True)
    if not case.shop_data_in_russian:
        assert not _CYRILLIC.search(reply.text), reply.text
