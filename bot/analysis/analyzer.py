"""SupportRequestAnalyzer: a conversation in, its :class:`RequestAnalysis` out (the seed's name).

The model answers through Structured Outputs (:class:`~bot.llm.types.StructuredOutputClient`);
the transcript is data in a user message, the instruction is its own versioned
prompt (``request_analysis``). Nothing here runs on a customer's turn: callers
are the console's ``/analyze`` and the idle analysis, and a failure only ever
costs the analysis.
"""

import functools
from dataclasses import dataclass

from pydantic import Field, create_model

from bot.analysis.model import QualityScore, RequestAnalysis
from bot.llm.errors import LLMBadResponseError, LLMClientError
from bot.llm.types import Message, StructuredOutputClient
from bot.sessions.models import ConversationSession
from bot.settings import DEFAULT_CATEGORIES
from prompts.template import PromptTemplate
from turn import Usage

SPEAKERS = {"user": "Клиент", "assistant": "Бот", "staff": "Сотрудник"}
"""How each role is named in the transcript the model reads."""

SUMMARY_MAX_CHARS = 600
NEXT_STEP_MAX_CHARS = 400


class AnalysisError(RuntimeError):
    """No analysis: ``kind`` says why (``refused``, ``invalid``, ``unavailable``, ``timeout``)."""

    kind = "failed"


class AnalysisRefusedError(AnalysisError):
    """The model refused to analyse the conversation."""

    kind = "refused"


class AnalysisInvalidError(AnalysisError):
    """The model's answer did not fit the analysis (bad JSON, unknown category)."""

    kind = "invalid"


class AnalysisUnavailableError(AnalysisError):
    """The model could not be asked (unreachable, rate limited, timed out)."""

    kind = "unavailable"


class AnalysisTimeoutError(AnalysisError):
    """The analysis took longer than ``ANALYSIS_TIMEOUT_SECONDS``."""

    kind = "timeout"


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalysisOutcome:
    """One analysis and what it was made of: the conversation's turns, whether a person took
    part, and what the model call cost."""

    analysis: RequestAnalysis
    turns: int
    person: bool
    model: str
    usage: Usage
    # The conversation's turn codes, newest last (what ``support-audit quality`` lists).
    turn_codes: tuple[str, ...] = ()

    @property
    def quality(self) -> QualityScore | None:
        """The score of a conversation the bot handled alone; ``None`` with a person."""
        return None if self.person else self.analysis.quality


@functools.cache
def shaped_for(categories: tuple[str, ...]) -> type[RequestAnalysis]:
    """:class:`RequestAnalysis` whose schema lists ``categories`` (the model sees the enum)."""
    return create_model(
        "RequestAnalysis",
        __base__=RequestAnalysis,
        category=(str, Field(json_schema_extra={"enum": list(categories)})),
    )


TURN_CODES_KEPT = 5
"""How many of a conversation's newest turn codes its quality entry names."""


def turn_codes(session: ConversationSession) -> tuple[str, ...]:
    """The newest distinct turn codes of the bot's answers in ``session``, oldest first."""
    codes: list[str] = []
    for message in reversed(session.messages):
        code = message.turn_id
        if message.role == "assistant" and code and code not in codes:
            codes.append(code)
        if len(codes) == TURN_CODES_KEPT:
            break
    return tuple(reversed(codes))


def transcript(session: ConversationSession, *, max_chars: int) -> str:
    """The conversation as the model reads it: the summary of older turns, then each message.

    The oldest lines are dropped first when it is longer than ``max_chars``.
    """
    lines = [
        f"{SPEAKERS.get(message.role, message.role)}: {' '.join(message.content.split())}"
        for message in session.messages
    ]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line) + 1
        if size > max_chars and kept:
            break
        kept.append(line[:max_chars])
    head = [f"Резюме начала диалога: {session.summary}"] if session.summary else []
    return "\n".join([*head, *reversed(kept)])


@dataclass(frozen=True, slots=True, kw_only=True)
class SupportRequestAnalyzer:
    """Analyses a stored conversation with the model's Structured Outputs.

    ``categories`` are the shop's (``ANALYSIS_CATEGORIES``); an answer naming
    another is invalid. ``prompt`` is the versioned ``request_analysis`` prompt.
    """

    client: StructuredOutputClient
    prompt: PromptTemplate
    categories: tuple[str, ...] = DEFAULT_CATEGORIES
    max_transcript_chars: int = 12_000

    def messages(self, session: ConversationSession) -> list[Message]:
        """What the model is sent: the instruction, then the transcript as data."""
        instruction = self.prompt.render(categories=", ".join(self.categories))
        return [
            {"role": "system", "content": instruction},
            {
                "role": "user",
                "content": transcript(session, max_chars=self.max_transcript_chars),
            },
        ]

    async def analyze(self, session: ConversationSession) -> AnalysisOutcome:
        """The conversation's analysis; raises an :class:`AnalysisError` kind when there is none."""
        try:
            result = await self.client.generate_structured(
                self.messages(session), shaped_for(self.categories)
            )
        except LLMBadResponseError as error:
            raise AnalysisInvalidError(str(error)) from error
        except LLMClientError as error:
            raise AnalysisUnavailableError(str(error)) from error
        if result.value is None:
            raise AnalysisRefusedError("the model refused to analyse the conversation")
        value = result.value
        if value.category not in self.categories:
            raise AnalysisInvalidError("the model named a category the shop does not have")
        if not value.summary.strip():
            raise AnalysisInvalidError("the model wrote no summary")
        trimmed = RequestAnalysis(
            category=value.category,
            sentiment=value.sentiment,
            urgency=value.urgency,
            language=value.language,
            resolved=value.resolved,
            summary=value.summary.strip()[:SUMMARY_MAX_CHARS],
            next_step=(value.next_step or "").strip()[:NEXT_STEP_MAX_CHARS] or None,
            quality=value.quality,
        )
        person = (
            any(message.role == "staff" for message in session.messages) or session.handoff != "bot"
        )
        return AnalysisOutcome(
            analysis=trimmed,
            turns=session.turn_count,
            person=person,
            model=result.model,
            usage=result.usage,
            turn_codes=turn_codes(session),
        )
