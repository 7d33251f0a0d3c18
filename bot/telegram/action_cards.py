"""Confirmation cards in Telegram: sent with two inline buttons, edited once settled.

Both go through the worker's retrying sender (:class:`~bot.telegram.sending.ReplySender`),
as the deliverers of their steps (:class:`CardDeliverer` of
:class:`~bot.queue.delivery_steps.SendCard`, :class:`CardEditDeliverer` of
:class:`~bot.queue.delivery_steps.EditCard`). A card that could not be delivered
withdraws its pending action (:class:`CardWithdrawal`): nobody is told to press
a button that is not there.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup
from redis.exceptions import RedisError

from bot import customer_texts
from bot.actions.buttons import card_buttons
from bot.customer_texts import gettext_of
from bot.engine.action_audit import action_fields
from bot.language.texts import Texts
from bot.queue.delivery_steps import EditCard, SendCard, SendText
from bot.sessions.pending import ActionCard, PendingAction
from bot.sessions.store import SessionStore, SessionStoreError
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys
from bot.telegram.delivery import DeliveryRun, Outgoing, send_text
from bot.telegram.sending import ReplyNotDeliveredError, ReplySender

logger = logging.getLogger(__name__)

CARD_NOT_DELIVERED = "card_not_delivered"
"""The audit's error code of an action withdrawn because its card never arrived."""


def keyboard(card: ActionCard, texts: Texts | None = None) -> InlineKeyboardMarkup:
    """One row: «Подтвердить» first, «Не нужно» second (in ``texts``' language)."""
    buttons = card_buttons(card, gettext_of(texts))
    return InlineKeyboardMarkup(
        inline_keyboard=[
            [InlineKeyboardButton(text=label, callback_data=data) for label, data in buttons]
        ]
    )


async def send_card(
    replies: ReplySender, bot: Bot, chat_id: int, card: ActionCard, texts: Texts | None = None
) -> int | None:
    """Send the card (retried as any reply); its message id, or ``None`` when not delivered."""
    try:
        return await replies.send_with_buttons(bot, chat_id, card.text, keyboard(card, texts))
    except (ReplyNotDeliveredError, TelegramAPIError) as error:
        logger.warning("Card of action %s not sent: %s", card.action_id, type(error).__name__)
        return None


async def edit_card(replies: ReplySender, bot: Bot, chat_id: int, edit: EditCard) -> bool:
    """Rewrite a settled card: its new text, no keyboard (edited before: fine too)."""
    return await replies.edit_text(bot, chat_id, edit.message_id, edit.text)


@dataclass(frozen=True, kw_only=True)
class CardWithdrawal:
    """Withdraws the pending action whose card never reached the customer.

    Under the worker's lease: the action leaves the session with the text the
    customer is told (the model's next turn reads it as the application's
    outcome), so no later turn says a card waits.
    """

    sessions: SessionStore
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    async def withdraw(
        self, conversation_key: str, token: str, action_id: str, turn_id: str, told: str
    ) -> PendingAction | None:
        """The withdrawn action; ``None`` when it no longer waits (settled, superseded)."""
        try:
            locked = await self.sessions.reload(conversation_key, token)
            session = locked.session
            pending = session.pending_action if session is not None else None
            if session is None or pending is None or pending.action_id != action_id:
                return None
            await self.sessions.commit(
                locked,
                session.with_action_outcome(action_id, told, self.clock(), turn_id),
                release=False,
            )
        except SessionStoreError as error:
            # The action stays pending: a press on no card cannot come, and it expires.
            logger.warning("Action %s not withdrawn: %s", action_id, type(error).__name__)
            return None
        return pending


class CardIndex:
    """Which message shows which action's card, per chat: to edit a superseded card later."""

    def __init__(self, redis: AsyncRedisClient, keys: RedisKeys, ttl_seconds: int) -> None:
        self._redis = redis
        self._keys = keys
        self._ttl = ttl_seconds

    async def remember(self, conversation_key: str, action_id: str, message_id: int) -> None:
        """Note the card's message (setting it again is harmless); never raises."""
        key = self._keys.conversation(conversation_key).cards
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hset(key, action_id, str(message_id))
                pipe.expire(key, self._ttl)
                await pipe.execute()
        except RedisError:
            logger.warning("Card of action %s not indexed: Redis unavailable", action_id)

    async def find(self, conversation_key: str, action_id: str) -> int | None:
        """The message id of the action's card, if it was sent and noted."""
        key = self._keys.conversation(conversation_key).cards
        try:
            raw = await self._redis.hget(key, action_id)
        except RedisError:
            return None
        return int(raw) if raw else None


@dataclass(frozen=True, kw_only=True)
class CardEditDeliverer:
    """Delivers :class:`~bot.queue.delivery_steps.EditCard`: a settled card's new text.

    Not for a chat that blocked the bot (Telegram would refuse it anyway).
    """

    out: Outgoing

    async def deliver(self, step: EditCard, run: DeliveryRun) -> None:
        """Rewrite the card's message, its buttons removed (unless the chat blocked the bot)."""
        if not run.blocked:
            await edit_card(self.out.replies, self.out.bot, run.delivery.chat_id, step)


@dataclass(frozen=True, kw_only=True)
class CardDeliverer:
    """Delivers :class:`~bot.queue.delivery_steps.SendCard`: a proposal's card.

    Sent only when the text asking to press it reached the customer; the card it
    supersedes is edited to say so first (both noted in ``index``, or looked up).
    A card not delivered withdraws its action (``withdrawal``) and audits it.
    """

    out: Outgoing
    index: CardIndex | None = None
    withdrawal: CardWithdrawal | None = None

    async def deliver(self, step: SendCard, run: DeliveryRun) -> None:
        """Send the card; one that cannot be (or may not be) delivered is withdrawn."""
        if run.reached and not run.blocked and await self._send(step, run):
            return
        run.audit.extend(await self._withdraw(step.card, run, told=run.reached))

    async def _send(self, step: SendCard, run: DeliveryRun) -> bool:
        """The new card, after the superseded one's edit; ``False`` when it did not arrive
        (after the sender's retries)."""
        card = step.card
        key = run.conversation_key
        chat_id = run.delivery.chat_id
        if step.superseded is not None and self.index is not None:
            old = await self.index.find(key, step.superseded)
            if old is not None:
                await edit_card(
                    self.out.replies,
                    self.out.bot,
                    chat_id,
                    EditCard(
                        message_id=old,
                        text=customer_texts.shown(
                            self.out.texts(card.language), customer_texts.CARD_SUPERSEDED_TEXT
                        ),
                    ),
                )
        message_id = await send_card(
            self.out.replies, self.out.bot, chat_id, card, self.out.texts(card.language)
        )
        if message_id is None:
            return False
        if self.index is not None:
            await self.index.remember(key, card.action_id, message_id)
        return True

    async def _withdraw(
        self, card: ActionCard, run: DeliveryRun, *, told: bool
    ) -> tuple[dict[str, str], ...]:
        """A card that never arrived: its action withdrawn and audited, the customer told.

        ``told``: the reply asking to press the button reached the customer, so they
        are told the buttons could not be shown. A repeated delivery finds the action
        withdrawn already and does nothing twice.
        """
        if self.withdrawal is None:
            return ()
        reply = run.delivery
        text = customer_texts.shown(
            self.out.texts(card.language), customer_texts.CARD_NOT_DELIVERED
        )
        withdrawn = await self.withdrawal.withdraw(
            run.conversation_key, run.lease.token, card.action_id, reply.turn_id, text
        )
        if withdrawn is None:
            return ()
        logger.warning("Card of action %s not delivered: the action is withdrawn", card.action_id)
        if told:
            await send_text(self.out, reply.chat_id, SendText(text=text), reply.turn_id)
        return (
            action_fields(
                withdrawn,
                "failed",
                chat_id=str(reply.chat_id),
                turn_id=reply.turn_id,
                error_code=CARD_NOT_DELIVERED,
            ),
        )
