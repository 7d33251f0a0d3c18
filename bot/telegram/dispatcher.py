"""Building the aiogram Dispatcher: routers per feature, run by workers over queued updates.

Ordering, de-duplication and flood control happen before an update reaches
the dispatcher: at intake and in the chat's queue (:mod:`bot.queue`). The
dispatcher runs one queued update at a time per chat, inside a worker that
holds the chat's lease; handlers return what to say (:mod:`bot.queue.job_results`).
Services reach handlers as workflow data, never through globals: the core's
(``chat_service``, ``blocked_chats``, ``operator_unavailable``, ``languages``,
``media``), ``turns`` (what a customer's turn runs with: the chat service,
media, drafts and the features a turn asks, :class:`~bot.telegram.handlers.chat.Turns`),
one name per feature that is on (``handoff``,
``actions``, ``csat``, ``analysis``, ``assist``, ``accounts``, ...: the
feature object, :mod:`bot.telegram.feature_routers`), and the worker's ``job``;
``language`` and ``texts`` (the conversation's language and its catalog) per
event, by the language middleware.

Outer update middlewares: in-flight counting, then the log context (update
id, chat pseudonym) for every line the update's handling logs.
"""

from dataclasses import dataclass

from aiogram import Dispatcher, Router

from bot.accounts.feature import AccountsFeature
from bot.analysis.feature import AnalysisFeature
from bot.app import Application
from bot.engine.chat_service import ChatService
from bot.handoff.feature import HandoffFeature
from bot.ops.log_context import ChatNamer, chat_namer
from bot.settings import Settings
from bot.telegram.albums import Albums
from bot.telegram.drafts import drafts_of
from bot.telegram.feature_routers import FeatureRouters, TelegramTwin
from bot.telegram.filters import AddressedToBot
from bot.telegram.handlers import actions as action_handlers
from bot.telegram.handlers import assist as assist_handlers
from bot.telegram.handlers import chat, commands, last_resort, link, membership, other, photo, voice
from bot.telegram.handlers import escalation as escalation_handlers
from bot.telegram.handlers import feedback as feedback_handlers
from bot.telegram.handlers import handoff as handoff_handlers
from bot.telegram.handlers.chat import Turns
from bot.telegram.media import Media
from bot.telegram.middlewares.inflight import InFlightMiddleware
from bot.telegram.middlewares.language import ConversationLanguageMiddleware
from bot.telegram.middlewares.observability import UpdateLogContextMiddleware
from bot.telegram.photos import Photos, vision_on
from bot.telegram.voice import VoiceMessages

TWINS: tuple[TelegramTwin, ...] = (
    TelegramTwin(routers=handoff_handlers.routers, jobs=handoff_handlers.jobs),
    # accounts: after the handoff, whose human state takes every message first.
    TelegramTwin(routers=link.routers),
    # csat
    TelegramTwin(routers=feedback_handlers.routers, jobs=feedback_handlers.jobs),
    # analysis: the offer of a person, the idle analysis's schedule
    TelegramTwin(routers=escalation_handlers.routers, jobs=escalation_handlers.jobs),
    TelegramTwin(routers=action_handlers.routers, jobs=action_handlers.jobs),
    TelegramTwin(routers=assist_handlers.routers, jobs=assist_handlers.jobs),
)
"""The features' Telegram twins (:mod:`bot.telegram.feature_routers`), in the order their
customer routers go (and their hooks run: the satisfaction question's before the analysis's).
The worker's parts of them are gathered by :mod:`bot.telegram.assembly`."""


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
    media = Media(
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
    )
    features = app.features
    dispatcher = Dispatcher(
        # No FSM: its storage and event isolation are unused.
        disable_fsm=True,
        chat_service=chat_service,
        blocked_chats=app.blocked,
        operator_unavailable=app.operator_unavailable,
        languages=app.languages,
        media=media,
        # What a customer's turn (a text, a voice message, a photo) runs with, gathered once.
        turns=Turns(
            chat=chat_service,
            media=media,
            drafts=drafts_of(
                settings,
                metrics,
                text_filter=(lambda text: citations(text).text) if citations is not None else None,
            ),
            handoff=features.get(HandoffFeature),
            accounts=features.get(AccountsFeature),
            analysis=features.get(AnalysisFeature),
        ),
    )
    # One name per feature that is on: its handlers declare it (``csat: CsatFeature``).
    dispatcher.workflow_data.update(app.features.by_name())
    in_flight = InFlightMiddleware()
    dispatcher.update.outer_middleware(in_flight)
    dispatcher.update.outer_middleware(UpdateLogContextMiddleware(_chat_namer(settings)))
    # Every event's language (``language``, ``texts``), from the job's session: no round trip.
    ConversationLanguageMiddleware(app.languages).setup(dispatcher)
    metrics.observe_in_flight(lambda: in_flight.in_flight)

    twins: list[FeatureRouters] = [twin.routers(app.features) for twin in TWINS]
    messages_router = Router(name="messages")
    messages_router.message.filter(AddressedToBot(allow_groups=settings.telegram.allow_groups))
    # Order matters: the features' first (the handoff's /operator and human state, account
    # linking's /link and contact), commands, channel posts forwarded, text turns, then the
    # catch-all.
    messages_router.include_routers(
        *(router for routers in twins for router in routers.customer),
        commands.build_router(),
        other.build_forwarded_router(),
        chat.build_router(),
        voice.build_router(),
        photo.build_router(),
        other.build_router(),
    )
    dispatcher.include_routers(
        last_resort.build_router(),
        membership.build_router(),
        # Each button router takes its own kind of press only (its CallbackData filter);
        # the staff chat's messages never reach the customer routers below.
        *(router for routers in twins for router in routers.routers),
        messages_router,
    )
    return TelegramFrontEnd(dispatcher=dispatcher, in_flight=in_flight)


def _chat_namer(settings: Settings) -> ChatNamer:
    key = settings.audit.hmac_key
    return chat_namer(key.get_secret_value().encode() if key is not None else None)
