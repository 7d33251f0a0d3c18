"""Texts rendered outside a handler's reply follow the language they are given.

The drafts' labels while tools run and the account-linking keyboard (rendered by the
worker at delivery) read the catalogs; without a catalog they stay the Russian source.
"""

from aiogram.types import ReplyKeyboardMarkup

from bot import customer_texts
from bot.language.catalogs import Catalogs
from bot.telegram.draft_labels import tools_label
from bot.telegram.link_keyboard import reply_keyboard
from tools.order_status import GET_ORDER_STATUS_TOOL_NAME


def test_a_drafts_tool_label_is_in_the_given_language() -> None:
    catalogs = Catalogs()
    assert tools_label([GET_ORDER_STATUS_TOOL_NAME], catalogs.texts("en")) == (
        "Checking the order…"
    )
    assert tools_label(["made_up"], catalogs.texts("en")) == "Checking the details…"
    assert (
        tools_label([GET_ORDER_STATUS_TOOL_NAME], catalogs.texts("ru"))
        == (customer_texts.DRAFT_TOOL_LABELS[GET_ORDER_STATUS_TOOL_NAME])
    )
    assert (
        tools_label([GET_ORDER_STATUS_TOOL_NAME])
        == (customer_texts.DRAFT_TOOL_LABELS[GET_ORDER_STATUS_TOOL_NAME])
    )


def test_the_link_keyboard_is_in_the_given_language() -> None:
    english = reply_keyboard("contact", Catalogs().texts("en"))
    assert isinstance(english, ReplyKeyboardMarkup)
    [[button]] = english.keyboard
    assert button.text == "📱 Share my number"
    assert button.request_contact is True
    assert english.input_field_placeholder == "Press «Share my number»"

    russian = reply_keyboard("contact")
    assert isinstance(russian, ReplyKeyboardMarkup)
    assert russian.keyboard[0][0].text == customer_texts.LINK_BUTTON
