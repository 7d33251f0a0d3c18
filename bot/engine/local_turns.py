"""A front end without a queue (the console, the engine's tests, the benchmarks).

Each message is a job of its own: the front end takes the conversation's
lease as a worker's take does (:meth:`ChatService.hold`), hands the chat
service the same held job a worker would, and after the commit delivers the
reply itself: it is returned to be shown, and its audit entries are written
as a worker's delivery writes them. A failed turn's entries travel on the
error and are written the same way.
"""

from collections.abc import Awaitable, Callable

from bot.audit.sink import AuditSink
from bot.chat_errors import ChatServiceError
from bot.engine.chat_service import ChatReply, ChatService
from bot.engine.reply_stream import ReplyStream
from bot.queue.delivery import Delivery
from bot.queue.job_results import JobContext, SessionChange
from bot.queue.staff_actions import HandoffTurn
from turn import TurnContext


class LocalTurns:
    """Runs turns, presses and ``/new`` for a process's own conversations, as jobs of their own."""

    def __init__(self, chat: ChatService, audit: AuditSink) -> None:
        self._chat = chat
        self._audit = audit

    async def answer(
        self,
        context: TurnContext,
        text: str,
        *,
        stream: ReplyStream | None = None,
        customer: HandoffTurn | None = None,
    ) -> ChatReply:
        """Answer one message; raises a :class:`ChatServiceError` subtype on failure.

        The audit is written before this returns (or raises). A summary due is
        folded in the background: the next message never waits for its model call.
        ``customer`` (a front end with a staff chat) lets the turn open a handoff.
        """
        key = context.conversation_key
        try:
            async with self._chat.hold(key, context) as held:
                reply = await self._chat.reply(
                    context, text, held=held, stream=stream, customer=customer
                )
        except ChatServiceError as error:
            await self._audit.write_fields(list(error.audit_fields))
            raise
        # Shown once this returns: nothing here can fail to deliver it.
        await self._audit.write_fields(list(reply.delivery.audit))
        if reply.summary_updated:
            self._chat.summarise_later(key)
        return reply

    async def run(
        self,
        context: TurnContext,
        step: Callable[[JobContext], Awaitable[SessionChange | None]],
    ) -> Delivery | None:
        """Run a step other than a turn (a pressed card) as a job of its own; commit its change.

        Returns the reply committed, its audit written; ``None`` when the step
        changed nothing. Raises a :class:`ChatServiceError` when the lease or
        the save failed (nothing is audited then, as for a worker's).
        """
        async with self._chat.hold(context.conversation_key, context) as held:
            settled = await step(held)
            if settled is None:
                return None
            # A confirmed read is answered by the model; anything else is committed as is.
            done = await self._chat.answer_action(context, held, settled)
        await self._audit.write_fields(list(done.delivery.audit))
        return done.delivery

    async def reset(self, conversation_key: str) -> None:
        """Start a fresh conversation (the old one is archived for staff)."""
        async with self._chat.hold(conversation_key) as held:
            await self._chat.reset(conversation_key, token=held.token)
