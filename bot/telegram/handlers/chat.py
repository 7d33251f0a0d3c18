"""A customer's text: one turn of the chat service, the typing indicator while it runs."""

import logging

from aiogram import Bot, F, Router
from aiogram.types import Message
from aiogram.utils.chat_action import ChatActionSender

from bot.chat_errors import ChatServiceError
from bot.chat_service import HeldTurn
from bot.log_context import bind_turn
from bot.redis_keys import telegram_conversation
from bot.telegram import messages
from bot.telegram.filters import question_text
from bot.telegram.job_results import Committed, JobContext, JobResult, PlainReply
from bot.telegram.ports import ChatPort
from turn import TurnContext

logger = logging.getLogger(__name__)

# Most answers come faster than this: no "typing" request for them.
TYPING_DELAY_SECONDS = 1.0


async def answer(message: Message, bot: Bot, job: JobContext, chat_service: ChatPort) -> JobResult:
    """Run the turn; its reply is committed, or a kind message with the incident code."""
    chat_id = message.chat.id
    turn_id = job.job.turn_id
    bind_turn(turn_id)
    context = TurnContext(
        conversation_key=telegram_conversation(chat_id),
        chat_id=chat_id,
        user_id=message.from_user.id if message.from_user else None,
        turn_id=turn_id,
    )
    held = HeldTurn(
        token=job.token,
        job_raw=job.job_raw,
        job_id=job.job.job_id,
        chat_id=chat_id,
        queue_ms=job.queue_ms,
        session_version=job.session_version,
        session_data=job.session_data,
    )
    text = question_text(message, (await bot.me()).username)
    try:
        async with ChatActionSender.typing(
            bot=bot, chat_id=chat_id, initial_sleep=TYPING_DELAY_SECONDS
        ):
            reply = await chat_service.reply(context, text, held=held)
    except ChatServiceError as error:
        # The chat is named by the log context (its pseudonym), never by its id here.
        logger.info("Turn %s failed: %s", turn_id, error.kind)
        return PlainReply(text=messages.failure_message(error, turn_id), audit=error.audit_fields)
    if reply.delivery is None:
        raise RuntimeError("a worker's turn returned no committed reply")
    return Committed(reply=reply.delivery, summary_due=reply.summary_updated)


def build_router() -> Router:
    """A fresh router with the text handler."""
    router = Router(name=__name__)
    router.message.register(answer, F.text)
    return router
