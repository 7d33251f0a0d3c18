"""What the worker does in the staff chat after a job's commit (crosses Redis in the outbox)."""

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

Trigger = Literal["command", "tool", "failed_turns", "staff", "analysis"]
"""What opened a handoff (``analysis``: the customer pressed the escalation offer's button)."""


class StaffAction(BaseModel):
    """One relay step; ``kind`` says which fields matter.

    * ``open``: make sure the customer's topic exists (create or re-create it) and
      post the context header (``name``, ``username``);
    * ``copy_to_topic``: copy the customer's message ``message_id`` into the topic;
    * ``post_answer``: post the reply's text (the bot's answer) into the topic;
    * ``post``: post ``text`` (the bot's own words to staff) into the topic;
    * ``copy_to_customer``: copy the staff message ``message_id`` to the customer;
    * ``ended``: the handoff is over (no more idle checks for it).

    Any step but ``ended`` counts as activity for the idle check.
    """

    # Stored in Redis: a field another version wrote (a rolling deploy) is ignored, not fatal.
    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: Literal["open", "copy_to_topic", "post_answer", "post", "copy_to_customer", "ended"]
    message_id: int | None = None
    text: str = ""
    name: str = ""
    username: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffTurn:
    """What a worker's turn needs to know for the handoff: who writes, and their message."""

    name: str
    username: str
    message_id: int


TRANSCRIPT_LABEL = "🎤 Расшифровка голосового сообщения (возможны ошибки распознавания):"
"""Before a voice message's transcript in the customer's topic (staff read it, or listen)."""


def transcript_post(transcript: str) -> StaffAction:
    """The step that posts a voice message's ``transcript`` to the topic, after its copy."""
    return StaffAction(kind="post", text=f"{TRANSCRIPT_LABEL}\n{transcript}")


def staff_label(trigger: Trigger, reason: str = "") -> str:
    """The handoff's cause as staff read it in the header (categories, no customer text)."""
    return f"{trigger}/{reason}" if reason else trigger
