"""What the Telegram front end needs from the engine (a seam, so handlers import no engine)."""

from typing import Protocol

from bot.chat_service import ChatReply
from tools.context import ToolContext


class ChatPort(Protocol):
    """The chat service as handlers see it."""

    async def reply(self, conversation_key: str, text: str, context: ToolContext) -> ChatReply:
        """Answer one customer message (raises ``ChatServiceError`` subtypes)."""
        ...

    async def reset(self, conversation_key: str) -> None:
        """Start a fresh conversation (the old one is archived)."""
        ...


def conversation_key(chat_id: int) -> str:
    """The session key of a Telegram chat (one conversation per chat)."""
    return f"tg:{chat_id}"
