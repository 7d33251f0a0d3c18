"""A customer's text: one turn of the chat service, the typing indicator while it runs."""

import logging

from aiogram import Bot, F, Router
from aiogram.types import Message
from aiogram.utils.chat_action import ChatActionSender

from bot.chat_errors import ChatServiceError
from bot.log_context import bind_turn
from bot.telegram import messages
from bot.telegram.filters import question_text
from bot.telegram.ports import ChatPort, conversation_key
from bot.telegram.sending import ReplySender
from bot.turns import new_turn_id
from tools.context import ToolContext

logger = logging.getLogger(__name__)


async def answer(message: Message, bot: Bot, replies: ReplySender, chat_service: ChatPort) -> None:
    """Run the turn and send the answer, or a kind message with the incident code."""
    chat_id = message.chat.id
    turn_id = new_turn_id()
    bind_turn(turn_id)
    context = ToolContext(
        chat_id=chat_id,
        user_id=message.from_user.id if message.from_user else None,
        turn_id=turn_id,
    )
    text = question_text(message, (await bot.me()).username)
    try:
        async with ChatActionSender.typing(bot=bot, chat_id=chat_id):
            reply = await chat_service.reply(conversation_key(chat_id), text, context)
    except ChatServiceError as error:
        # The chat is named by the log context (its pseudonym), never by its id here.
        logger.info("Turn %s failed: %s", turn_id, error.kind)
        await replies.send_plain(bot, chat_id, messages.failure_message(error, turn_id))
        return
    # Whatever else breaks inside the turn is a bug; the customer still gets the code.
    except Exception:
        logger.exception("Turn %s failed unexpectedly", turn_id)
        await replies.send_plain(bot, chat_id, messages.unexpected_failure_message(turn_id))
        return
    await replies.send_answer(bot, chat_id, reply.text)


def build_router() -> Router:
    """A fresh router with the text handler."""
    router = Router(name=__name__)
    router.message.register(answer, F.text)
    return router
