"""What an analysis says about a conversation: the contract of the stored analysis and the audit.

The field names (``category``, ``sentiment``, ``urgency``, ``language``,
``resolved``, ``summary``, ``next_step``) are the contract: the stored
analysis, the handoff topic and the ``type=analysis`` audit entries use them.
The audit never holds ``summary`` or ``next_step`` (they are text).
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Sentiment = Literal["negative", "neutral", "positive"]
Urgency = Literal["low", "normal", "high"]
SENTIMENTS: tuple[Sentiment, ...] = ("negative", "neutral", "positive")
URGENCIES: tuple[Urgency, ...] = ("low", "normal", "high")
Criterion = Literal[
    "resolved", "facts_from_tools", "actions_with_press", "customer_language", "tone"
]
"""The quality rubric's criteria (the audit keeps these names, never text)."""
CRITERIA: tuple[Criterion, ...] = (
    "resolved",
    "facts_from_tools",
    "actions_with_press",
    "customer_language",
    "tone",
)
Score = Literal[1, 2, 3, 4, 5]


class QualityScore(BaseModel):
    """How well the bot handled a conversation alone: 1-5, and the criteria it failed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: Score
    failed: list[Criterion]


class RequestAnalysis(BaseModel):
    """One conversation analysed: what the customer asked, how they feel, what comes next.

    Every field is required (the Structured Outputs schema is strict);
    ``next_step`` is ``None`` when no person is needed. ``category`` is checked
    against the shop's categories by :class:`~bot.analysis.analyzer.SupportRequestAnalyzer`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # No length bounds in the schema: strict Structured Outputs refuse some keywords;
    # the analyzer checks the category and trims the texts instead.
    category: str
    sentiment: Sentiment
    urgency: Urgency
    language: str = Field(pattern=r"^[a-z]{2}$")
    resolved: bool
    summary: str
    next_step: str | None
    # The rubric's score of a conversation the bot handled alone (``None``: a person took
    # part, or an analysis made before scores existed). Required in the model's schema.
    quality: QualityScore | None = None

    @property
    def escalates(self) -> bool:
        """An angry customer in a hurry: worth offering a person."""
        return self.sentiment == "negative" and self.urgency == "high"
