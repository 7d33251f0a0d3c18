"""The core parts every feature is built from (:class:`CoreParts`).

The composition root (:mod:`bot.app`) builds them first: the settings, Redis and
its keys, the session store, the turns' audit, the model, the tools and the
chat service, the intake. Each feature's own function (``bot/<feature>/feature.py``)
takes them and returns the feature (:class:`bot.ops.features.Feature`).
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from bot import customer_texts
from bot.audit.sink import AuditSink
from bot.engine.chat_service import ChatService
from bot.language.catalogs import Catalogs
from bot.language.texts import Texts
from bot.llm.types import StructuredOutputClient, ToolCallingClient
from bot.queue.admission import Intake
from bot.sessions.redis_store import RedisSessionStore
from bot.settings import Settings
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys
from tools.execution import ToolExecutor
from tools.knowledge.library import HelpCenter
from tools.registry import ToolRegistry
from tools.shop_data import ShopData
from tools.support_hours import describe_hours, support_hours_at


@dataclass(frozen=True, kw_only=True)
class CoreParts:
    """What the features are built from; built once by the composition root.

    ``audit`` is the turns' audit (each entry also counted in the metrics);
    ``llm`` the metered chat model, ``model`` the client under it (media asks it
    directly: its calls are no turns); ``analyst`` the model the request analysis
    asks (the composition root's choice: the offline analyst of the try-out, or
    ``ANALYSIS_MODEL`` over the chat model's connections); ``clock`` what the
    support-hours code reads as now.
    """

    settings: Settings
    redis: AsyncRedisClient
    keys: RedisKeys
    sessions: RedisSessionStore
    audit: AuditSink
    llm: ToolCallingClient
    model: ToolCallingClient
    analyst: StructuredOutputClient
    registry: ToolRegistry
    executor: ToolExecutor
    chat: ChatService
    intake: Intake
    shop: ShopData
    catalogs: Catalogs
    help_center: HelpCenter
    clock: Callable[[], datetime]

    def localize(self, language: str | None, message: str) -> str:
        """A customer text in ``language`` (``None``: the default language)."""
        default = self.settings.language.default_language
        return self.catalogs.texts(language or default).gettext(message)

    def staff_text(self, message: str) -> str:
        """A text for staff: in the default language."""
        return self.localize(None, message)

    def operator_unavailable(self, texts: Texts | None = None) -> str:
        """What ``/operator`` answers without a staff group: nobody to call, and the hours now.

        In ``texts``' language (``None``: as written, Russian).
        """
        hours = support_hours_at(
            self.shop.support_hours, self.clock(), self.settings.tools.support_timezone
        )
        gettext = customer_texts.gettext_of(texts)
        return customer_texts.operator_off(describe_hours(hours, gettext), gettext)
