"""/start, /help, /new (and any other command: the help)."""

from aiogram import Router
from aiogram.filters import Command, CommandStart
from aiogram.types import Message

from bot import customer_texts
from bot.chat_errors import ChatServiceError
from bot.engine.chat_service import ChatService
from bot.queue.job_results import JobContext, PlainReply
from bot.storage.keys import telegram_conversation
from bot.telegram.filters import CommandLike, HasText


async def start(message: Message) -> PlainReply:
    """Greet and say what the bot can help with."""
    return PlainReply(text=customer_texts.GREETING)


async def help_command(message: Message) -> PlainReply:
    """List the commands."""
    return PlainReply(text=customer_texts.HELP)


async def new_conversation(
    message: Message, job: JobContext, chat_service: ChatService
) -> PlainReply:
    """Archive the conversation and start a fresh one."""
    try:
        await chat_service.reset(telegram_conversation(message.chat.id), token=job.token)
    except ChatServiceError as error:
        # reset() has no turn of its own; the job's turn id is the incident code.
        error.turn_id = error.turn_id or job.job.turn_id
        raise
    return PlainReply(text=customer_texts.NEW_CONVERSATION)


async def unknown_command(message: Message) -> PlainReply:
    """A command the bot does not have: show the ones it has."""
    return PlainReply(text=customer_texts.HELP)


def build_router() -> Router:
    """A fresh router with the command handlers (one per dispatcher)."""
    router = Router(name=__name__)
    # Ordinary text skips the command parsing below.
    router.message.filter(CommandLike())
    router.message.register(start, CommandStart())
    router.message.register(help_command, Command("help"))
    router.message.register(new_conversation, Command("new"))
    router.message.register(unknown_command, HasText())
    return router
