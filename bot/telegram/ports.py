"""What the Telegram front end needs from the engine (a seam, so handlers import no engine)."""

from collections.abc import Callable
from typing import Protocol

from bot.engine.chat_service import ChatReply
from bot.engine.reply_stream import ReplyStream
from bot.handoff.staff_actions import HandoffTurn, StaffAction
from bot.queue.job_results import JobContext, JobDone
from bot.queue.jobs import OutboxEntry
from bot.sessions.models import ConversationSession
from turn import TEXT_INPUT, TurnContext, TurnInput


class ChatPort(Protocol):
    """The chat service as handlers see it."""

    async def reply(
        self,
        context: TurnContext,
        text: str,
        *,
        held: JobContext,
        customer: HandoffTurn | None = None,
        stream: ReplyStream | None = None,
        turn_input: TurnInput = TEXT_INPUT,
    ) -> ChatReply:
        """Answer one customer message (raises ``ChatServiceError`` subtypes)."""
        ...

    async def reset(self, conversation_key: str, *, token: str) -> None:
        """Start a fresh conversation (the old one is archived)."""
        ...

    async def summarise(self, conversation_key: str, *, token: str) -> None:
        """Fold old messages into the summary under the worker's lease ``token``."""
        ...

    async def mark_undelivered(self, conversation_key: str, token: str, turn_id: str) -> None:
        """Record that the answer of ``turn_id`` never reached the customer."""
        ...

    async def commit_without_turn(
        self,
        conversation_key: str,
        held: JobContext,
        change: Callable[[ConversationSession], ConversationSession],
        entry: OutboxEntry,
    ) -> JobDone:
        """Save ``change`` of the held session, pop the job with ``entry`` (one script)."""
        ...


class PhotoKeeper(Protocol):
    """Where an album's late photo is kept without a turn (the chat service)."""

    async def keep_photo(
        self,
        conversation_key: str,
        held: JobContext,
        caption: str,
        file_id: str,
        *,
        staff: tuple[StaffAction, ...] = (),
    ) -> JobDone:
        """Add the photo to the history; no model turn, no answer."""
        ...
