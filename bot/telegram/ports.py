"""What the Telegram front end needs from the engine (a seam, so handlers import no engine)."""

from typing import Protocol

from bot.engine.chat_service import ChatReply, HeldTurn
from bot.engine.reply_stream import ReplyStream
from turn import TurnContext


class ChatPort(Protocol):
    """The chat service as handlers see it."""

    async def reply(
        self,
        context: TurnContext,
        text: str,
        *,
        held: HeldTurn | None = None,
        stream: ReplyStream | None = None,
    ) -> ChatReply:
        """Answer one customer message (raises ``ChatServiceError`` subtypes)."""
        ...

    async def reset(self, conversation_key: str, *, token: str | None = None) -> None:
        """Start a fresh conversation (the old one is archived)."""
        ...

    async def summarise(self, conversation_key: str, *, token: str | None = None) -> None:
        """Fold old messages into the summary (under a worker's lease when ``token`` is given)."""
        ...

    async def mark_undelivered(self, conversation_key: str, token: str, turn_id: str) -> None:
        """Record that the answer of ``turn_id`` never reached the customer."""
        ...
