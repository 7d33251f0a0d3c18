"""The request analysis as one feature: analyzer, idle schedule, idle runs, sweeper.

Built by :func:`build_analysis` from the core parts with ``ANALYSIS=on``.
"""

from dataclasses import dataclass
from typing import ClassVar

from bot.analysis.analyzer import SupportRequestAnalyzer
from bot.analysis.escalation import EscalationOffers
from bot.analysis.idle_analysis import IdleAnalysis
from bot.analysis.review import QualityReviews
from bot.analysis.schedule import AnalysisSchedule
from bot.analysis.sweeper import AnalysisSweeper
from bot.core import CoreParts
from bot.ops.features import Feature, Features
from bot.ops.periodic import Periodic
from bot.ops.startup import StartupError
from bot.settings import Settings
from prompts.registry import ANALYSIS_PROMPT_ID, UnknownPromptError, build_default_prompt_registry
from prompts.template import PromptTemplate


@dataclass(frozen=True, kw_only=True)
class AnalysisFeature(Feature):
    """What ``ANALYSIS=on`` adds: the analyzer (``/analyze``), the idle schedule and its runs."""

    name: ClassVar[str] = "analysis"

    analyzer: SupportRequestAnalyzer
    schedule: AnalysisSchedule
    idle: IdleAnalysis
    # Whether an upset customer's conversation is analysed early to offer a person
    # (a staff group is configured and ANALYSIS_ESCALATION=on).
    escalation: bool = False
    # Analyses one process runs at once (ANALYSIS_CONCURRENCY).
    concurrency: int = 1

    @property
    def early(self) -> AnalysisSchedule | None:
        """The schedule an upset customer's turn asks for an early analysis; ``None``: off."""
        return self.schedule if self.escalation else None

    def sweepers(self, period_seconds: float | None = None) -> tuple[Periodic, ...]:
        """Analyses conversations that went idle (and early ones)."""
        return (
            AnalysisSweeper(
                schedule=self.schedule,
                analysis=self.idle,
                period_seconds=period_seconds,
                concurrency=self.concurrency,
            ),
        )


def analysis_prompt(settings: Settings) -> PromptTemplate:
    """``PROMPT_ANALYSIS_VERSION``'s prompt; an unknown version stops the start."""
    try:
        return build_default_prompt_registry().get(
            ANALYSIS_PROMPT_ID, settings.prompts.analysis_version
        )
    except UnknownPromptError as error:
        raise StartupError(str(error)) from error


def build_analysis(core: CoreParts, built: Features) -> AnalysisFeature | None:
    """The request analysis of ``core``'s settings (``ANALYSIS_*``); ``None`` with ``ANALYSIS=off``.

    With a staff group the intake queues the escalation offers and the quality reviews;
    without one, or with ``ANALYSIS_ESCALATION=off``, nobody is offered a person.
    """
    settings = core.settings
    if settings.analysis.enabled != "on":
        return None
    intake = core.intake if settings.handoff.staff_chat_id is not None else None
    analyzer = SupportRequestAnalyzer(
        client=core.analyst,
        prompt=analysis_prompt(settings),
        categories=settings.analysis.category_names,
    )
    schedule = AnalysisSchedule(
        core.redis,
        keys=core.keys,
        idle_seconds=settings.csat.after_idle_minutes * 60,
        ttl_seconds=settings.session.ttl_seconds,
    )
    escalation = (
        EscalationOffers(schedule=schedule, intake=intake)
        if intake is not None and settings.analysis.escalation == "on"
        else None
    )
    below = settings.handoff.quality_review_below
    reviews = (
        QualityReviews(intake=intake, below=below)
        if intake is not None and below is not None
        else None
    )
    return AnalysisFeature(
        analyzer=analyzer,
        schedule=schedule,
        idle=IdleAnalysis(
            analyzer=analyzer,
            schedule=schedule,
            sessions=core.sessions,
            audit=core.audit,
            timeout_seconds=settings.analysis.timeout_seconds,
            escalation=escalation,
            reviews=reviews,
        ),
        escalation=escalation is not None,
        concurrency=settings.analysis.concurrency,
    )
