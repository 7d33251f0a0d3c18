"""Button presses at intake: read once, queued in the chat's FIFO, the callback answered at once.

Each kind of button has its typed data (aiogram ``CallbackData``):
:class:`~bot.actions.buttons.ActionPress` on a confirmation card,
:class:`~bot.csat.callback.FeedbackPress` on the satisfaction question,
:class:`~bot.telegram.escalation_offer.OfferPress` on the offer of a person,
:class:`~bot.staff_assist.buttons.SuggestionPress` on a suggested reply in a staff topic
(queued in the customer's chat it names, and only from the staff chat; a press on a
suggestion no longer open is answered «Подсказка устарела»).
Intake reads a press once (:func:`read_press`) and hands the typed value on;
in the worker the job runner reads it once for the job (workflow data
``button_press``) and each kind's router takes its own kind only
(:class:`Pressed`), so the routers' order does not matter.

Telegram shows a spinner on the button until the bot answers the callback
query; intake answers it right after queueing the press, with a short text
when a read of the session already shows the press will change nothing
(«Уже выполнено», «Срок подтверждения истёк»: the worker's own verdict function,
``CardPresses.verdict``, over the same :func:`card_press` value; on the
satisfaction question
«Спасибо за оценку!», «Вы уже оценили» or «опрос уже закрыт»; on the offer of
a person none: the handoff's own message follows). The worker
decides for real. A press of no known kind (forged, foreign, from an inline
message) is not queued and is answered «Кнопка больше не действует».
"""

import logging
from dataclasses import dataclass
from typing import Any, TypeVar

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.filters import Filter
from aiogram.filters.callback_data import CallbackData
from aiogram.types import CallbackQuery, Message
from redis.exceptions import RedisError

from bot import customer_texts
from bot.actions.buttons import ActionPress
from bot.actions.presses import SHORT_ANSWERS, CardPresses, Press
from bot.csat.callback import FeedbackPress
from bot.csat.schedule import press_state
from bot.language.choice import ConversationLanguages
from bot.queue.admission import IncomingUpdate
from bot.sessions.store import SessionStore, SessionStoreError
from bot.staff_assist.buttons import SuggestionPress
from bot.staff_texts import SUGGESTION_OUT_OF_DATE
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys, telegram_conversation
from bot.telegram.escalation_offer import OfferPress
from bot.telegram.sending import ReplySender

logger = logging.getLogger(__name__)

ButtonPress = ActionPress | FeedbackPress | OfferPress | SuggestionPress
"""A press of one of the bot's buttons, typed."""

_KINDS: dict[str, type[ButtonPress]] = {
    kind.__prefix__: kind for kind in (ActionPress, FeedbackPress, OfferPress, SuggestionPress)
}
"""Each kind by its prefix (all four use aiogram's default separator, ``:``)."""

_Data = TypeVar("_Data", bound=CallbackData)


def unpack(kind: type[_Data], data: str | None) -> _Data | None:
    """``data`` as a press of ``kind``; ``None`` for anything else (never raises)."""
    if not data:
        return None
    try:
        return kind.unpack(data)
    except (TypeError, ValueError):
        # What aiogram's own filter catches: wrong prefix, count or value (pydantic's too).
        return None


def read_press(data: str | None) -> ButtonPress | None:
    """The typed press of a button's data; ``None`` when no button of the bot sends it."""
    # The prefix picks the one kind to try: unpacking each in turn costs an exception apiece.
    kind = _KINDS.get((data or "").partition(":")[0])
    return unpack(kind, data) if kind is not None else None


class Pressed(Filter):
    """A press of one kind, handed to the handler as ``callback_data`` (aiogram's name).

    The job runner reads the press once for the job (``button_press``); every
    button router matches it by kind instead of unpacking the data again. Fed
    without it (a router on its own), the data is read here.
    """

    def __init__(self, kind: type[ButtonPress]) -> None:
        self._kind = kind

    async def __call__(
        self, callback: CallbackQuery, button_press: ButtonPress | None = None
    ) -> bool | dict[str, Any]:
        """``{"callback_data": press}`` for a press of this kind; ``False`` for any other."""
        press = button_press if button_press is not None else read_press(callback.data)
        if isinstance(press, self._kind):
            return {"callback_data": press}
        return False


def card_press(callback: CallbackQuery, pressed: ActionPress) -> Press | None:
    """The press ``pressed`` on the card ``callback`` came from; ``None`` without the card.

    The one value both verdicts are taken on: intake's prediction and the worker's.
    """
    card = callback.message if isinstance(callback.message, Message) else None
    if card is None:
        return None
    return Press(
        action_id=pressed.action_id,
        choice=pressed.choice,
        presser_id=callback.from_user.id,
        chat_id=card.chat.id,
        card_message_id=card.message_id,
    )


def press_incoming(
    update_id: int,
    callback: CallbackQuery,
    press: ButtonPress | None,
    payload: dict[str, object],
    *,
    staff_chat_id: int | None = None,
) -> IncomingUpdate | None:
    """The press as a queued update of the card's chat; ``None`` for no chat or no known button.

    No chat: a button under an inline message (inline mode) is none of the bot's. A
    suggestion's press goes to the customer's chat it names, from ``staff_chat_id`` only.
    """
    message = callback.message
    if message is None or press is None:
        return None
    chat_id = message.chat.id
    if isinstance(press, SuggestionPress):
        if staff_chat_id is None or chat_id != staff_chat_id:
            return None
        chat_id = press.chat_id
    return IncomingUpdate(
        update_id=update_id,
        chat_id=chat_id,
        conversation_key=telegram_conversation(chat_id),
        # Never a model turn, and not charged to the message flood limit: a press answers
        # the bot's own card or question (six quick scores, a confirm right after five
        # messages). The chat's queue cap bounds them.
        user_id=None,
        counts_turn=False,
        payload=payload,
    )


@dataclass(frozen=True, kw_only=True)
class PressAnswers:
    """Answers callback queries: at once, with the short text a session read predicts."""

    bot: Bot
    # The answer goes through it: a 429 (within its short allowed wait) or a 5xx is retried.
    sender: ReplySender
    # Where the satisfaction question's state is read.
    redis: "AsyncRedisClient | None" = None
    keys: RedisKeys | None = None
    # Where a card press's pending action is read (with ``actions``, its judge).
    sessions: SessionStore | None = None
    actions: CardPresses | None = None
    # The short answers' languages: at intake no session is read for them (a card's press
    # reads one for its verdict), so the presser's Telegram language decides.
    languages: ConversationLanguages | None = None

    async def answer(self, callback: CallbackQuery, press: ButtonPress | None) -> None:
        """Stop the button's spinner (never raises: the press is queued either way).

        ``press``: the queued press, read by intake; ``None`` for one not queued.
        """
        text = (
            await self._predict(callback, press)
            if press is not None
            else customer_texts.BUTTON_FORGED_ANSWER
        )
        if text is not None and self.languages is not None:
            code = self.languages.decide(None, telegram_code=callback.from_user.language_code)
            text = self.languages.texts(code).gettext(text)

        async def send() -> bool:
            return await self.bot.answer_callback_query(callback.id, text=text)

        chat_id = callback.message.chat.id if callback.message else callback.from_user.id
        try:
            await self.sender.call(chat_id, send)
        except TelegramAPIError as error:
            logger.info("Callback not answered: %s", type(error).__name__)

    async def _predict(  # noqa: PLR0911 - one return per kind of button
        self, callback: CallbackQuery, press: ButtonPress
    ) -> str | None:
        message = callback.message
        if message is None:
            return customer_texts.BUTTON_FORGED_ANSWER
        if isinstance(press, OfferPress):
            # The handoff's own message says what happens; the spinner just stops.
            return None
        if isinstance(press, FeedbackPress):
            return await self._predict_feedback(message.chat.id, press.question_id)
        if isinstance(press, SuggestionPress):
            return await self._predict_suggestion(press)
        pressed = card_press(callback, press)
        if self.sessions is None or self.actions is None or pressed is None:
            return None
        try:
            session = await self.sessions.load(telegram_conversation(message.chat.id))
        except SessionStoreError:
            return None
        # The worker's verdict, over the value its handler builds (at intake's time).
        return SHORT_ANSWERS.get(self.actions.verdict(session, pressed))

    async def _predict_suggestion(self, press: SuggestionPress) -> str | None:
        """«Out of date» for a suggestion no longer open (replaced, sent, answered)."""
        if self.sessions is None:
            return None
        try:
            session = await self.sessions.load(telegram_conversation(press.chat_id))
        except SessionStoreError:
            return None
        open_now = session.suggestion if session is not None else None
        if open_now is None or open_now.suggestion_id != press.suggestion_id:
            return SUGGESTION_OUT_OF_DATE
        return None

    async def _predict_feedback(self, chat_id: int, question_id: str) -> str | None:
        """Thanks for a first press, «already» for a second, «closed» for an old question."""
        if self.redis is None or self.keys is None:
            return customer_texts.CSAT_THANKS
        try:
            state = await press_state(
                self.redis, self.keys, telegram_conversation(chat_id), question_id
            )
        except RedisError:
            return customer_texts.CSAT_THANKS
        return {
            "open": customer_texts.CSAT_THANKS,
            "answered": customer_texts.CSAT_ALREADY,
            "closed": customer_texts.CSAT_CLOSED,
        }[state]
