"""The request analysis as one part of the application: its analyzer, schedule and idle runs."""

from dataclasses import dataclass

from bot.analysis.analyzer import SupportRequestAnalyzer
from bot.analysis.idle_analysis import IdleAnalysis
from bot.analysis.schedule import AnalysisSchedule


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationAnalysis:
    """What ``ANALYSIS=on`` adds: the analyzer (``/analyze``), the idle schedule and its runs."""

    analyzer: SupportRequestAnalyzer
    schedule: AnalysisSchedule
    idle: IdleAnalysis
    # Whether an upset customer's conversation is analysed early to offer a person
    # (a staff group is configured and ANALYSIS_ESCALATION=on).
    escalation: bool = False

    @property
    def early(self) -> AnalysisSchedule | None:
        """The schedule an upset customer's turn asks for an early analysis; ``None``: off."""
        return self.schedule if self.escalation else None
