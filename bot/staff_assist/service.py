"""Staff assist's steps in the customer's queue: draft a suggestion, its presses, a review.

Each runs in the worker holding the customer's chat, as a job of its own:

- :meth:`StaffAssist.request` (the staff desk, right after a relay) queues the
  drafting job (``Notice.SUGGESTION``), once per relayed message (its update id
  is derived from the relay's turn, and intake drops a repeated id);
- :meth:`StaffAssist.draft` drafts the suggestion for the newest customer message
  if nobody answered it yet and commits it to the session with its post
  (a failure is one line in the topic and a ``suggestion_failed`` entry);
- :meth:`StaffAssist.press` sends the suggestion as staff's answer, or proposes
  its action (a pending action, as a model's proposal is, through the tool path's
  proposal) and sends the customer the card; the action runs on the customer's
  press only, by :class:`~bot.actions.presses.CardPresses`;
- :meth:`StaffAssist.review` posts a low quality score in the customer's topic
  (``QUALITY_REVIEW_BELOW``).
"""

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from bot.analysis.model import QualityScore
from bot.audit.assist import AssistAuditEntry
from bot.customer_texts import Translate
from bot.engine.action_audit import proposal_fields
from bot.handoff.service import HandoffService
from bot.queue.admission import Intake
from bot.queue.delivery import Reply
from bot.queue.delivery_steps import SendCard, StaffRelay
from bot.queue.job_results import (
    DropReason,
    JobContext,
    JobDone,
    JobDropped,
    JobOutcome,
)
from bot.queue.jobs import Notice
from bot.queue.staff_actions import StaffAction
from bot.sessions.models import ConversationSession
from bot.sessions.pending import ActionCard
from bot.sessions.suggestion import StaffSuggestion, new_suggestion_id
from bot.staff_assist.drafting import DraftError, SuggestionDrafter
from bot.staff_assist.tool_path import AssistTools, Proposed
from bot.staff_texts import (
    QUALITY_CRITERIA_LABELS,
    QUALITY_REVIEW_FAILED,
    QUALITY_REVIEW_HEADER,
    QUALITY_REVIEW_HINT,
    QUALITY_REVIEW_TURNS,
    SUGGESTION_CARD_REFUSED,
    SUGGESTION_CARD_SENT,
    SUGGESTION_FAILED,
    SUGGESTION_SENT,
)
from turn import ToolCall, TurnContext

if TYPE_CHECKING:
    # aiogram's CallbackData: its import costs a process start seconds (the console never
    # needs it); the press is only an annotation here.
    from bot.staff_assist.buttons import SuggestionPress

logger = logging.getLogger(__name__)

SUGGESTION_UPDATE_ID_OFFSET = 10**15
"""A drafting job's update id is minus this plus 48 bits of its relay's turn id: never a
Telegram id, nor any other check's (handoff idle, CSAT, offer, review: all below 10**14)."""
QUALITY_REVIEW_LABEL = "quality_review"
"""The topic header's cause of a review (not a handoff: no reason is recorded)."""


def suggestion_update_id(turn_id: str) -> int:
    """The update id of the drafting job after the relay of turn ``turn_id``."""
    digest = hashlib.sha256(turn_id.encode()).digest()
    return -(SUGGESTION_UPDATE_ID_OFFSET + int.from_bytes(digest[:6], "big"))


@dataclass(frozen=True, kw_only=True)
class StaffAssist:
    """Suggested replies for staff in the customer's topic (see the module).

    ``staff_texts`` shows staff texts (the default language's catalog);
    ``review_below``: a conversation the bot handled alone scored below it is posted
    for review (``QUALITY_REVIEW_BELOW``; ``None``: never).
    """

    handoff: HandoffService
    intake: Intake
    drafter: SuggestionDrafter
    tools: AssistTools
    staff_texts: Translate = lambda message: message
    review_below: int | None = None
    # A conversation's language until its session records one (DEFAULT_LANGUAGE).
    default_language: str = "ru"

    async def request(self, conversation_key: str, turn_id: str) -> None:
        """Queue the drafting of a suggestion after relay ``turn_id``; never raises."""
        try:
            await self.intake.queue_check(
                conversation_key,
                update_id=suggestion_update_id(turn_id),
                notice=Notice.SUGGESTION,
            )
        except (RedisError, OSError) as error:
            # The relay is out already; only the suggestion is lost.
            logger.warning("Suggestion not queued: Redis unavailable (%s)", type(error).__name__)

    async def draft(self, conversation_key: str, job: JobContext) -> JobOutcome:
        """Draft the suggestion for the newest customer message, unless it is answered."""
        session = job.session
        if session is None or self.handoff.state(job) != "human" or not session.messages:
            return JobDropped(reason=DropReason.NOTHING_DUE)
        newest = session.messages[-1]
        if newest.role != "user" or newest.turn_id is None:
            # Staff answered meanwhile, or nothing to answer.
            return JobDropped(reason=DropReason.NOTHING_DUE)
        if session.suggestion is not None and session.suggestion.for_turn == newest.turn_id:
            return JobDropped(reason=DropReason.NOTHING_DUE)
        chat = str(job.job.chat_id)
        language = session.language or self.default_language
        try:
            drafted = await self.drafter.draft(session, self._context(session, job))
        except DraftError as error:
            logger.info("Suggestion of turn %s not drafted (%s)", job.job.turn_id, error.kind)
            failed = AssistAuditEntry(
                chat_id=chat, turn_id=job.job.turn_id, event="suggestion_failed", error=error.kind
            )
            return _relay(
                StaffAction(
                    kind="post",
                    text=self.staff_texts(SUGGESTION_FAILED).format(kind=error.kind),
                ),
                audit=(failed.to_fields(),),
            )
        suggestion = StaffSuggestion(
            suggestion_id=new_suggestion_id(),
            for_turn=newest.turn_id,
            text=drafted.text,
            language=language,
            action=drafted.action,
        )
        suggested = AssistAuditEntry(
            chat_id=chat,
            turn_id=job.job.turn_id,
            event="suggested",
            suggestion_id=suggestion.suggestion_id,
            tool_name=drafted.action.tool_name if drafted.action is not None else "",
        )
        entry = _relay(
            StaffAction(
                kind="suggestion",
                text=suggestion.text,
                suggestion_id=suggestion.suggestion_id,
                language=language,
                action=drafted.action.description if drafted.action is not None else "",
            ),
            audit=(suggested.to_fields(),),
        )
        return await self.handoff.chat.commit_without_turn(
            conversation_key, job, lambda stored: stored.with_suggestion(suggestion), entry
        )

    async def press(
        self, conversation_key: str, job: JobContext, press: "SuggestionPress", message_id: int
    ) -> JobDone | Reply | None:
        """Staff pressed a suggestion's button (checked as staff's): send it, or its card.

        ``None`` when the suggestion is no longer open (replaced, sent, answered):
        nothing happens, the press's answer said it was out of date.
        """
        session = job.session
        suggestion = session.suggestion if session is not None else None
        if (
            session is None
            or suggestion is None
            or suggestion.suggestion_id != press.suggestion_id
            or self.handoff.state(job) == "bot"
        ):
            return None
        chat = str(job.job.chat_id)
        if press.pressed == "s":
            sent = AssistAuditEntry(
                chat_id=chat,
                turn_id=job.job.turn_id,
                event="sent",
                suggestion_id=suggestion.suggestion_id,
            )
            return await self.handoff.staff_text(
                conversation_key,
                job,
                suggestion.text,
                audit=(sent.to_fields(),),
                staff=(
                    StaffAction(
                        kind="edit_staff",
                        message_id=message_id,
                        text=f"{suggestion.text}\n\n{self.staff_texts(SUGGESTION_SENT)}",
                    ),
                ),
            )
        if suggestion.action is None or suggestion.card_sent:
            return None
        return await self._send_card(conversation_key, job, session, suggestion)

    async def _send_card(
        self,
        conversation_key: str,
        job: JobContext,
        session: ConversationSession,
        suggestion: StaffSuggestion,
    ) -> JobDone | Reply:
        """Propose the suggestion's action now (checked again) and send the customer its card."""
        action = suggestion.action
        assert action is not None  # noqa: S101 - the caller checked
        context = self._context(session, job)
        call = ToolCall(
            id=f"suggestion-{suggestion.suggestion_id}",
            name=action.tool_name,
            arguments=action.arguments,
        )
        proposed = await self.tools.propose(call, context)
        if not isinstance(proposed, Proposed):
            text = self.staff_texts(SUGGESTION_CARD_REFUSED).format(code=proposed.code)
            return _relay(StaffAction(kind="post", text=text))
        pending = proposed.action
        before = session.pending_action
        chat = str(job.job.chat_id)
        audit = (
            *proposal_fields(
                before, pending, chat_id=chat, turn_id=job.job.turn_id, now=self.handoff.idle.now()
            ),
            AssistAuditEntry(
                chat_id=chat,
                turn_id=job.job.turn_id,
                event="card_sent",
                suggestion_id=suggestion.suggestion_id,
                tool_name=pending.tool_name,
            ).to_fields(),
        )
        entry = Reply.of(
            SendCard(
                card=ActionCard(
                    action_id=pending.action_id,
                    text=pending.description,
                    language=context.language,
                ),
                superseded=before.action_id if before is not None else None,
            ),
            StaffRelay(
                actions=(StaffAction(kind="post", text=self.staff_texts(SUGGESTION_CARD_SENT)),)
            ),
            audit=audit,
        )
        sent = suggestion.model_copy(update={"card_sent": True})
        return await self.handoff.chat.commit_without_turn(
            conversation_key,
            job,
            lambda stored: stored.with_pending_action(pending).with_suggestion(sent),
            entry,
        )

    async def review(self, job: JobContext, quality: QualityScore | None) -> JobOutcome:
        """Post a low score in the customer's topic (made if needed); the customer is not told."""
        threshold = self.review_below
        if threshold is None or quality is None or quality.score >= threshold:
            return JobDropped(reason=DropReason.NOTHING_DUE)
        score, failed = quality.score, tuple(quality.failed)
        session = job.session
        codes = _turn_codes(session)
        lines = [self.staff_texts(QUALITY_REVIEW_HEADER).format(score=score, threshold=threshold)]
        if failed:
            criteria = ", ".join(
                self.staff_texts(QUALITY_CRITERIA_LABELS.get(name, name)) for name in failed
            )
            lines.append(self.staff_texts(QUALITY_REVIEW_FAILED).format(criteria=criteria))
        if codes:
            lines.append(self.staff_texts(QUALITY_REVIEW_TURNS).format(turns=", ".join(codes)))
        lines.append(self.staff_texts(QUALITY_REVIEW_HINT))
        return _relay(
            StaffAction(kind="open", text=QUALITY_REVIEW_LABEL),
            StaffAction(kind="post", text="\n".join(lines)),
            # Not a handoff: no idle checks for it.
            StaffAction(kind="ended"),
        )

    def _context(self, session: ConversationSession, job: JobContext) -> TurnContext:
        """The customer's identity, as their own turn has it (the tools bind to it)."""
        chat_id = job.job.chat_id
        return TurnContext(
            conversation_key=session.conversation_key,
            chat_id=chat_id,
            # A private chat's id is its customer's user id; in a group nobody is bound.
            user_id=chat_id if chat_id > 0 else None,
            turn_id=job.job.turn_id,
            shop_customer_id=session.shop_customer_id,
            photos=tuple(photo for message in session.messages for photo in message.photos),
            language=session.language or self.default_language,
        )


def _relay(*actions: StaffAction, audit: tuple[dict[str, str], ...] = ()) -> Reply:
    """A reply to staff only: ``actions`` in the topic, nothing to the customer."""
    return Reply.of(StaffRelay(actions=actions), audit=audit)


def _turn_codes(session: ConversationSession | None, kept: int = 5) -> list[str]:
    codes: list[str] = []
    for message in reversed(session.messages if session is not None else ()):
        if message.role == "assistant" and message.turn_id and message.turn_id not in codes:
            codes.append(message.turn_id)
        if len(codes) == kept:
            break
    return list(reversed(codes))
