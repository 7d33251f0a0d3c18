"""The request analysis as one part of the application: its analyzer, schedule and idle runs."""

from dataclasses import dataclass

from bot.analysis.analyzer import SupportRequestAnalyzer
from bot.analysis.runner import IdleAnalysis
from bot.analysis.schedule import AnalysisSchedule


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationAnalysis:
    """What ``ANALYSIS=on`` adds: the analyzer (``/analyze``), the idle schedule and its runs."""

    analyzer: SupportRequestAnalyzer
    schedule: AnalysisSchedule
    idle: IdleAnalysis
