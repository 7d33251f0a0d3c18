"""/start, /help, /new, /language (and any other command: the help)."""

from aiogram import Router
from aiogram.filters import Command, CommandObject, CommandStart
from aiogram.types import Message

from bot import customer_texts
from bot.chat_errors import ChatServiceError
from bot.engine.chat_service import ChatService
from bot.language.choice import ConversationLanguages
from bot.language.texts import Texts
from bot.queue.delivery import Reply
from bot.queue.job_results import JobContext, JobDone
from bot.storage.keys import telegram_conversation
from bot.telegram.filters import CommandLike, HasText


async def start(message: Message, texts: Texts | None = None) -> Reply:
    """Greet and say what the bot can help with."""
    return Reply.say(customer_texts.shown(texts, customer_texts.GREETING))


async def help_command(message: Message, texts: Texts | None = None) -> Reply:
    """List the commands."""
    return Reply.say(customer_texts.shown(texts, customer_texts.HELP))


async def new_conversation(
    message: Message, job: JobContext, chat_service: ChatService, texts: Texts | None = None
) -> Reply:
    """Archive the conversation and start a fresh one."""
    try:
        await chat_service.reset(telegram_conversation(message.chat.id), token=job.token)
    except ChatServiceError as error:
        # reset() has no turn of its own; the job's turn id is the incident code.
        error.turn_id = error.turn_id or job.job.turn_id
        raise
    return Reply.say(customer_texts.shown(texts, customer_texts.NEW_CONVERSATION))


async def language_command(
    message: Message,
    command: CommandObject,
    *,
    job: JobContext,
    chat_service: ChatService,
    languages: ConversationLanguages,
    texts: Texts | None = None,
) -> Reply | JobDone:
    """``/language``: the choices; ``/language en``: the conversation's language from now on.

    The choice is kept in the session (committed with the reply, as a handoff step
    is) and no longer changes with the language the customer writes in.
    """
    choices = languages.choices()
    argument = (command.args or "").strip()
    if not argument:
        return Reply.say(
            customer_texts.shown(texts, customer_texts.LANGUAGE_CHOICES).format(choices=choices)
        )
    # ``en-US`` (as Telegram's own language_code reads) chooses ``en``.
    wanted = languages.chosen(argument)
    if wanted is None:
        return Reply.say(
            customer_texts.shown(texts, customer_texts.LANGUAGE_UNKNOWN).format(choices=choices)
        )
    chosen = languages.texts(wanted)
    entry = Reply.say(chosen.gettext(customer_texts.LANGUAGE_CHANGED))
    done: JobDone = await chat_service.commit_without_turn(
        telegram_conversation(message.chat.id),
        job,
        lambda session: session.with_language(wanted, chosen=True),
        entry,
    )
    return done


async def unknown_command(message: Message, texts: Texts | None = None) -> Reply:
    """A command the bot does not have: show the ones it has."""
    return Reply.say(customer_texts.shown(texts, customer_texts.HELP))


def build_router() -> Router:
    """A fresh router with the command handlers (one per dispatcher)."""
    router = Router(name=__name__)
    # Ordinary text skips the command parsing below.
    router.message.filter(CommandLike())
    router.message.register(start, CommandStart())
    router.message.register(help_command, Command("help"))
    router.message.register(new_conversation, Command("new"))
    router.message.register(language_command, Command("language"))
    router.message.register(unknown_command, HasText())
    return router
