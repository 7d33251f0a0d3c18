"""Customer satisfaction as the audit stream tells it: ``type=feedback`` entries and their stats.

A question asked is an ``asked`` entry; the customer's press an ``answered``
entry with its ``score`` (1 to 5). Both say who answered the conversation
(``bot``, or ``bot_then_person`` when a person took over before it ended) and
how many turns it had; never text. CSAT is the share of scores 4 and 5; the
answer rate is answers over questions asked.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from bot.audit.schema import CHAT_ID, TURN_ID, TYPE, EntryType
from bot.audit.stream import StreamEntry

AnsweredBy = Literal["bot", "bot_then_person"]
FeedbackEvent = Literal["asked", "answered"]

ANSWERED_BY: tuple[AnsweredBy, ...] = ("bot", "bot_then_person")
SCORES: tuple[int, ...] = (1, 2, 3, 4, 5)
SATISFIED = frozenset({4, 5})
"""Scores that count as satisfied in CSAT."""

EVENT = "event"
SCORE = "score"
BY = "answered_by"
TURNS = "turns"


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedbackAuditEntry:
    """A satisfaction question asked, or its answer (``score``); never text."""

    chat_id: str
    turn_id: str
    event: str
    answered_by: str
    turns: int | None = None
    score: int | None = None

    def to_fields(self) -> dict[str, str]:
        """The stream entry's fields: ids, the event, who answered, counts and the score."""
        return {
            TYPE: EntryType.FEEDBACK.value,
            CHAT_ID: self.chat_id,
            TURN_ID: self.turn_id,
            EVENT: self.event,
            BY: self.answered_by,
            TURNS: "" if self.turns is None else str(self.turns),
            SCORE: "" if self.score is None else str(self.score),
        }

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> "FeedbackAuditEntry":
        """The entry back from its stream fields (missing ones read as empty)."""
        return cls(
            chat_id=fields.get(CHAT_ID, ""),
            turn_id=fields.get(TURN_ID, ""),
            event=fields.get(EVENT, ""),
            answered_by=fields.get(BY, ""),
            turns=_integer(fields.get(TURNS)),
            score=_integer(fields.get(SCORE)),
        )


def feedback_entry(entry: StreamEntry) -> FeedbackAuditEntry | None:
    """The feedback step in a stream entry, ``None`` for other entry types."""
    return entry.read_as(EntryType.FEEDBACK, FeedbackAuditEntry.from_fields)


def rollup_fields(fields: Mapping[str, str]) -> list[tuple[str, str]]:
    """The per-minute rollup counts of one feedback entry (``fb|<by>|asked`` or ``|s<score>``)."""
    by = fields.get(BY, "")
    if fields.get(EVENT) == "asked":
        return [(f"fb|{by}|asked", "1")]
    score = _integer(fields.get(SCORE))
    if fields.get(EVENT) == "answered" and score in SCORES:
        return [(f"fb|{by}|s{score}", "1")]
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


def _integer(text: str | None) -> int | None:
    try:
        return int(text or "")
    except ValueError:
        return None
