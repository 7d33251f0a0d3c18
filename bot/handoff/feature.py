"""Human handoff as one feature: its service and its idle sweeper (``STAFF_CHAT_ID`` set)."""

from dataclasses import dataclass
from typing import ClassVar

from bot.core import CoreParts
from bot.handoff.service import HandoffPolicy, HandoffService
from bot.handoff.sweeper import HandoffSweeper
from bot.handoff.topics import TopicDirectory
from bot.ops.features import Feature, Features
from bot.ops.periodic import Periodic
from bot.queue.admission import Intake
from bot.sessions.handoff_machine import IdleRule
from tools.support_hours import closed_note


@dataclass(frozen=True, kw_only=True)
class HandoffFeature(Feature):
    """The handoff service (topics, relays, the idle rule) and what sweeps idle handoffs."""

    name: ClassVar[str] = "handoff"

    service: HandoffService
    intake: Intake

    def sweepers(self, period_seconds: float | None = None) -> tuple[Periodic, ...]:
        """Ends handoffs nobody wrote in for ``HANDOFF_IDLE_MINUTES``."""
        service = self.service
        return (
            HandoffSweeper(
                topics=service.topics,
                intake=self.intake,
                idle=service.idle,
                period_seconds=period_seconds,
            ),
        )


def build_handoff(core: CoreParts, built: Features) -> HandoffFeature | None:
    """The handoff of ``core``'s settings; ``None`` while ``STAFF_CHAT_ID`` is unset."""
    settings = core.settings
    staff_chat_id = settings.handoff.staff_chat_id
    if staff_chat_id is None:
        return None
    shop, clock, timezone = core.shop, core.clock, settings.tools.support_timezone
    service = HandoffService(
        chat=core.chat,
        topics=TopicDirectory(core.redis, keys=core.keys, staff_chat_id=staff_chat_id),
        settings=HandoffPolicy(
            staff_chat_id=staff_chat_id,
            after_failed_turns=settings.handoff.after_failed_turns,
            idle=IdleRule(idle_seconds=settings.handoff.idle_minutes * 60),
        ),
        closed_note=lambda gettext: closed_note(shop.support_hours, clock(), timezone, gettext),
        localize=core.localize,
        suggest=settings.handoff.suggestions == "on",
    )
    return HandoffFeature(service=service, intake=core.intake)
