"""Analysing one idle conversation: claim it, ask the model, keep the result, audit it.

Used by :class:`~bot.analysis.sweeper.AnalysisSweeper` in every process with
workers. Nothing here raises into its caller: a failed or slow analysis costs
only the analysis (one ``analysis_failed`` entry), never an answer.
"""

import asyncio
import logging
import uuid
from dataclasses import dataclass, field

from redis.exceptions import RedisError

from bot.analysis.analyzer import (
    AnalysisError,
    AnalysisOutcome,
    AnalysisTimeoutError,
    SupportRequestAnalyzer,
)
from bot.analysis.escalation import EscalationOffers
from bot.analysis.review import QualityReviews
from bot.analysis.schedule import AnalysisSchedule
from bot.audit.analysis import ANALYSED, ANALYSIS_FAILED, AnalysisAuditEntry
from bot.audit.sink import AuditSink
from bot.sessions.models import ConversationSession
from bot.sessions.store import SessionStore, SessionStoreError
from turn import new_turn_id

logger = logging.getLogger(__name__)


def analysed_entry(chat_id: str, outcome: AnalysisOutcome) -> AnalysisAuditEntry:
    """The audit entry of a successful analysis: closed categories and counts, no text."""
    analysis = outcome.analysis
    return AnalysisAuditEntry(
        chat_id=chat_id,
        turn_id=new_turn_id(),
        event=ANALYSED,
        category=analysis.category,
        sentiment=analysis.sentiment,
        urgency=analysis.urgency,
        language=analysis.language,
        resolved=int(analysis.resolved),
        turns=outcome.turns,
        person=int(outcome.person),
        total_tokens=outcome.usage.total_tokens,
        quality=outcome.quality.score if outcome.quality is not None else None,
        failed_criteria=tuple(outcome.quality.failed) if outcome.quality is not None else (),
        turn_codes=outcome.turn_codes if outcome.quality is not None else (),
    )


def failed_entry(chat_id: str, error: AnalysisError, *, turns: int) -> AnalysisAuditEntry:
    """The audit entry of an analysis that gave nothing: why, in one word."""
    return AnalysisAuditEntry(
        chat_id=chat_id,
        turn_id=new_turn_id(),
        event=ANALYSIS_FAILED,
        turns=turns,
        error=error.kind,
    )


@dataclass(eq=False, kw_only=True)
class IdleAnalysis:
    """Analyses idle conversations once each (``schedule`` says which and guards the once).

    An analysis that escalates may offer a person (``escalation``); ``/analyze``
    (:meth:`analyse`) never does.
    """

    analyzer: SupportRequestAnalyzer
    schedule: AnalysisSchedule
    sessions: SessionStore
    audit: AuditSink
    timeout_seconds: float
    # Offers a person after an analysis that escalates (None: no staff group, or off).
    escalation: EscalationOffers | None = None
    # Shows staff a conversation the bot handled alone that scored low (None: off).
    reviews: QualityReviews | None = None
    # This process's claims: another process's claim of the same idle is refused.
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    async def run(self, conversation_key: str, chat_id: str) -> AnalysisOutcome | None:
        """Analyse the conversation's current idle unless another process did; never raises."""
        try:
            session = await self.sessions.load(conversation_key)
            if session is None or not session.messages:
                return None
            if not await self.schedule.begin(conversation_key, session, self.token):
                return None
        except (SessionStoreError, RedisError, OSError) as error:
            logger.warning("Analysis skipped: Redis unavailable (%s)", type(error).__name__)
            return None
        result = await self.analyse(conversation_key, chat_id, session)
        if not isinstance(result, AnalysisOutcome):
            return None
        if self.escalation is not None:
            await self.escalation.consider(conversation_key, session, result.analysis)
        if self.reviews is not None:
            await self.reviews.consider(conversation_key, result.quality)
        return result

    async def analyse(
        self, conversation_key: str, chat_id: str, session: ConversationSession
    ) -> AnalysisOutcome | AnalysisError:
        """Analyse ``session`` now (no claim: ``/analyze``), keep and audit what came of it."""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                outcome = await self.analyzer.analyze(session)
        except TimeoutError:
            timed_out = AnalysisTimeoutError(f"no analysis within {self.timeout_seconds:.0f} s")
            await self._failed(chat_id, timed_out, session)
            return timed_out
        except AnalysisError as error:
            await self._failed(chat_id, error, session)
            return error
        try:
            await self.schedule.store(conversation_key, session, outcome.analysis)
        except (RedisError, OSError) as error:
            logger.warning("Analysis not kept: Redis unavailable (%s)", type(error).__name__)
        await self.audit.write_fields([analysed_entry(chat_id, outcome).to_fields()])
        return outcome

    async def _failed(
        self, chat_id: str, error: AnalysisError, session: ConversationSession
    ) -> None:
        logger.warning("Analysis of a conversation failed (%s)", error.kind)
        await self.audit.write_fields(
            [failed_entry(chat_id, error, turns=session.turn_count).to_fields()]
        )
