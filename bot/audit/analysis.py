"""The request analysis as the audit stream tells it: ``type=analysis`` entries; never text.

An ``analysed`` entry holds the analysis's closed categories (``category``,
``sentiment``, ``urgency``, ``language``, ``resolved``), the conversation's
turns, whether a person took part and the tokens it cost. An
``analysis_failed`` entry says only why (``error``: refused, invalid,
unavailable). An ``escalation_offered`` entry says a person was offered to an
angry, urgent customer (its button delivered). The summary and the next step
are text: they stay with the conversation for staff, never here.
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from bot.audit.feedback import SATISFIED
from bot.audit.feedback import rollup_fields as feedback_rollups
from bot.audit.schema import (
    CHAT_ID,
    INTEGER,
    TOTAL_TOKENS,
    TURN_ID,
    TYPE,
    Codec,
    EntryType,
    StreamRecord,
    stream_field,
)
from bot.audit.stream import StreamEntry

_CODE = re.compile(r"[A-Za-z0-9_]{1,64}")
CODE_LIST: Codec[tuple[str, ...]] = Codec(
    encode=lambda codes: ",".join(code for code in codes if _CODE.fullmatch(code)),
    decode=lambda text: tuple(text.split(",")) if text else (),
)
"""Criteria names or turn codes, comma-separated; anything else is left out (never text)."""

AnalysisEvent = Literal["analysed", "analysis_failed", "escalation_offered"]
ANALYSED: AnalysisEvent = "analysed"
ANALYSIS_FAILED: AnalysisEvent = "analysis_failed"
# A person was offered to the customer (the offer delivered); no other field but ids.
ESCALATION_OFFERED: AnalysisEvent = "escalation_offered"


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalysisAuditEntry(StreamRecord):
    """One analysis of a conversation (``analysed``) or its failure (``analysis_failed``)."""

    entry_type = EntryType.ANALYSIS

    chat_id: str = field(metadata=stream_field(CHAT_ID))
    # The analysis's own id (a turn id's shape): ``support-audit turn`` finds it.
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
    # A conversation the bot handled alone: the rubric's score (1-5), the criteria it
    # failed (names) and its newest turn codes; none of them written otherwise.
    quality: int | None = field(
        default=None,
        metadata=stream_field(
            "quality", INTEGER, written_if=lambda entry: entry.quality is not None
        ),
    )
    failed_criteria: tuple[str, ...] = field(
        default=(),
        metadata=stream_field(
            "failed_criteria", CODE_LIST, written_if=lambda entry: entry.quality is not None
        ),
    )
    turn_codes: tuple[str, ...] = field(
        default=(),
        metadata=stream_field(
            "turn_codes", CODE_LIST, written_if=lambda entry: bool(entry.turn_codes)
        ),
    )


def rollup_fields(fields: Mapping[str, str]) -> list[tuple[str, str]]:
    """The per-minute rollup counts of one analysis entry.

    ``an|<category>|<resolved>|<person>`` for an analysis (1/0 each),
    ``an_sent|<sentiment>`` and ``an_lang|<language>`` beside it;
    ``an_failed|<error>`` for a failure; ``an_q|<score>`` for a scored conversation.
    """
    entry = AnalysisAuditEntry.from_fields(fields)
    if entry.event == ANALYSED and entry.category:
        resolved, person = int(entry.resolved or 0), int(entry.person or 0)
        rolled = [
            (f"an|{entry.category}|{resolved}|{person}", "1"),
            (f"an_sent|{entry.sentiment}", "1"),
            (f"an_lang|{entry.language}", "1"),
        ]
        if entry.quality is not None:
            rolled.append((f"an_q|{entry.quality}", "1"))
        return rolled
    if entry.event == ANALYSIS_FAILED:
        return [(f"an_failed|{entry.error or 'unknown'}", "1")]
    return []


@dataclass(frozen=True, slots=True, kw_only=True)
class CategoryStats:
    """One category's analysed conversations: how many, settled by the bot alone, with a person.

    ``contained`` counts conversations resolved without a person (the automation rate's
    numerator); ``handed_off`` those a person took part in.
    """

    category: str
    conversations: int
    contained: int
    handed_off: int
    # Satisfaction answers of conversations analysed in this category, by score.
    scores: Mapping[int, int] = field(default_factory=dict)

    @property
    def containment(self) -> float | None:
        """The share resolved by the bot alone (``None`` without conversations)."""
        return self.contained / self.conversations if self.conversations else None

    @property
    def csat(self) -> float | None:
        """The share of its satisfaction answers that scored 4 or 5 (``None`` without any)."""
        answered = sum(self.scores.values())
        if not answered:
            return None
        return sum(n for score, n in self.scores.items() if score in SATISFIED) / answered


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalysisStats:
    """Every analysis of a period: per category, by sentiment and language, and the failures."""

    categories: tuple[CategoryStats, ...]
    sentiments: Mapping[str, int]
    languages: Mapping[str, int]
    failed: Mapping[str, int]
    # Conversations the bot handled alone, by quality score (1-5).
    quality: Mapping[int, int] = field(default_factory=dict)
    # Resolved conversations a person took part in.
    resolved_by_staff: int = 0

    @property
    def resolved_by_bot(self) -> int:
        """Resolved conversations the bot handled alone."""
        return sum(category.contained for category in self.categories)

    @property
    def conversations(self) -> int:
        """Analysed conversations (an idle analysed twice counts twice)."""
        return sum(category.conversations for category in self.categories)


def analysis_stats(entries: Iterable[StreamEntry]) -> AnalysisStats:
    """The analysis stats of ``entries`` (read from the stream)."""
    counts: dict[str, int] = {}
    for entry in entries:
        kind = entry.fields.get(TYPE)
        if kind == EntryType.ANALYSIS:
            rolled = rollup_fields(entry.fields)
        elif kind == EntryType.FEEDBACK:
            rolled = feedback_rollups(entry.fields)
        else:
            continue
        for name, value in rolled:
            counts[name] = counts.get(name, 0) + int(value)
    return stats_of_counts(counts)


def stats_of_counts(counts: Mapping[str, int]) -> AnalysisStats:
    """The analysis stats of summed rollup counts (see :func:`rollup_fields`)."""
    per: dict[str, list[int]] = {}
    scores: dict[str, dict[int, int]] = {}
    sentiments: dict[str, int] = {}
    languages: dict[str, int] = {}
    failed: dict[str, int] = {}
    quality: dict[int, int] = {}
    resolved_by_staff = 0
    for name, count in counts.items():
        kind, _, rest = name.partition("|")
        if kind == "an":
            category, resolved, person = [*rest.split("|"), "0", "0"][:3]
            row = per.setdefault(category, [0, 0, 0])
            row[0] += count
            row[1] += count if resolved == "1" and person == "0" else 0
            row[2] += count if person == "1" else 0
            resolved_by_staff += count if resolved == "1" and person == "1" else 0
        elif kind == "an_q" and rest.isdigit():
            quality[int(rest)] = quality.get(int(rest), 0) + count
        elif kind == "an_sent":
            sentiments[rest] = sentiments.get(rest, 0) + count
        elif kind == "an_lang":
            languages[rest] = languages.get(rest, 0) + count
        elif kind == "an_failed":
            failed[rest] = failed.get(rest, 0) + count
        elif kind == "fbc":
            category, _, score = rest.rpartition("|s")
            if score.isdigit() and category:
                of = scores.setdefault(category, {})
                of[int(score)] = of.get(int(score), 0) + count
    categories = tuple(
        CategoryStats(
            category=name,
            conversations=row[0],
            contained=row[1],
            handed_off=row[2],
            scores=scores.get(name, {}),
        )
        for name, row in sorted(per.items(), key=lambda item: (-item[1][0], item[0]))
    )
    return AnalysisStats(
        categories=categories,
        sentiments=sentiments,
        languages=languages,
        failed=failed,
        quality=dict(sorted(quality.items())),
        resolved_by_staff=resolved_by_staff,
    )


def stats_json(stats: AnalysisStats) -> dict[str, object]:
    """``stats --json``'s ``analysis`` object."""
    return {
        "conversations": stats.conversations,
        "categories": {
            category.category: {
                "conversations": category.conversations,
                "contained": category.contained,
                "handed_off": category.handed_off,
                "containment": category.containment,
                "csat": category.csat,
            }
            for category in stats.categories
        },
        "sentiment": dict(stats.sentiments),
        "language": dict(stats.languages),
        "failed": dict(stats.failed),
        "quality": {str(score): count for score, count in stats.quality.items()},
        "resolved": {"by_bot": stats.resolved_by_bot, "by_staff": stats.resolved_by_staff},
    }
