"""Customer satisfaction as the audit stream tells it: ``type=feedback`` entries and their stats.

A question asked is an ``asked`` entry; the customer's press an ``answered``
entry with its ``score`` (1 to 5). Both say who answered the conversation
(``bot``, or ``bot_then_person`` when a person took over before it ended) and
how many turns it had; never text. CSAT is the share of scores 4 and 5; the
answer rate is answers over questions asked.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from bot.audit.schema import (
    CHAT_ID,
    INTEGER,
    TURN_ID,
    TYPE,
    EntryType,
    StreamRecord,
    stream_field,
)
from bot.audit.stream import StreamEntry

AnsweredBy = Literal["bot", "bot_then_person"]
FeedbackEvent = Literal["asked", "answered"]

ANSWERED_BY: tuple[AnsweredBy, ...] = ("bot", "bot_then_person")
SCORES: tuple[int, ...] = (1, 2, 3, 4, 5)
SATISFIED = frozenset({4, 5})
"""Scores that count as satisfied in CSAT."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedbackAuditEntry(StreamRecord):
    """A satisfaction question asked, or its answer (``score``); never text."""

    entry_type = EntryType.FEEDBACK

    chat_id: str = field(metadata=stream_field(CHAT_ID))
    turn_id: str = field(metadata=stream_field(TURN_ID))
    event: str = field(metadata=stream_field("event"))
    answered_by: str = field(metadata=stream_field("answered_by"))
    turns: int | None = field(default=None, metadata=stream_field("turns", INTEGER))
    score: int | None = field(default=None, metadata=stream_field("score", INTEGER))
    # The conversation's analysed category when answered (ANALYSIS=on): CSAT per category.
    category: str = field(
        default="",
        metadata=stream_field("category", written_if=lambda entry: bool(entry.category)),
    )


def rollup_fields(fields: Mapping[str, str]) -> list[tuple[str, str]]:
    """The per-minute rollup counts of one feedback entry (``fb|<by>|asked`` or ``|s<score>``)."""
    step = FeedbackAuditEntry.from_fields(fields)
    if step.event == "asked":
        return [(f"fb|{step.answered_by}|asked", "1")]
    if step.event == "answered" and step.score in SCORES:
        counts = [(f"fb|{step.answered_by}|s{step.score}", "1")]
        if step.category:
            counts.append((f"fbc|{step.category}|s{step.score}", "1"))
        return counts
    return []


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupFeedback:
    """The questions and answers of one kind of conversation (bot-only or handed off)."""

    asked: int
    scores: Mapping[int, int]

    @property
    def answered(self) -> int:
        """How many questions got a score."""
        return sum(self.scores.values())

    @property
    def csat(self) -> float | None:
        """The share of answers that scored 4 or 5 (``None`` without answers)."""
        answered = self.answered
        if not answered:
            return None
        return sum(n for score, n in self.scores.items() if score in SATISFIED) / answered


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedbackStats:
    """CSAT and the score distribution per kind of conversation, and the answer rate."""

    groups: Mapping[str, GroupFeedback]

    @property
    def asked(self) -> int:
        """Questions asked, every kind together."""
        return sum(group.asked for group in self.groups.values())

    @property
    def answered(self) -> int:
        """Answers, every kind together."""
        return sum(group.answered for group in self.groups.values())

    @property
    def answer_rate(self) -> float | None:
        """Answers over questions asked (``None`` when none was asked)."""
        return self.answered / self.asked if self.asked else None

    @property
    def all(self) -> GroupFeedback:
        """Every kind together."""
        scores = {s: sum(g.scores.get(s, 0) for g in self.groups.values()) for s in SCORES}
        return GroupFeedback(asked=self.asked, scores=scores)


def feedback_stats(entries: Iterable[StreamEntry]) -> FeedbackStats:
    """The feedback stats of ``entries`` (read from the stream)."""
    counts: dict[str, int] = {}
    for entry in entries:
        if entry.fields.get(TYPE) != EntryType.FEEDBACK:
            continue
        for name, value in rollup_fields(entry.fields):
            counts[name] = counts.get(name, 0) + int(value)
    return stats_of_counts(counts)


def stats_of_counts(counts: Mapping[str, int]) -> FeedbackStats:
    """The feedback stats of summed rollup counts (``fb|<by>|asked``, ``fb|<by>|s<score>``)."""
    groups: dict[str, GroupFeedback] = {}
    for by in ANSWERED_BY:
        groups[by] = GroupFeedback(
            asked=counts.get(f"fb|{by}|asked", 0),
            scores={score: counts.get(f"fb|{by}|s{score}", 0) for score in SCORES},
        )
    return FeedbackStats(groups=groups)


def stats_json(stats: FeedbackStats) -> dict[str, object]:
    """``stats --json``'s ``feedback`` object."""

    def group(feedback: GroupFeedback) -> dict[str, object]:
        return {
            "asked": feedback.asked,
            "answered": feedback.answered,
            "csat": feedback.csat,
            "scores": {str(score): feedback.scores.get(score, 0) for score in SCORES},
        }

    return {
        "asked": stats.asked,
        "answered": stats.answered,
        "answer_rate": stats.answer_rate,
        "csat": stats.all.csat,
        **{by: group(stats.groups[by]) for by in ANSWERED_BY if by in stats.groups},
    }


_LABELS = {"bot": "bot only", "bot_then_person": "handed off"}


def stats_lines(stats: FeedbackStats) -> list[str]:
    """``stats``' lines about customer satisfaction: the answer rate, then one per kind
    that had questions or answers (none at all when nothing was asked or answered)."""
    if not stats.asked and not stats.answered:
        return []
    rate = "-" if stats.answer_rate is None else f"{stats.answer_rate * 100:.1f}%"
    lines = [
        f"feedback: {stats.asked} asked, {stats.answered} answered ({rate}); "
        f"CSAT {_share(stats.all.csat)}"
    ]
    for by in ANSWERED_BY:
        group = stats.groups.get(by)
        if group is None or not (group.asked or group.answered):
            continue
        scores = " ".join(f"{score}:{group.scores.get(score, 0)}" for score in SCORES)
        lines.append(
            f"feedback {_LABELS[by]}: CSAT {_share(group.csat)} of {group.answered} "
            f"({group.asked} asked); scores {scores}"
        )
    return lines


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"
