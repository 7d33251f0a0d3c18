"""The staff side of a handoff: the customer's forum topic, its header, and the relays.

Runs in the worker after a job's commit (the relay steps travel with the
job's reply in the outbox, a :class:`~bot.queue.delivery_steps.StaffRelay`
step this desk delivers), so a crash repeats them with the reply rather than
losing them. It never raises: a step Telegram refuses is logged, and a relay
to a customer who blocked the bot is reported in the topic instead.
"""

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError, TelegramBadRequest, TelegramForbiddenError
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup
from redis.exceptions import RedisError

from bot.analysis.analyzer import AnalysisOutcome
from bot.analysis.feature import AnalysisFeature
from bot.analysis.model import RequestAnalysis
from bot.analysis.render import render_analysis
from bot.analysis.schedule import idle_of
from bot.customer_texts import Translate
from bot.handoff.topics import TopicDirectory
from bot.ops.log_context import chat_label
from bot.queue.delivery import Delivery
from bot.queue.delivery_steps import StaffRelay
from bot.queue.staff_actions import StaffAction
from bot.sessions.models import ConversationSession
from bot.sessions.store import SessionStore, SessionStoreError
from bot.staff_assist.buttons import suggestion_buttons
from bot.staff_assist.service import StaffAssist
from bot.staff_texts import (
    HANDOFF_REASON_LINE,
    SUGGESTION_ACTION,
    SUGGESTION_HEADER,
    SUGGESTION_SEND,
    SUGGESTION_SEND_CARD,
    reason_label,
)
from bot.storage.keys import telegram_chat_id
from bot.telegram.delivery import DeliveryRun
from bot.telegram.sending import ReplySender

logger = logging.getLogger(__name__)

# How Telegram says a topic is gone or closed (deleted by staff, or closed in the UI).
_TOPIC_GONE = ("thread not found", "topic_deleted", "topic_closed", "topic_id_invalid")
_HEADER_MESSAGES = 6
_QUOTE_CHARS = 300
_POST_CHARS = 4000
_ROLE_NAMES = {"user": "Клиент", "assistant": "Бот", "staff": "Сотрудник"}

NOT_DELIVERED = "Сообщение не доставлено клиенту: клиент заблокировал бота или удалил чат."
NOT_DELIVERED_OTHER = "Сообщение не доставлено клиенту: Telegram отказал в отправке."


def short_pseudonym(conversation_key: str) -> str:
    """A short, stable label of a customer for the topic's name (not the chat id)."""
    return hashlib.sha256(conversation_key.encode()).hexdigest()[:6]


def _gone(error: TelegramBadRequest) -> bool:
    text = str(error).lower()
    return any(marker in text for marker in _TOPIC_GONE)


def build_header(
    session: ConversationSession | None,
    *,
    name: str,
    username: str,
    reason: str,
    label: str,
    incidents: list[str],
    analysis: RequestAnalysis | None = None,
    handoff_reason: str = "",
    staff_texts: Translate = lambda message: message,
) -> str:
    """What staff read first in a topic: who, why, the analysis (what it is about, how the
    customer feels, what to do first), summary, last exchanges, incident codes.

    ``handoff_reason``: one of the seven reasons, shown through ``staff_texts``."""
    lines = [f"Клиент: {name or 'без имени'}" + (f" (@{username})" if username else "")]
    lines.append(f"Метка: {label}")
    if handoff_reason:
        lines.append(
            staff_texts(HANDOFF_REASON_LINE).format(
                reason=reason_label(handoff_reason, staff_texts)
            )
        )
    lines.append(f"Причина: {reason}")
    if analysis is not None:
        lines.append("Анализ обращения:")
        lines.extend(f"  {line}" for line in render_analysis(analysis))
    summary = session.summary if session is not None else None
    lines.append(f"Краткое содержание: {summary or '—'}")
    recent = session.messages[-_HEADER_MESSAGES:] if session is not None else ()
    if recent:
        lines.append("Последние сообщения:")
        lines.extend(
            f"{_ROLE_NAMES[message.role]}: {message.content[:_QUOTE_CHARS]}" for message in recent
        )
    lines.append(f"Коды сбоев: {', '.join(incidents) if incidents else 'нет'}")
    lines.append("Напишите в эту тему, чтобы ответить клиенту; /close вернёт разговор боту.")
    return "\n".join(lines)[:_POST_CHARS]


class StaffDesk:
    """Performs the relay steps of a delivered reply in the staff chat."""

    def __init__(
        self,
        *,
        bot: Bot,
        sender: ReplySender,
        topics: TopicDirectory,
        sessions: SessionStore,
        analysis: AnalysisFeature | None = None,
        assist: StaffAssist | None = None,
        staff_texts: Translate | None = None,
    ) -> None:
        self._bot = bot
        # Every call goes through it: a 429 or a 5xx is retried, a timeout never (no doubles).
        self._sender = sender
        self._topics = topics
        self._sessions = sessions
        self._staff = topics.staff_chat_id
        # ANALYSIS=on: the topic's first message starts from the conversation's analysis.
        self._analysis = analysis
        # Staff assist: queues the drafting of suggestions; staff texts through the catalogs.
        self._assist = assist
        self._texts: Translate = staff_texts or (lambda message: message)

    async def deliver(self, step: StaffRelay, run: DeliveryRun) -> None:
        """The deliverer of a reply's :class:`~bot.queue.delivery_steps.StaffRelay` step."""
        await self.perform(run.conversation_key, run.delivery, step.actions)

    async def perform(
        self, conversation_key: str, entry: Delivery, actions: tuple[StaffAction, ...]
    ) -> None:
        """Run the relay ``actions`` of reply ``entry`` in order, then note the activity;
        never raises."""
        for action in actions:
            if action.kind == "ended":
                continue
            try:
                await self._step(conversation_key, entry, action)
            except TelegramAPIError as error:
                logger.warning(
                    "Turn %s: staff step %s failed: %s", entry.turn_id, action.kind, error
                )
            except RedisError as error:
                # The customer's reply is out already: failing here would send it again.
                logger.warning(
                    "Turn %s: staff step %s skipped, Redis unavailable (%s)",
                    entry.turn_id,
                    action.kind,
                    type(error).__name__,
                )
        try:
            if any(action.kind == "ended" for action in actions):
                await self._topics.ended(conversation_key)
            elif actions:
                await self._topics.touch(conversation_key, int(time.time() * 1000))
        except RedisError as error:
            logger.warning("Idle index of %s not updated (%s)", entry.turn_id, type(error).__name__)

    async def _step(self, conversation_key: str, entry: Delivery, action: StaffAction) -> None:
        if action.kind == "open":
            await self._open(conversation_key, action)
        elif action.kind == "suggest":
            if self._assist is not None:
                await self._assist.request(conversation_key, entry.turn_id)
        elif action.kind == "suggestion":
            await self._suggestion(conversation_key, entry, action)
        elif action.kind == "edit_staff" and action.message_id is not None:
            message_id = action.message_id
            await self._sender.call(
                self._staff,
                lambda: self._bot.edit_message_text(
                    chat_id=self._staff, message_id=message_id, text=action.text[:_POST_CHARS]
                ),
            )
        elif action.kind == "copy_to_customer":
            await self._copy_to_customer(conversation_key, entry, action)
        elif action.kind == "copy_to_topic" and action.message_id is not None:
            message_id = action.message_id
            await self._in_topic(
                conversation_key,
                lambda thread: self._sender.call(
                    self._staff,
                    lambda: self._bot.copy_message(
                        chat_id=self._staff,
                        from_chat_id=entry.chat_id,
                        message_id=message_id,
                        message_thread_id=thread,
                    ),
                ),
            )
        else:
            text = (entry.text if action.kind == "post_answer" else action.text)[:_POST_CHARS]
            if text.strip():
                await self._post(conversation_key, text)

    async def _suggestion(
        self, conversation_key: str, entry: Delivery, action: StaffAction
    ) -> None:
        """Post a suggestion in the topic with its buttons (the card's when it needs a write)."""
        lines = [
            self._texts(SUGGESTION_HEADER).format(language=action.language or "—"),
            "",
            action.text,
        ]
        if action.action:
            lines += ["", self._texts(SUGGESTION_ACTION).format(action=action.action)]
        rows = suggestion_buttons(
            entry.chat_id,
            action.suggestion_id,
            send=self._texts(SUGGESTION_SEND),
            card=self._texts(SUGGESTION_SEND_CARD) if action.action else None,
        )
        markup = InlineKeyboardMarkup(
            inline_keyboard=[
                [InlineKeyboardButton(text=label, callback_data=data) for label, data in row]
                for row in rows
            ]
        )
        text = "\n".join(lines)[:_POST_CHARS]
        await self._in_topic(
            conversation_key,
            lambda thread: self._sender.call(
                self._staff,
                lambda: self._bot.send_message(
                    chat_id=self._staff, text=text, message_thread_id=thread, reply_markup=markup
                ),
            ),
        )

    async def _post(self, conversation_key: str, text: str) -> None:
        await self._in_topic(conversation_key, lambda thread: self._send_to_topic(text, thread))

    async def _send_to_topic(self, text: str, thread: int) -> None:
        await self._sender.call(
            self._staff,
            lambda: self._bot.send_message(
                chat_id=self._staff, text=text, message_thread_id=thread
            ),
        )

    async def _in_topic(
        self, conversation_key: str, send: Callable[[int], Awaitable[object]]
    ) -> None:
        """Run ``send`` in the customer's topic; a topic gone is made again once."""
        thread = await self._topics.topic_of(conversation_key)
        if thread is not None:
            try:
                await send(thread)
                return
            except TelegramBadRequest as error:
                if not _gone(error):
                    raise
        thread = await self._open(conversation_key, StaffAction(kind="open", text="staff"))
        await send(thread)

    async def _open(self, conversation_key: str, action: StaffAction) -> int:
        """The topic exists (made again when deleted or closed) and shows the header."""
        header = await self._header(conversation_key, action)
        thread = await self._topics.topic_of(conversation_key)
        if thread is not None:
            try:
                await self._send_to_topic(header, thread)
                return thread
            except TelegramBadRequest as error:
                if not _gone(error):
                    raise
                logger.info(
                    "Staff topic of %s is gone; creating it again", chat_label(conversation_key)
                )
        label = short_pseudonym(conversation_key)
        title = f"{(action.name or 'Клиент')[:100]} · {label}"
        # Not repeatable: a topic created by a request that timed out would be made twice.
        topic = await self._sender.call(
            self._staff,
            lambda: self._bot.create_forum_topic(chat_id=self._staff, name=title[:128]),
        )
        await self._topics.bind(conversation_key, topic.message_thread_id, old=thread)
        await self._send_to_topic(header, topic.message_thread_id)
        return topic.message_thread_id

    async def _header(self, conversation_key: str, action: StaffAction) -> str:
        try:
            session = await self._sessions.load(conversation_key)
        except SessionStoreError:
            session = None
        return build_header(
            session,
            name=action.name,
            username=action.username,
            reason=action.text or "—",
            label=short_pseudonym(conversation_key),
            incidents=await self._topics.recent_failures(conversation_key),
            analysis=await self._analysed(conversation_key, session),
            handoff_reason=action.handoff_reason,
            staff_texts=self._texts,
        )

    async def _analysed(
        self, conversation_key: str, session: ConversationSession | None
    ) -> RequestAnalysis | None:
        """The analysis of the conversation as it is now: the stored one when it is of this
        very state, else made now (bounded by ``ANALYSIS_TIMEOUT_SECONDS``; the customer's
        reply is out already). ``None`` when off or failed: the header goes without it."""
        if self._analysis is None or session is None or not session.messages:
            return None
        try:
            stored = await self._analysis.schedule.latest(conversation_key)
        except RedisError:
            stored = None
        if stored is not None and stored.idle == idle_of(session):
            return stored.analysis
        chat_id = telegram_chat_id(conversation_key)
        outcome = await self._analysis.idle.analyse(
            conversation_key, str(chat_id) if chat_id is not None else conversation_key, session
        )
        return outcome.analysis if isinstance(outcome, AnalysisOutcome) else None

    async def _copy_to_customer(
        self, conversation_key: str, entry: Delivery, action: StaffAction
    ) -> None:
        chat_id = telegram_chat_id(conversation_key)
        if chat_id is None or action.message_id is None:
            return
        message_id = action.message_id
        try:
            await self._sender.call(
                chat_id,
                lambda: self._bot.copy_message(
                    chat_id=chat_id, from_chat_id=self._staff, message_id=message_id
                ),
            )
        except TelegramForbiddenError:
            logger.info("Turn %s: staff reply not delivered (bot blocked)", entry.turn_id)
            await self._post(conversation_key, NOT_DELIVERED)
        except TelegramBadRequest as error:
            logger.warning("Turn %s: staff reply not delivered: %s", entry.turn_id, error)
            await self._post(conversation_key, NOT_DELIVERED_OTHER)
