"""What the Telegram front end needs from the engine (a seam, so handlers import no engine)."""

from typing import Protocol

from bot.chat_service import ChatReply
from turn import TurnContext


class ChatPort(Protocol):
    """The chat service as handlers see it."""

    async def reply(self, context: TurnContext, text: str) -> ChatReply:
        """Answer one customer message (raises ``ChatServiceError`` subtypes)."""
        ...

    async def reset(self, conversation_key: str) -> None:
        """Start a fresh conversation (the old one is archived)."""
        ...
