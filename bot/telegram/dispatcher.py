"""Building the aiogram Dispatcher: routers per feature, run by workers over queued updates.

Ordering, de-duplication and flood control happen before an update reaches
the dispatcher: at intake and in the chat's queue (:mod:`bot.queue`). The
dispatcher runs one queued update at a time per chat, inside a worker that
holds the chat's lease; handlers return what to say (:mod:`bot.queue.job_results`).
Services reach handlers as workflow data (``chat_service``, ``settings``,
``handoff`` (``None`` when off), ``feedback`` (the CSAT schedule, ``None``
when off), ``early_analysis`` (the analysis schedule an upset customer's turn
asks for an early analysis, ``None`` without escalation), ``account_linking``
(``None`` without ``ACCOUNT_LINK_TOOL``), ``voice`` (voice messages to words),
``photos`` (images for the model), ``albums``, ``languages`` (the catalogs), and
the worker's ``job``), never through globals; ``language`` and ``texts`` (the
conversation's language and its catalog) per event, by the language middleware.

Outer update middlewares: in-flight counting, then the log context (update
id, chat pseudonym) for every line the update's handling logs.
"""

from dataclasses import dataclass

from aiogram import Dispatcher, Router

from bot.app import Application
from bot.engine.chat_service import ChatService
from bot.ops.log_context import ChatNamer, chat_namer
from bot.settings import Settings
from bot.telegram.albums import Albums
from bot.telegram.drafts import drafts_of
from bot.telegram.filters import AddressedToBot
from bot.telegram.handlers import actions as action_handlers
from bot.telegram.handlers import assist as assist_handlers
from bot.telegram.handlers import chat, commands, last_resort, link, membership, other, photo, voice
from bot.telegram.handlers import escalation as escalation_handlers
from bot.telegram.handlers import feedback as feedback_handlers
from bot.telegram.handlers import handoff as handoff_handlers
from bot.telegram.middlewares.inflight import InFlightMiddleware
from bot.telegram.middlewares.language import ConversationLanguageMiddleware
from bot.telegram.middlewares.observability import UpdateLogContextMiddleware
from bot.telegram.photos import Photos, vision_on
from bot.telegram.voice import VoiceMessages


@dataclass(frozen=True)
class TelegramFrontEnd:
    """The dispatcher and the in-flight counter the health endpoint reports."""

    dispatcher: Dispatcher
    in_flight: InFlightMiddleware


def build_dispatcher(app: Application, *, chat_service: ChatService) -> TelegramFrontEnd:
    """A dispatcher of ``app``'s services, with ``chat_service``; nothing global, nothing started.

    It reports the updates in flight in ``app.metrics``; ``app.blocked`` reaches
    the ``my_chat_member`` handler.
    """
    settings, metrics = app.settings, app.metrics
    citations = app.chat.citations
    dispatcher = Dispatcher(
        # No FSM: its storage and event isolation are unused.
        disable_fsm=True,
        chat_service=chat_service,
        blocked_chats=app.blocked,
        settings=settings,
        handoff=app.handoff,
        operator_unavailable=app.operator_unavailable,
        actions=app.actions,
        feedback=app.feedback,
        # Where the satisfaction answer finds the conversation's category (ANALYSIS=on).
        analyses=app.analysis.schedule if app.analysis is not None else None,
        early_analysis=app.analysis.early if app.analysis is not None else None,
        account_linking=app.account_linking,
        drafts=drafts_of(
            settings,
            metrics,
            text_filter=(lambda text: citations(text).text) if citations is not None else None,
        ),
        voice=VoiceMessages(
            transcriber=app.transcriber,
            metrics=metrics,
            max_seconds=settings.media.voice_max_seconds,
            max_chars=settings.session.message_max_chars,
        ),
        photos=Photos(
            vision=vision_on(settings),
            max_bytes=settings.media.image_max_bytes,
            max_turn_bytes=settings.media.image_turn_max_bytes,
            max_caption_chars=settings.session.message_max_chars,
            metrics=metrics,
        ),
        albums=Albums(redis=app.redis, keys=app.keys),
        # An album's photo queued after its album's turn: kept in the history, no answer.
        photo_keeper=app.chat,
        languages=app.languages,
        # /language keeps the customer's choice in the session, committed with its reply.
        session_keeper=app.chat,
        assist=app.assist,
    )
    in_flight = InFlightMiddleware()
    dispatcher.update.outer_middleware(in_flight)
    dispatcher.update.outer_middleware(UpdateLogContextMiddleware(_chat_namer(settings)))
    # Every event's language (``language``, ``texts``), from the job's session: no round trip.
    ConversationLanguageMiddleware(app.languages).setup(dispatcher)
    metrics.observe_in_flight(lambda: in_flight.in_flight)

    messages_router = Router(name="messages")
    messages_router.message.filter(AddressedToBot(allow_groups=settings.telegram.allow_groups))
    # Order matters: commands, channel posts forwarded, text turns, then the catch-all.
    # With account linking on, /link before the commands' catch-all and a shared contact
    # before "not text"; off, both are handled as before it existed.
    linking = [link.build_router()] if app.account_linking is not None else []
    messages_router.include_routers(
        handoff_handlers.build_customer_router(),
        *linking,
        commands.build_router(),
        other.build_forwarded_router(),
        chat.build_router(),
        voice.build_router(),
        photo.build_router(),
        other.build_router(),
    )
    routers = [
        last_resort.build_router(),
        membership.build_router(),
        # Each button router takes its own kind of press only (its CallbackData filter).
        feedback_handlers.build_router(),
        escalation_handlers.build_router(),
        action_handlers.build_router(),
    ]
    if app.handoff is not None:
        # Before the customer routers: a staff chat message never reaches them.
        routers.append(handoff_handlers.build_staff_router(app.handoff.staff_chat_id))
    if app.assist is not None:
        # Staff's presses on suggested replies (queued in the customer's chat).
        routers.append(assist_handlers.build_router())
    dispatcher.include_routers(*routers, messages_router)
    return TelegramFrontEnd(dispatcher=dispatcher, in_flight=in_flight)


def _chat_namer(settings: Settings) -> ChatNamer:
    key = settings.audit.hmac_key
    return chat_namer(key.get_secret_value().encode() if key is not None else None)
