"""Building staff assist from the settings (called once, by the composition root)."""

from bot.handoff.service import HandoffService
from bot.language.catalogs import Catalogs, language_name
from bot.llm.types import ToolCallingClient
from bot.queue.admission import Intake
from bot.settings import Settings
from bot.staff_assist.drafting import SuggestionDrafter
from bot.staff_assist.service import StaffAssist
from bot.staff_assist.tool_path import AssistTools
from prompts.registry import STAFF_SUGGESTION_PROMPT_ID, build_default_prompt_registry
from tools.execution import ToolExecutor
from tools.registry import ToolRegistry

SUGGESTION_PROMPT_VERSION = "1.0.0"


def build_staff_assist(
    settings: Settings,
    *,
    handoff: HandoffService,
    intake: Intake,
    llm: ToolCallingClient,
    registry: ToolRegistry,
    executor: ToolExecutor,
    catalogs: Catalogs,
) -> StaffAssist:
    """Staff assist of a process with a staff group (``STAFF_SUGGESTIONS``, reviews).

    Staff texts are shown in ``DEFAULT_LANGUAGE``; the drafting model is the chat model.
    """
    default = catalogs.texts(settings.language.default_language)
    tools = AssistTools(registry=registry, executor=executor)

    return StaffAssist(
        handoff=handoff,
        intake=intake,
        tools=tools,
        drafter=SuggestionDrafter(
            client=llm,
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
