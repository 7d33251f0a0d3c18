"""Which messages are meant for the bot, and the cheap filters the routers use.

Every filter here is a coroutine: aiogram runs a synchronous filter, a magic ``F``
filter included, through ``asyncio.to_thread`` on every update it checks (a thread
hop per filter per update, measured in bench/README.md).
"""

from aiogram import Bot
from aiogram.enums import ChatType, ContentType, MessageEntityType
from aiogram.filters import Filter
from aiogram.types import Message, MessageEntity

from bot.ops.surrogates import replace_lone_surrogates
from bot.queue.job_results import JobContext


class AddressedToBot(Filter):
    """Private chats always; groups if allowed and the bot is mentioned, replied to or commanded.

    Decided once, at intake (:meth:`decide`); the queued job carries the decision
    (``QueuedJob.addressed``), and the worker's router reads it from there.
    """

    def __init__(self, *, allow_groups: bool) -> None:
        self._allow_groups = allow_groups

    async def __call__(self, message: Message, bot: Bot, job: JobContext | None = None) -> bool:
        """Whether ``message`` is for this bot: intake's decision the job carries, else decided."""
        carried = job.job.addressed if job is not None else None
        if carried is not None:
            return carried
        return await self.decide(message, bot)

    async def decide(self, message: Message, bot: Bot) -> bool:
        """Whether ``message`` is for this bot, judged from the message (and the bot's name)."""
        if message.chat.type == ChatType.PRIVATE:
            return True
        if not self._allow_groups or message.chat.type not in (ChatType.GROUP, ChatType.SUPERGROUP):
            return False
        me = await bot.me()
        replied = message.reply_to_message
        if replied is not None and replied.from_user is not None and replied.from_user.id == me.id:
            return True
        text = message.text or ""
        if text.startswith("/"):
            return own_command(text, me.username) is not None
        mention = f"@{me.username}".lower() if me.username else None
        return mention is not None and any(
            entity.type == MessageEntityType.MENTION
            and entity_text(text, entity).lower() == mention
            for entity in message.entities or ()
        )


def own_command(text: str, bot_username: str | None) -> str | None:
    """The command ``text`` starts with (``"/close"``) if it is this bot's; else ``None``.

    ``/help@otherbot`` is addressed to another bot of the group, not to us.
    """
    if not text.startswith("/"):
        return None
    command, at, addressee = text.split(maxsplit=1)[0].partition("@")
    if at and addressee.lower() != (bot_username or "").lower():
        return None
    return command


def entity_text(text: str, entity: MessageEntity) -> str:
    """The part of ``text`` that ``entity`` covers; empty where it falls outside.

    Offsets count UTF-16 code units. aiogram's ``extract_from`` encodes the text
    and raises on half an emoji (a lone surrogate); here it counts as the one
    unit it is, as U+FFFD, so the offsets of what follows stay right.
    """
    units = replace_lone_surrogates(text).encode("utf-16-le")
    start = max(entity.offset, 0) * 2
    end = max(entity.offset + entity.length, 0) * 2
    return units[start:end].decode("utf-16-le", errors="replace")


class HasText(Filter):
    """A message with text (a command included); what ``F.text`` checks, on the loop."""

    async def __call__(self, message: Message) -> bool:
        """Whether ``message`` has text."""
        return bool(message.text)


class CommandLike(Filter):
    """Text or caption starting with "/".

    Checked before aiogram's ``Command`` filters, which parse every message they
    see and raise an exception internally for each one that is not their command.
    """

    async def __call__(self, message: Message) -> bool:
        """Whether ``message`` could be a command."""
        return (message.text or message.caption or "").startswith("/")


class InChat(Filter):
    """Messages of one chat; what ``F.chat.id == chat_id`` checks, on the loop."""

    def __init__(self, chat_id: int) -> None:
        self._chat_id = chat_id

    async def __call__(self, message: Message) -> bool:
        """Whether ``message`` was written in the chat."""
        return message.chat.id == self._chat_id


def question_text(message: Message, bot_username: str | None, *, caption: bool = False) -> str:
    """The customer's words, without the ``@bot`` mention used to address it in a group.

    ``caption``: the words are a photo's caption, not a text. Half an emoji (a
    lone surrogate) becomes U+FFFD here, before anything else tries to encode the text.
    """
    text = replace_lone_surrogates((message.caption if caption else message.text) or "")
    if message.chat.type != ChatType.PRIVATE and bot_username:
        text = text.replace(f"@{bot_username}", " ")
    return text.strip()


def forwarded_from_channel(message: Message) -> bool:
    """Whether ``message`` forwards a channel's post (Bot API 7 ``forward_origin``, or older)."""
    origin = message.forward_origin
    if origin is not None:
        return origin.type == "channel"
    chat = message.forward_from_chat
    return chat is not None and chat.type == "channel"


# What staff may send a customer; service messages (topic edited, pinned, members
# joined...) cannot be copied and are not meant for the customer.
RELAYED_CONTENT = frozenset(
    {
        ContentType.TEXT,
        ContentType.PHOTO,
        ContentType.VIDEO,
        ContentType.DOCUMENT,
        ContentType.AUDIO,
        ContentType.VOICE,
        ContentType.VIDEO_NOTE,
        ContentType.ANIMATION,
        ContentType.STICKER,
        ContentType.LOCATION,
        ContentType.CONTACT,
    }
)
