"""The satisfaction question as one feature: its schedule and its sweeper (``CSAT=on``)."""

from dataclasses import dataclass
from typing import ClassVar

from bot.core import CoreParts
from bot.csat.schedule import CsatPolicy, CsatSchedule
from bot.csat.sweeper import CsatSweeper
from bot.ops.features import Feature, Features
from bot.ops.periodic import Periodic
from bot.queue.admission import Intake


@dataclass(frozen=True, kw_only=True)
class CsatFeature(Feature):
    """When the question is due (``schedule``) and what queues it (``intake``, the sweeper)."""

    name: ClassVar[str] = "csat"

    schedule: CsatSchedule
    intake: Intake

    def sweepers(self, period_seconds: float | None = None) -> tuple[Periodic, ...]:
        """Queues the question of conversations that are due."""
        return (
            CsatSweeper(schedule=self.schedule, intake=self.intake, period_seconds=period_seconds),
        )


def build_csat(core: CoreParts, built: Features) -> CsatFeature | None:
    """The satisfaction question of ``core``'s settings; ``None`` with ``CSAT=off``."""
    csat = core.settings.csat
    if csat.enabled != "on":
        return None
    schedule = CsatSchedule(
        core.redis,
        keys=core.keys,
        policy=CsatPolicy(
            after_idle_seconds=csat.after_idle_minutes * 60,
            min_interval_seconds=csat.min_interval_hours * 3600,
        ),
    )
    return CsatFeature(schedule=schedule, intake=core.intake)
