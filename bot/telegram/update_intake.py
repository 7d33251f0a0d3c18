"""From a Telegram update to the chat's queue: which updates are ours, and whose chat they are."""

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from aiogram import Bot
from aiogram.enums import ChatType
from aiogram.types import CallbackQuery, Message, Update
from aiogram.types.update import UpdateTypeLookupError
from redis.exceptions import RedisError

from bot.handoff.topics import TopicDirectory
from bot.ops.surrogates import without_lone_surrogates
from bot.queue.admission import IncomingUpdate, Intake, IntakeVerdict, StaffSender
from bot.queue.jobs import Notice
from bot.storage.keys import telegram_chat_id, telegram_conversation
from bot.telegram.callbacks import PressAnswers, press_incoming, read_press
from bot.telegram.filters import RELAYED_CONTENT, AddressedToBot, forwarded_from_channel
from bot.telegram.photos import is_image

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TelegramIntake:
    """Accepts the updates the bot handles into their chat's queue (see :mod:`bot.queue`).

    ``presses`` answers button presses on confirmation cards right after they are queued.
    """

    intake: Intake
    bot: Bot
    allow_groups: bool
    presses: PressAnswers
    topics: TopicDirectory | None = None
    # VISION=on: photos are model turns (charged to the daily budget), not a refusal.
    vision: bool = False

    @cached_property
    def _addressed(self) -> AddressedToBot:
        return AddressedToBot(allow_groups=self.allow_groups)

    async def accept(
        self, update: Update, raw: Mapping[str, object] | None = None
    ) -> IntakeVerdict | None:
        """Queue ``update``; ``None`` when it is not for the bot (nothing to do, nothing kept).

        ``raw`` is the update as Telegram sent it (the webhook has it): stored as
        is, instead of dumping the parsed model again. Raises ``RedisError`` when
        Redis cannot take it: the caller must not acknowledge the update then.

        Anything else raised on one update (a filter or a parser meeting content
        nobody foresaw) must not stop intake: the update is logged by kind and id,
        answered with a kind notice in a private chat, dropped elsewhere.
        """
        try:
            if update.callback_query is not None:
                return await self._press(update, update.callback_query, raw)
            incoming = await self._incoming(update, raw)
            if incoming is None:
                return None
            return await self.intake.accept(incoming)
        except (RedisError, OSError):
            raise
        except Exception as error:  # one update must not stop the others
            return await self._unreadable(update, error)

    async def _press(
        self, update: Update, callback: CallbackQuery, raw: Mapping[str, object] | None
    ) -> IntakeVerdict | None:
        """Queue a press of one of the bot's buttons, read once; answer its callback either way."""
        press = read_press(callback.data)
        incoming = press_incoming(
            update.update_id,
            callback,
            press,
            _payload(update, raw),
            staff_chat_id=self.topics.staff_chat_id if self.topics is not None else None,
        )
        if incoming is None:
            await self.presses.answer(callback, None)
            return None
        verdict = await self.intake.accept(incoming)
        await self.presses.answer(callback, press)
        return verdict

    async def _unreadable(self, update: Update, error: Exception) -> IntakeVerdict | None:
        """A notice instead of the update, in a private chat; nothing anywhere else.

        In a group the update may not even be addressed to the bot, and in the
        staff chat there is no customer to tell: it is dropped there.
        """
        message = update.message
        private = message is not None and message.chat.type == ChatType.PRIVATE
        # The error's text may quote the update's content: only its class is named.
        logger.error(
            "Update %s (%s) could not be read (%s); %s",
            update.update_id,
            _kind(update),
            type(error).__name__,
            "answered with a notice" if private else "dropped",
        )
        if message is None or not private:
            return None
        notice = IncomingUpdate(
            update_id=update.update_id,
            chat_id=message.chat.id,
            conversation_key=telegram_conversation(message.chat.id),
            user_id=message.from_user.id if message.from_user else message.chat.id,
            counts_turn=False,
            payload={},
            notice=Notice.UNREADABLE,
        )
        try:
            return await self.intake.accept(notice)
        except (RedisError, OSError):
            raise
        except Exception as notice_error:  # as above: never stop intake
            logger.error(
                "Update %s: the notice could not be queued either (%s); dropped",
                update.update_id,
                type(notice_error).__name__,
            )
            return None

    async def _incoming(
        self, update: Update, raw: Mapping[str, object] | None
    ) -> IncomingUpdate | None:
        member = update.my_chat_member
        if member is not None:
            # Blocked or unblocked: queued like a message, so it keeps its place in the
            # chat's order; no flood control, no model turn, never dropped by the cap.
            return IncomingUpdate(
                update_id=update.update_id,
                chat_id=member.chat.id,
                conversation_key=telegram_conversation(member.chat.id),
                user_id=None,
                counts_turn=False,
                payload=_payload(update, raw),
                capped=False,
            )
        message = update.message
        if message is None:
            return None
        if self.topics is not None and message.chat.id == self.topics.staff_chat_id:
            return await self._staff(update, message, raw)
        if not await self._addressed.decide(message, self.bot):
            return None
        return IncomingUpdate(
            update_id=update.update_id,
            chat_id=message.chat.id,
            conversation_key=telegram_conversation(message.chat.id),
            # No sender (a message on behalf of a channel...): limited as the chat itself.
            user_id=message.from_user.id if message.from_user else message.chat.id,
            counts_turn=_counts_turn(message, vision=self.vision),
            payload=_payload(update, raw),
            sent_ms=_sent_ms(message),
            media_group_id=message.media_group_id,
            # Decided just above: the worker's router reads it from the job.
            addressed=True,
        )

    async def _staff(
        self, update: Update, message: Message, raw: Mapping[str, object] | None
    ) -> IncomingUpdate | None:
        """A staff topic message joins its *customer's* queue, so relays keep their order.

        Only a person's message in a topic mapped to a customer; anything else in
        the staff chat (general topic, other topics, bots, service messages) is not ours.
        """
        topics = self.topics
        thread = message.message_thread_id
        user = message.from_user
        if topics is None or thread is None or not message.is_topic_message:
            return None
        if user is None or user.is_bot or message.content_type not in RELAYED_CONTENT:
            return None
        conversation_key = await topics.conversation_of(thread)
        chat_id = telegram_chat_id(conversation_key) if conversation_key else None
        if conversation_key is None or chat_id is None:
            return None
        return IncomingUpdate(
            update_id=update.update_id,
            chat_id=chat_id,
            conversation_key=conversation_key,
            # Never counted as the customer's turns; flood-limited per member in the staff group.
            user_id=None,
            counts_turn=False,
            payload=_payload(update, raw),
            staff=StaffSender(staff_chat_id=topics.staff_chat_id, user_id=user.id),
            sent_ms=_sent_ms(message),
        )


def _counts_turn(message: Message, *, vision: bool) -> bool:
    """Whether ``message`` is a model turn (charged to the daily budget).

    A text, a voice message, and with ``vision`` a photo; a channel's post
    forwarded is answered without the model (handlers/other.py).
    """
    if forwarded_from_channel(message):
        return False
    if message.voice is not None or message.audio is not None or message.video_note is not None:
        return True
    if vision and is_image(message):
        return True
    text = message.text
    return text is not None and not text.startswith("/")


def _sent_ms(message: Message) -> int:
    """When the customer wrote ``message`` (Telegram's date), in ms; the script clamps it."""
    return int(message.date.timestamp() * 1000)


def _kind(update: Update) -> str:
    try:
        return update.event_type
    except UpdateTypeLookupError:
        return "unknown"


def _payload(update: Update, raw: Mapping[str, object] | None) -> dict[str, object]:
    source = (
        raw
        if raw is not None
        else update.model_dump(mode="json", exclude_none=True, exclude_unset=True)
    )
    # Half an emoji cannot be stored as UTF-8: it becomes U+FFFD here, before anything.
    return {key: without_lone_surrogates(value) for key, value in source.items()}
