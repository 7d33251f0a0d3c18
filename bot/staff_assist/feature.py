"""Staff assist as one feature: suggested replies and quality reviews (a staff group is set)."""

from dataclasses import dataclass
from typing import ClassVar

from bot.core import CoreParts
from bot.handoff.feature import HandoffFeature
from bot.language.catalogs import language_name
from bot.ops.features import Feature, Features
from bot.staff_assist.drafting import SuggestionDrafter
from bot.staff_assist.service import StaffAssist
from bot.staff_assist.tool_path import AssistTools
from prompts.registry import STAFF_SUGGESTION_PROMPT_ID, build_default_prompt_registry

SUGGESTION_PROMPT_VERSION = "1.0.0"


@dataclass(frozen=True, kw_only=True)
class StaffAssistFeature(Feature):
    """Drafts suggestions after relays, settles staff's presses on them, posts reviews."""

    name: ClassVar[str] = "assist"

    assist: StaffAssist


def build_staff_assist(core: CoreParts, built: Features) -> StaffAssistFeature | None:
    """Staff assist of a process with a staff group (``STAFF_SUGGESTIONS``, reviews).

    ``None`` without the handoff. Staff texts are shown in ``DEFAULT_LANGUAGE``; the
    drafting model is the chat model.
    """
    handoff = built.get(HandoffFeature)
    if handoff is None:
        return None
    settings = core.settings
    default = core.catalogs.texts(settings.language.default_language)
    tools = AssistTools(registry=core.registry, executor=core.executor)
    assist = StaffAssist(
        handoff=handoff.service,
        intake=core.intake,
        tools=tools,
        drafter=SuggestionDrafter(
            client=core.llm,
            tools=tools,
            prompt=build_default_prompt_registry().get(
                STAFF_SUGGESTION_PROMPT_ID, SUGGESTION_PROMPT_VERSION
            ),
            timeout_seconds=settings.handoff.suggestion_timeout_seconds,
            language_name=lambda code: language_name(code, "ru"),
        ),
        staff_texts=default.gettext,
        review_below=settings.handoff.quality_review_below,
        default_language=settings.language.default_language,
    )
    return StaffAssistFeature(assist=assist)
