"""What the worker does in the staff chat after a job's commit (crosses Redis in the outbox)."""

from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

Trigger = Literal["command", "tool", "failed_turns", "staff", "analysis"]
"""What opened a handoff (``analysis``: the customer pressed the escalation offer's button)."""

HandoffReason = Literal[
    "customer_asked",
    "bot_could_not_answer",
    "repeated_failures",
    "upset_customer",
    "action_needs_person",
    "policy",
    "other",
]
"""Why a conversation was handed to a person: one of seven, for the topic, audit and stats."""
HANDOFF_REASONS: tuple[HandoffReason, ...] = get_args(HandoffReason)

# The request_human_agent tool's own categories (tools/human_agent.py) as handoff reasons.
_TOOL_REASONS: dict[str, HandoffReason] = {
    "customer_asked": "customer_asked",
    "complaint": "upset_customer",
    "refund_dispute": "policy",
    "order_problem": "action_needs_person",
    "bot_cannot_help": "bot_could_not_answer",
}


def reason_of(trigger: Trigger, detail: str = "") -> HandoffReason:
    """The reason of a handoff the code path ``trigger`` opened (``detail``: the tool's own).

    ``/operator`` is the customer asking; failed turns in a row are repeated failures;
    the escalation offer's press follows an analysis that found the customer upset; a
    staff member writing first in a topic is ``other``; the model's ``request_human_agent``
    names its category, mapped here.
    """
    if trigger == "command":
        return "customer_asked"
    if trigger == "failed_turns":
        return "repeated_failures"
    if trigger == "analysis":
        return "upset_customer"
    if trigger == "tool":
        return _TOOL_REASONS.get(detail, "other")
    return "other"


class StaffAction(BaseModel):
    """One relay step; ``kind`` says which fields matter.

    * ``open``: make sure the customer's topic exists (create or re-create it) and
      post the context header (``name``, ``username``);
    * ``copy_to_topic``: copy the customer's message ``message_id`` into the topic;
    * ``post_answer``: post the reply's text (the bot's answer) into the topic;
    * ``post``: post ``text`` (the bot's own words to staff) into the topic;
    * ``copy_to_customer``: copy the staff message ``message_id`` to the customer;
    * ``ended``: the handoff is over (no more idle checks for it);
    * ``suggest``: queue the drafting of a suggested reply (staff assist), after the relay;
    * ``suggestion``: post suggestion ``suggestion_id`` (``text``, in ``language``) with its
      buttons; ``action`` is the write it needs, described (empty: none);
    * ``edit_staff``: rewrite the staff chat's message ``message_id`` as ``text``, buttonless.

    Any step but ``ended`` counts as activity for the idle check.
    """

    # Stored in Redis: a field another version wrote (a rolling deploy) is ignored, not fatal.
    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: Literal[
        "open",
        "copy_to_topic",
        "post_answer",
        "post",
        "copy_to_customer",
        "ended",
        "suggest",
        "suggestion",
        "edit_staff",
    ]
    message_id: int | None = None
    text: str = ""
    name: str = ""
    username: str = ""
    # ``open``: why (one of :data:`HANDOFF_REASONS`; empty in steps an older version wrote).
    handoff_reason: str = ""
    # ``suggestion``: its id, the customer's language, the write it needs (described).
    suggestion_id: str = ""
    language: str = ""
    action: str = ""


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
