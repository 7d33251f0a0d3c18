"""Building the aiogram Dispatcher: routers per feature, run by workers over queued updates.

Ordering, de-duplication and flood control happen before an update reaches
the dispatcher: at intake and in the chat's queue (:mod:`bot.queue`). The
dispatcher runs one queued update at a time per chat, inside a worker that
holds the chat's lease; handlers return what to say (:mod:`bot.queue.job_results`).
Services reach handlers as workflow data (``chat_service``, ``settings``,
``handoff`` (``None`` when off), ``feedback`` (the CSAT schedule, ``None``
when off), and the worker's ``job``), never through globals.

Outer update middlewares: in-flight counting, then the log context (update
id, chat pseudonym) for every line the update's handling logs.
"""

from dataclasses import dataclass

from aiogram import Dispatcher, Router

from bot.actions.confirmation import ActionConfirmations
from bot.csat.schedule import CsatSchedule
from bot.handoff.service import HandoffService
from bot.ops.log_context import ChatNamer, chat_namer
from bot.ops.metrics import BotMetrics
from bot.settings import Settings
from bot.telegram.blocked_chats import BlockedChats
from bot.telegram.drafts import drafts_of
from bot.telegram.filters import AddressedToBot
from bot.telegram.handlers import actions as action_handlers
from bot.telegram.handlers import chat, commands, errors, membership, other
from bot.telegram.handlers import feedback as feedback_handlers
from bot.telegram.handlers import handoff as handoff_handlers
from bot.telegram.middlewares.inflight import InFlightMiddleware
from bot.telegram.middlewares.observability import UpdateLogContextMiddleware
from bot.telegram.ports import ChatPort


@dataclass(frozen=True)
class TelegramFrontEnd:
    """The dispatcher and the in-flight counter the health endpoint reports."""

    dispatcher: Dispatcher
    in_flight: InFlightMiddleware


def build_dispatcher(
    settings: Settings,
    *,
    chat_service: ChatPort,
    blocked_chats: BlockedChats,
    metrics: BotMetrics | None = None,
    handoff: HandoffService | None = None,
    actions: ActionConfirmations | None = None,
    feedback: CsatSchedule | None = None,
) -> TelegramFrontEnd:
    """A dispatcher wired to ``chat_service``; nothing global, nothing started.

    With ``metrics``, it reports the updates in flight there; ``blocked_chats``
    reaches the ``my_chat_member`` handler.
    """
    dispatcher = Dispatcher(
        # No FSM: its storage and event isolation are unused.
        disable_fsm=True,
        chat_service=chat_service,
        blocked_chats=blocked_chats,
        settings=settings,
        handoff=handoff,
        actions=actions,
        feedback=feedback,
        drafts=drafts_of(settings, metrics),
    )
    in_flight = InFlightMiddleware()
    dispatcher.update.outer_middleware(in_flight)
    dispatcher.update.outer_middleware(UpdateLogContextMiddleware(_chat_namer(settings)))
    if metrics is not None:
        metrics.observe_in_flight(lambda: in_flight.in_flight)

    messages_router = Router(name="messages")
    messages_router.message.filter(AddressedToBot(allow_groups=settings.telegram.allow_groups))
    # Order matters: commands, then text turns, then the catch-all for other messages.
    messages_router.include_routers(
        handoff_handlers.build_customer_router(),
        commands.build_router(),
        chat.build_router(),
        other.build_router(),
    )
    routers = [
        errors.build_router(),
        membership.build_router(),
        # Before the actions' router, which takes every other button press.
        feedback_handlers.build_router(),
        action_handlers.build_router(),
    ]
    if handoff is not None:
        # Before the customer routers: a staff chat message never reaches them.
        routers.append(handoff_handlers.build_staff_router(handoff.staff_chat_id))
    dispatcher.include_routers(*routers, messages_router)
    return TelegramFrontEnd(dispatcher=dispatcher, in_flight=in_flight)


def _chat_namer(settings: Settings) -> ChatNamer:
    key = settings.audit.hmac_key
    return chat_namer(key.get_secret_value().encode() if key is not None else None)
