"""Button presses at intake: queued in the chat's FIFO, the callback answered at once.

Telegram shows a spinner on the button until the bot answers the callback
query; intake answers it right after queueing the press, with a short text
when a read of the session already shows the press will change nothing
(«Уже выполнено», «Срок подтверждения истёк»; on the satisfaction question
«Спасибо за оценку!», «Вы уже оценили» or «опрос уже закрыт»; on the offer of
a person none: the handoff's own message follows). The worker
decides for real.
"""

import logging
from dataclasses import dataclass

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.types import CallbackQuery
from redis.exceptions import RedisError

from bot import customer_texts
from bot.actions.confirmation import SHORT_ANSWERS, ActionConfirmations, Press
from bot.actions.pending import parse_callback
from bot.csat.callback import parse_callback as parse_feedback
from bot.csat.schedule import press_state
from bot.language.choice import ConversationLanguages
from bot.queue.intake import IncomingUpdate
from bot.sessions.models import session_of
from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.keys import RedisKeys, telegram_conversation
from bot.telegram.escalation_offer import is_offer_press
from bot.telegram.sending import ReplySender

logger = logging.getLogger(__name__)


def press_incoming(
    update_id: int, callback: CallbackQuery, payload: dict[str, object]
) -> IncomingUpdate | None:
    """The press as a queued update of the card's chat; ``None`` for no chat (inline mode)."""
    message = callback.message
    if message is None:
        return None
    if (
        parse_callback(callback.data) is None
        and parse_feedback(callback.data) is None
        and not is_offer_press(callback.data)
    ):
        return None
    return IncomingUpdate(
        update_id=update_id,
        chat_id=message.chat.id,
        conversation_key=telegram_conversation(message.chat.id),
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
    redis: "AsyncRedisClient | None" = None
    keys: RedisKeys | None = None
    actions: ActionConfirmations | None = None
    # The short answers' languages: at intake no session is read for them (a card's press
    # reads one for its verdict), so the presser's Telegram language decides.
    languages: ConversationLanguages | None = None

    async def answer(self, callback: CallbackQuery, queued: bool) -> None:
        """Stop the button's spinner (never raises: the press is queued either way)."""
        text = await self._predict(callback) if queued else customer_texts.BUTTON_FORGED_ANSWER
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

    async def _predict(self, callback: CallbackQuery) -> str | None:
        if is_offer_press(callback.data):
            # The handoff's own message says what happens; the spinner just stops.
            return None
        feedback = parse_feedback(callback.data)
        if feedback is not None and callback.message is not None:
            return await self._predict_feedback(callback.message.chat.id, feedback[0])
        parsed = parse_callback(callback.data)
        message = callback.message
        if parsed is None or message is None:
            return customer_texts.BUTTON_FORGED_ANSWER
        if self.redis is None or self.keys is None or self.actions is None:
            return None
        key = self.keys.conversation(telegram_conversation(message.chat.id)).session
        try:
            raw = await self.redis.hget(key, "d")
        except RedisError:
            return None
        session = session_of(text_of(raw))
        press = Press(
            action_id=parsed[0],
            choice=parsed[1],
            presser_id=callback.from_user.id,
            chat_id=message.chat.id,
            card_message_id=message.message_id,
        )
        return SHORT_ANSWERS.get(self.actions.verdict(session, press))

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
