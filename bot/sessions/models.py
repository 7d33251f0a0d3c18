"""What one conversation keeps between turns (pydantic: it crosses the Redis boundary)."""

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.sessions.pending import PendingAction
from bot.sessions.suggestion import StaffSuggestion

SESSION_SCHEMA_VERSION: Literal[1] = 1

HandoffState = Literal["bot", "waiting", "human"]
"""Who answers: the bot; the bot while a person was asked for; a person (the bot is silent)."""


class StoredMessage(BaseModel):
    """A customer question, a final answer, or a support person's message (``staff``).

    Never the loop's tool messages.
    """

    # Stored in Redis: a field another version wrote (a rolling deploy) is ignored, not fatal.
    model_config = ConfigDict(frozen=True, extra="ignore")

    role: Literal["user", "assistant", "staff"]
    content: str
    created_at: datetime
    turn_id: str | None = None
    # An answer Telegram refused (blocked bot, chat gone, retries exhausted): the
    # customer never read it, and the model is told so on later turns.
    undelivered: bool = False
    # The outcome of a confirmed (or declined, expired) action, told by the application:
    # the model reads it as what happened, not as something it said.
    action_id: str | None = None
    # Telegram's file ids of the photos this customer message carried (never the images):
    # its content holds a marker the model reads, these are for staff and actions.
    photos: tuple[str, ...] = ()


class ConversationSession(BaseModel):
    """History, summary of older turns and metadata of one conversation."""

    # Stored in Redis: a field another version wrote (a rolling deploy) is ignored, not fatal.
    model_config = ConfigDict(frozen=True, extra="ignore")

    schema_version: Literal[1] = SESSION_SCHEMA_VERSION
    session_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    conversation_key: str
    created_at: datetime
    updated_at: datetime
    prompt_id: str
    prompt_version: str
    turn_count: int = Field(default=0, ge=0)
    summary: str | None = None
    summarized_messages: int = Field(default=0, ge=0)
    messages: tuple[StoredMessage, ...] = ()
    handoff: HandoffState = "bot"
    # When the current handoff began, when staff first answered, the last message either way.
    handoff_since: datetime | None = None
    staff_replied_at: datetime | None = None
    handoff_activity: datetime | None = None
    # A write the model proposed that waits for the customer's button (at most one).
    pending_action: PendingAction | None = None
    # The shop's own id of this customer, found by the phone number of a contact the
    # customer shared themselves (account linking); tools bind it, the model never sees it.
    shop_customer_id: str | None = None
    # The customer's language (a LANGUAGES code), written with each turn's commit;
    # ``language_chosen``: set by ``/language``, then the customer's words no longer change it.
    language: str | None = None
    language_chosen: bool = False
    # Staff assist: the suggested reply waiting in the staff topic (at most one).
    suggestion: StaffSuggestion | None = None

    @classmethod
    def start(
        cls, conversation_key: str, now: datetime, prompt_id: str, prompt_version: str
    ) -> "ConversationSession":
        """A fresh, empty session."""
        return cls(
            conversation_key=conversation_key,
            created_at=now,
            updated_at=now,
            prompt_id=prompt_id,
            prompt_version=prompt_version,
        )

    def with_turn(
        self,
        question: str,
        answer: str,
        now: datetime,
        prompt_version: str,
        turn_id: str | None = None,
        *,
        photos: tuple[str, ...] = (),
    ) -> "ConversationSession":
        """This session plus one question/answer pair (``photos``: the question's file ids)."""
        return self.model_copy(
            update={
                "messages": (
                    *self.messages,
                    StoredMessage(
                        role="user",
                        content=question,
                        created_at=now,
                        turn_id=turn_id,
                        photos=photos,
                    ),
                    StoredMessage(
                        role="assistant", content=answer, created_at=now, turn_id=turn_id
                    ),
                ),
                "turn_count": self.turn_count + 1,
                "updated_at": now,
                "prompt_version": prompt_version,
            }
        )

    def with_summary(self, summary: str, folded: int, now: datetime) -> "ConversationSession":
        """The oldest ``folded`` messages replaced by ``summary``."""
        return self.model_copy(
            update={
                "summary": summary,
                "messages": self.messages[folded:],
                "summarized_messages": self.summarized_messages + folded,
                "updated_at": now,
            }
        )

    def with_undelivered(self, turn_id: str) -> "ConversationSession":
        """The answer of ``turn_id`` marked as never delivered to the customer."""
        return self.model_copy(
            update={
                "messages": tuple(
                    message.model_copy(update={"undelivered": True})
                    if message.role == "assistant" and message.turn_id == turn_id
                    else message
                    for message in self.messages
                )
            }
        )

    def with_handoff(self, state: HandoffState, now: datetime) -> "ConversationSession":
        """This session in handoff ``state`` (``bot`` clears the handoff's times and any
        suggested reply)."""
        if state == "bot":
            times: dict[str, object] = {
                "handoff_since": None,
                "staff_replied_at": None,
                "handoff_activity": None,
                # A suggested reply is for the person in charge: none once the bot is.
                "suggestion": None,
            }
        else:
            times = {"handoff_since": self.handoff_since or now, "handoff_activity": now}
        return self.model_copy(update={"handoff": state, "updated_at": now, **times})

    def with_message(
        self, role: Literal["user", "staff"], content: str, now: datetime, turn_id: str
    ) -> "ConversationSession":
        """This session plus one message outside a model turn (a handed-off conversation)."""
        update: dict[str, object] = {
            "messages": (
                *self.messages,
                StoredMessage(role=role, content=content, created_at=now, turn_id=turn_id),
            ),
            "updated_at": now,
            "handoff_activity": now,
        }
        if role == "staff" and self.staff_replied_at is None:
            update["staff_replied_at"] = now
        return self.model_copy(update=update)

    def with_customer_photo(
        self, content: str, photos: tuple[str, ...], now: datetime, turn_id: str
    ) -> "ConversationSession":
        """This session plus a customer's photo outside a model turn (an album's late photo).

        Unlike :meth:`with_message` it leaves the handoff's activity alone: the bot
        keeps the conversation, nobody answered.
        """
        message = StoredMessage(
            role="user", content=content, created_at=now, turn_id=turn_id, photos=photos
        )
        return self.model_copy(update={"messages": (*self.messages, message), "updated_at": now})

    def with_shop_customer(self, customer_id: str, now: datetime) -> "ConversationSession":
        """This conversation linked to the shop's customer ``customer_id``."""
        return self.model_copy(update={"shop_customer_id": customer_id, "updated_at": now})

    def with_language(self, language: str, *, chosen: bool = False) -> "ConversationSession":
        """This conversation in ``language`` (``chosen``: by the customer with ``/language``)."""
        return self.model_copy(
            update={"language": language, "language_chosen": chosen or self.language_chosen}
        )

    def with_pending_action(self, action: PendingAction | None) -> "ConversationSession":
        """This session waiting for ``action`` (``None``: waiting for nothing)."""
        return self.model_copy(update={"pending_action": action})

    def with_suggestion(self, suggestion: StaffSuggestion | None) -> "ConversationSession":
        """This session with ``suggestion`` waiting in the staff topic (``None``: none)."""
        return self.model_copy(update={"suggestion": suggestion})

    def with_action_outcome(
        self, action_id: str, text: str, now: datetime, turn_id: str
    ) -> "ConversationSession":
        """The pending action settled: its outcome told to the customer joins the history."""
        return self.model_copy(
            update={
                "messages": (
                    *self.messages,
                    StoredMessage(
                        role="assistant",
                        content=text,
                        created_at=now,
                        turn_id=turn_id,
                        action_id=action_id,
                    ),
                ),
                "pending_action": None,
                "updated_at": now,
            }
        )

    def handoff_idle(self, now: datetime, idle_seconds: float) -> bool:
        """Whether a handoff is on and nobody wrote for ``idle_seconds``."""
        if self.handoff == "bot" or self.handoff_activity is None:
            return False
        return (now - self.handoff_activity).total_seconds() >= idle_seconds


def session_of(raw: str) -> ConversationSession | None:
    """The session a worker read with its job (``None`` when new or unreadable)."""
    if not raw:
        return None
    try:
        return ConversationSession.model_validate_json(raw)
    except ValidationError:
        return None
