"""Actions the customer confirms as one feature: the presses on their cards (always on)."""

from dataclasses import dataclass
from typing import ClassVar

from bot.actions.presses import CardPresses
from bot.actions.runs import ActionRuns
from bot.core import CoreParts
from bot.ops.features import Feature, Features
from bot.queue.dead_letters import DeadLetters


@dataclass(frozen=True, kw_only=True)
class ActionsFeature(Feature):
    """What settles a press on a confirmation card (a write tool's action, a shop's tool)."""

    name: ClassVar[str] = "actions"

    confirmations: CardPresses


def build_actions(core: CoreParts, built: Features) -> ActionsFeature:
    """The confirmations of ``core``'s registry (``ACTION_CONFIRM_SECONDS``, ...)."""
    settings = core.settings
    return ActionsFeature(
        confirmations=CardPresses(
            registry=core.registry,
            card_window_seconds=settings.tools.action_confirm_seconds,
            tool_wait_seconds=settings.tools.action_tool_wait_seconds,
            runs=ActionRuns(
                core.redis, core.keys, ttl_seconds=settings.session.archive_ttl_seconds
            ),
            dead_letters=DeadLetters(core.redis, keys=core.keys),
            alert_staff=settings.handoff.staff_chat_id is not None,
            # Staff read their texts in the default language.
            staff_texts=core.staff_text,
        )
    )
