"""/start, /help, /new (and any other command: the help)."""

from aiogram import Bot, F, Router
from aiogram.filters import Command, CommandStart
from aiogram.types import Message

from bot.chat_errors import ChatServiceError
from bot.redis_keys import telegram_conversation
from bot.telegram import messages
from bot.telegram.ports import ChatPort
from bot.telegram.sending import ReplySender
from turn import new_turn_id


async def start(message: Message, bot: Bot, replies: ReplySender) -> None:
    """Greet and say what the bot can help with."""
    await replies.send_plain(bot, message.chat.id, messages.GREETING)


async def help_command(message: Message, bot: Bot, replies: ReplySender) -> None:
    """List the commands."""
    await replies.send_plain(bot, message.chat.id, messages.HELP)


async def new_conversation(
    message: Message, bot: Bot, replies: ReplySender, chat_service: ChatPort
) -> None:
    """Archive the conversation and start a fresh one."""
    try:
        await chat_service.reset(telegram_conversation(message.chat.id))
    except ChatServiceError as error:
        # reset() has no turn of its own; give the customer a code that is logged.
        error.turn_id = error.turn_id or new_turn_id()
        raise
    await replies.send_plain(bot, message.chat.id, messages.NEW_CONVERSATION)


async def unknown_command(message: Message, bot: Bot, replies: ReplySender) -> None:
    """A command the bot does not have: show the ones it has."""
    await replies.send_plain(bot, message.chat.id, messages.HELP)


def build_router() -> Router:
    """A fresh router with the command handlers (one per dispatcher)."""
    router = Router(name=__name__)
    router.message.register(start, CommandStart())
    router.message.register(help_command, Command("help"))
    router.message.register(new_conversation, Command("new"))
    router.message.register(unknown_command, F.text.startswith("/"))
    return router
