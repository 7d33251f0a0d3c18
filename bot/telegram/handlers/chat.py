"""A customer's text: one turn of the chat service, a draft or "typing" while it runs.

The customer's turn handlers (a text here, a voice message, a photo) take one
:class:`Turns`, what every such turn runs with, gathered once per dispatcher.
"""

import logging
from dataclasses import dataclass

from aiogram import Bot, Router
from aiogram.enums import ChatType
from aiogram.types import Message
from redis.exceptions import RedisError

from bot import customer_texts
from bot.accounts.feature import AccountsFeature
from bot.accounts.linking import shop_customer_id
from bot.analysis.feature import AnalysisFeature
from bot.analysis.upset import looks_upset
from bot.chat_errors import ChatServiceError
from bot.engine.chat_service import ChatService
from bot.handoff.feature import HandoffFeature
from bot.handoff.service import HandoffService
from bot.language.texts import Texts
from bot.ops.log_context import bind_turn
from bot.queue.delivery import Reply
from bot.queue.job_results import JobContext, JobDone, JobOutcome
from bot.storage.keys import telegram_conversation
from bot.telegram.drafts import Drafts
from bot.telegram.filters import HasText, question_text
from bot.telegram.handlers.handoff import customer_of
from bot.telegram.media import Media
from bot.telegram.typing_indicator import TypingIndicator
from turn import TEXT_INPUT, TurnContext, TurnInput

logger = logging.getLogger(__name__)

# Most answers come faster than this: no "typing" request for them.
TYPING_DELAY_SECONDS = 1.0


@dataclass(frozen=True, kw_only=True)
class Turns:
    """What a customer's turn in Telegram runs with (the workflow data's ``turns``).

    ``chat``: the chat service; ``media``: voice messages, photos and albums;
    ``drafts``: the answer shown while it is written (``None``: ``STREAMING=off``);
    and the features a turn asks, ``None`` while off: ``handoff`` (failed turns
    call a person, a customer waiting for one), ``accounts`` (the shop's customer
    id), ``analysis`` (an upset customer analysed early).
    """

    chat: ChatService
    media: Media
    drafts: Drafts | None = None
    handoff: HandoffFeature | None = None
    accounts: AccountsFeature | None = None
    analysis: AnalysisFeature | None = None


async def answer(
    message: Message,
    bot: Bot,
    job: JobContext,
    turns: Turns,
    *,
    language: str | None = None,
    texts: Texts | None = None,
) -> JobOutcome:
    """Run the turn of a text; its reply is committed, or a kind message with the incident code.

    In a private chat (``turns.drafts`` given, ``STREAMING=on``) the answer is shown as a
    draft while it is written; the committed reply is sent as usual either way.

    With handoff on, failed turns in a row call a person in; an answered turn's
    commit starts the count again. With account linking on, the turn's context
    carries the shop's customer id the session keeps (tools bind it).

    With escalation on (``analysis.early``), an answered private message that reads
    upset (a local word check, no model) has the conversation analysed soon by the
    analysis sweeper, never here: the offer of a person may follow the answer.
    """
    text = question_text(message, (await bot.me()).username)
    result = await run_turn(message, bot, job, turns, text=text, language=language, texts=texts)
    analysis, handoff = turns.analysis, turns.handoff
    early = analysis.early if analysis is not None else None
    if (
        early is not None
        and isinstance(result, JobDone)
        # Waiting for a person already: nobody is to be offered one.
        and handoff is not None
        and handoff.service.state(job) == "bot"
        and message.chat.type == ChatType.PRIVATE
        and looks_upset(text)
    ):
        await early.soon(telegram_conversation(message.chat.id))
    return result


async def run_turn(
    message: Message,
    bot: Bot,
    job: JobContext,
    turns: Turns,
    *,
    text: str,
    turn_input: TurnInput = TEXT_INPUT,
    language: str | None = None,
    texts: Texts | None = None,
) -> JobOutcome:
    """One model turn for ``message`` whose words are ``text`` (typed, or a voice's transcript).

    See :func:`answer`; ``turn_input`` says what the customer sent, for the history and the audit.
    """
    chat_service, handoff, drafts = turns.chat, turns.handoff, turns.drafts
    chat_id = message.chat.id
    turn_id = job.job.turn_id
    bind_turn(turn_id)
    context = TurnContext(
        conversation_key=telegram_conversation(chat_id),
        chat_id=chat_id,
        user_id=message.from_user.id if message.from_user else None,
        turn_id=turn_id,
        # Read from the session only where accounts can be linked at all.
        shop_customer_id=shop_customer_id(job) if turns.accounts is not None else None,
        photos=_photos(job, turn_input),
        language=language,
    )
    customer = customer_of(message) if handoff is not None else None
    try:
        if drafts is not None and drafts.wanted(
            chat_type=message.chat.type,
            thread_id=message.message_thread_id,
            handoff_state=handoff.service.state(job) if handoff is not None else "bot",
        ):
            # The draft shows the answer as it is written; no "typing" besides it.
            async with drafts.publisher(bot, chat_id, texts) as publisher:
                try:
                    reply = await chat_service.reply(
                        context,
                        text,
                        held=job,
                        customer=customer,
                        stream=publisher,
                        turn_input=turn_input,
                    )
                finally:
                    # The final message (or the failure's) follows: no draft beside it.
                    await publisher.clear()
        else:
            async with TypingIndicator(bot, chat_id, delay=TYPING_DELAY_SECONDS):
                reply = await chat_service.reply(
                    context, text, held=job, customer=customer, turn_input=turn_input
                )
    except ChatServiceError as error:
        # The chat is named by the log context (its pseudonym), never by its id here.
        logger.info("Turn %s failed: %s", turn_id, error.kind)
        failure = Reply.say(
            customer_texts.failure_message(error, turn_id, customer_texts.gettext_of(texts)),
            audit=error.audit_fields,
        )
        if handoff is None:
            return failure
        return await _after_failure(message, job, handoff.service, failure, texts)
    return JobDone(delivery=reply.delivery, summary_due=reply.summary_updated)


def _photos(job: JobContext, turn_input: TurnInput) -> tuple[str, ...]:
    """The photos of the conversation so far and of this message (file ids, oldest first)."""
    session = job.session
    earlier = tuple(
        photo
        for stored in (session.messages if session is not None else ())
        if stored.role == "user"
        for photo in stored.photos
    )
    return earlier + tuple(image.file_id for image in turn_input.images)


async def _after_failure(
    message: Message,
    job: JobContext,
    handoff: HandoffService,
    failure: Reply,
    texts: Texts | None = None,
) -> JobOutcome:
    """Count the failure; enough in a row (and nobody called yet) opens a handoff."""
    key = telegram_conversation(message.chat.id)
    try:
        if not await handoff.record_failure(key, job.job.turn_id) or handoff.state(job) != "bot":
            return failure
        return await handoff.open(
            key,
            job,
            customer_of(message),
            trigger="failed_turns",
            text=f"{failure.text}\n\n{customer_texts.shown(texts, customer_texts.FAILED_HANDOFF)}",
            audit=failure.audit,
            texts=texts,
        )
    except (RedisError, ChatServiceError):
        # The failure itself is still told (and audited) the usual way.
        logger.warning("Turn %s: handoff after failures not recorded", job.job.turn_id)
        return failure


def build_router() -> Router:
    """A fresh router with the text handler."""
    router = Router(name=__name__)
    router.message.register(answer, HasText())
    return router
