"""The reply keyboard of account linking: one button that shares the customer's own contact."""

from aiogram.types import KeyboardButton, ReplyKeyboardMarkup, ReplyKeyboardRemove

from bot import customer_texts
from bot.language.texts import Texts
from bot.queue.delivery_steps import ReplyKeyboardKind
from bot.telegram.sending import ReplyKeyboard


def reply_keyboard(
    kind: ReplyKeyboardKind | None, texts: Texts | None = None
) -> ReplyKeyboard | None:
    """The markup of a text step's ``keyboard`` (``None``: the chat's stays as it is).

    Telegram's ``request_contact`` button sends the customer's *own* number, and
    the message it makes says whose contact it is (``contact.user_id``): the one
    proof of a phone number a bot gets. The button in ``texts``' language.
    """
    if kind is None:
        return None
    if kind == "remove":
        return ReplyKeyboardRemove(remove_keyboard=True)
    button = KeyboardButton(
        text=customer_texts.shown(texts, customer_texts.LINK_BUTTON), request_contact=True
    )
    return ReplyKeyboardMarkup(
        keyboard=[[button]],
        resize_keyboard=True,
        one_time_keyboard=True,
        input_field_placeholder=customer_texts.shown(texts, customer_texts.LINK_PLACEHOLDER),
    )
