"""What one conversation keeps between turns (pydantic: it crosses the Redis boundary)."""

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SESSION_SCHEMA_VERSION: Literal[1] = 1


class StoredMessage(BaseModel):
    """A customer question or a final answer (never the loop's tool messages)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["user", "assistant"]
    content: str
    created_at: datetime
    turn_id: str | None = None
    # An answer Telegram refused (blocked bot, chat gone, retries exhausted): the
    # customer never read it, and the model is told so on later turns.
    undelivered: bool = False


class ConversationSession(BaseModel):
    """History, summary of older turns and metadata of one conversation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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
    ) -> "ConversationSession":
        """This session plus one question/answer pair."""
        return self.model_copy(
            update={
                "messages": (
                    *self.messages,
                    StoredMessage(role="user", content=question, created_at=now, turn_id=turn_id),
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
