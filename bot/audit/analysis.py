"""The request analysis as the audit stream tells it: ``type=analysis`` entries; never text.

An ``analysed`` entry holds the analysis's closed categories (``category``,
``sentiment``, ``urgency``, ``language``, ``resolved``), the conversation's
turns, whether a person took part and the tokens it cost. An
``analysis_failed`` entry says only why (``error``: refused, invalid,
unavailable). The summary and the next step are text: they stay with the
conversation for staff, never here.
"""

from dataclasses import dataclass, field
from typing import Literal

from bot.audit.schema import (
    CHAT_ID,
    INTEGER,
    TOTAL_TOKENS,
    TURN_ID,
    EntryType,
    StreamRecord,
    stream_field,
)

AnalysisEvent = Literal["analysed", "analysis_failed"]
ANALYSED: AnalysisEvent = "analysed"
ANALYSIS_FAILED: AnalysisEvent = "analysis_failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalysisAuditEntry(StreamRecord):
    """One analysis of a conversation (``analysed``) or its failure (``analysis_failed``)."""

    entry_type = EntryType.ANALYSIS

    chat_id: str = field(metadata=stream_field(CHAT_ID))
    turn_id: str = field(default="", metadata=stream_field(TURN_ID))
    event: str = field(metadata=stream_field("event"))
    category: str = field(default="", metadata=stream_field("category"))
    sentiment: str = field(default="", metadata=stream_field("sentiment"))
    urgency: str = field(default="", metadata=stream_field("urgency"))
    language: str = field(default="", metadata=stream_field("language"))
    # 1 resolved by the conversation, 0 not; None on a failure.
    resolved: int | None = field(default=None, metadata=stream_field("resolved", INTEGER))
    turns: int | None = field(default=None, metadata=stream_field("turns", INTEGER))
    # 1 when a person took part in the conversation.
    person: int | None = field(default=None, metadata=stream_field("person", INTEGER))
    total_tokens: int | None = field(default=None, metadata=stream_field(TOTAL_TOKENS, INTEGER))
    error: str = field(default="", metadata=stream_field("error"))
