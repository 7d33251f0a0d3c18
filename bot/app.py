"""The composition root: builds the core once, then lists the features; closes in reverse order.

The core parts (:class:`bot.core.CoreParts`: Redis, the session store, the audit,
the model, the tools, the chat service, the intake) are built here; each
feature is built by its own function from them (:data:`FEATURES`), and
:class:`Application` keeps the core and the features that are on. Adding a
feature: its folder (``bot/<feature>/feature.py``), one line in :data:`FEATURES`, and
for Telegram its twin (its handlers module's ``routers``, listed in
:data:`bot.telegram.dispatcher.TWINS`; see docs/architecture.md, "A feature").
"""

import logging
import os
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from bot.accounts.feature import build_accounts, check_link_tool, link_tools
from bot.actions.feature import build_actions
from bot.actions.turns import ActionCards
from bot.analysis.feature import analysis_prompt, build_analysis
from bot.audit.pseudonym import ChatPseudonymizer
from bot.audit.redis_sink import RedisStreamAuditSink
from bot.audit.sink import AuditSink
from bot.core import CoreParts
from bot.csat.feature import build_csat
from bot.engine.chat_service import ChatLimits, ChatService
from bot.engine.history import HistoryWindow
from bot.engine.local_turns import LocalTurns
from bot.engine.summary import ConversationSummaryService
from bot.engine.tool_loop import BoundedToolLoop
from bot.handoff.feature import build_handoff
from bot.handoff.turns import TurnHandoff
from bot.knowledge.feature import watch_knowledge
from bot.knowledge.watcher import KnowledgeError, KnowledgeMetrics, open_help_center
from bot.language.catalogs import CatalogError, Catalogs, language_name
from bot.language.choice import ConversationLanguages
from bot.language.detect import LanguagePolicy
from bot.language.texts import Texts
from bot.llm.health import ModelHealth
from bot.llm.transcription import Transcriber
from bot.llm.types import StructuredOutputClient, ToolCallingClient
from bot.mcp.feature import McpFeature, open_mcp
from bot.metrics import BotMetrics, MeteredChatModel, MetricsAuditSink
from bot.ops.features import Feature, Features
from bot.ops.redis_startup import connect_redis
from bot.ops.startup import StartupError
from bot.proxies import ProxyURLError, proxy_for
from bot.queue.admission import FloodLimits, Intake
from bot.queue.chat_queue import ChatQueue
from bot.queue.work_stream import WorkStream, consumer_name
from bot.sessions.handoff_machine import IdleRule, utc_now
from bot.sessions.redis_store import RedisSessionStore
from bot.sessions.store import SessionStore
from bot.settings import Settings
from bot.staff_assist.feature import build_staff_assist
from bot.storage.blocked_chats import BlockedChats
from bot.storage.connection import (
    AsyncRedisClient,
    RetryPolicy,
    async_client,
    describe_target,
)
from bot.storage.health import RedisHealthProbe
from bot.storage.keys import RedisKeys
from bot.tryout.analyst import OfflineAnalyst
from bot.tryout.demo_shop import RedisDemoShop
from bot.tryout.model import OfflineChatModel, OfflineDemoKnowledge
from prompts.registry import (
    SUMMARY_PROMPT_ID,
    SUPPORT_CHAT_PROMPT_ID,
    UnknownPromptError,
    build_default_prompt_registry,
)
from prompts.template import PromptTemplate
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.human_agent import REQUEST_HUMAN_AGENT_TOOL_NAME, build_request_human_agent_tool
from tools.knowledge.citations import CitationCheck
from tools.knowledge.library import HelpCenter
from tools.registry import ToolRegistry
from tools.shop_backend import ShopBackend
from tools.shop_data import ShopData
from tools.write_tools import Localize, as_written

logger = logging.getLogger(__name__)

# Where the SDK sends requests when OPENAI_BASE_URL is not set (for the proxy choice).
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

# Added to the longest possible turn so that a lease never expires under a live turn.
LEASE_MARGIN_SECONDS = 30.0

FeatureBuilder = Callable[[CoreParts, Features], Feature | None]
"""A feature's own function: the feature from the core parts and those built before it
(``None``: off by its settings)."""

FEATURES: tuple[FeatureBuilder, ...] = (
    build_handoff,
    build_actions,
    build_csat,
    build_analysis,
    # After the handoff: suggestions are drafted in its topics.
    build_staff_assist,
    # After the shop's MCP servers (built with the core): a lookup may be one of their tools.
    build_accounts,
    # Last built, first closed: it rebuilds the help center the search tool reads.
    lambda core, _built: watch_knowledge(core.settings, core.help_center),
)
"""The features, in the order they are built (each may use those before it)."""


@dataclass(frozen=True, kw_only=True)
class Application:
    """The core parts, the features that are on, and what the front ends run beside them.

    Built by :func:`build_application`; :meth:`aclose` closes everything it opened in
    reverse order. The core's parts are named here too (``app.redis``, ``app.chat``, ...).
    """

    core: CoreParts
    # The features that are on (app.features.get(CsatFeature): None while off).
    features: Features
    # The audit stream's writer itself (its losses, its last flush at the end).
    audit: RedisStreamAuditSink
    metrics: BotMetrics
    work: WorkStream
    queue: ChatQueue
    blocked: BlockedChats
    # The health check's own small client: /healthz never queues behind turns for a connection.
    health_redis: AsyncRedisClient
    health: RedisHealthProbe
    # The customer's texts per language (LANGUAGES), and how a conversation's is decided.
    languages: ConversationLanguages
    # Whether the chat model answers (probed by the Telegram modes: model_health.start()).
    model_health: ModelHealth
    # Voice messages to words; None with the offline demo model (or an injected stand-in).
    transcriber: Transcriber | None
    # Everything opened, closed in reverse order by aclose().
    closing: AsyncExitStack

    @property
    def settings(self) -> Settings:
        """The settings everything was built from."""
        return self.core.settings

    @property
    def redis(self) -> AsyncRedisClient:
        """The application's Redis client."""
        return self.core.redis

    @property
    def keys(self) -> RedisKeys:
        """Every Redis key."""
        return self.core.keys

    @property
    def sessions(self) -> RedisSessionStore:
        """The session store."""
        return self.core.sessions

    @property
    def chat(self) -> ChatService:
        """The chat service (the turn)."""
        return self.core.chat

    @property
    def intake(self) -> Intake:
        """Where updates and the bot's own jobs are queued in their chats."""
        return self.core.intake

    @property
    def registry(self) -> ToolRegistry:
        """The model's tools."""
        return self.core.registry

    @property
    def executor(self) -> ToolExecutor:
        """Runs the tools."""
        return self.core.executor

    @property
    def llm(self) -> ToolCallingClient:
        """The chat model, metered."""
        return self.core.llm

    @property
    def shop(self) -> ShopData:
        """The shop's data."""
        return self.core.shop

    @property
    def turn_audit(self) -> AuditSink:
        """The audit as workers and the chat service write it (each turn counted in metrics)."""
        return self.core.audit

    def operator_unavailable(self, texts: Texts | None = None) -> str:
        """What ``/operator`` answers without a staff group (see :class:`CoreParts`)."""
        return self.core.operator_unavailable(texts)

    def local_turns(self) -> LocalTurns:
        """Turns of a front end without a queue (the console), audited as a worker's are."""
        return LocalTurns(self.chat, self.turn_audit)

    async def aclose(self) -> None:
        """Close in reverse order of construction; in-flight summaries get a short grace."""
        await self.closing.aclose()


def turn_lease_seconds(settings: Settings) -> float:
    """The longest a turn can take: every model call with its retries, every tool, a margin."""
    llm = settings.llm
    model_time = llm.timeout_seconds * (llm.max_retries + 1) * settings.tools.max_steps
    # Tools run with their own timeouts (2 s by default, a shop's MCP server its own);
    # the cap bounds how many run. A confirmed action runs within one tool's deadline.
    slowest = max([10.0, *(server.timeout_seconds for server in settings.mcp.servers)])
    tool_time = slowest * settings.tools.max_calls_per_turn
    # The turn's deadline ends it sooner when it is shorter than every budget together.
    longest = min(model_time + tool_time, settings.tools.turn_deadline_seconds)
    return longest + LEASE_MARGIN_SECONDS


def _build_llm(
    settings: Settings, shop: ShopData, registry: ToolRegistry, environ: Mapping[str, str]
) -> ToolCallingClient:
    llm = settings.llm
    if llm.backend == "offline":
        return build_offline_model(shop, registry)
    assert llm.api_key is not None  # noqa: S101 - LLMSettings refuses the openai backend without a key
    configured = llm.proxy.get_secret_value() if llm.proxy is not None else None
    try:
        proxy = proxy_for(llm.base_url or OPENAI_DEFAULT_BASE_URL, configured, environ)
    except ProxyURLError as error:
        raise StartupError(str(error)) from error
    # Here, not at the top: the offline backend never uses the SDK (half a second to import).
    from bot.llm.openai_client import OpenAIChatClient  # noqa: PLC0415

    return OpenAIChatClient.create(
        api_key=llm.api_key.get_secret_value(),
        base_url=llm.base_url,
        model=llm.model,
        timeout_seconds=llm.timeout_seconds,
        max_retries=llm.max_retries,
        instructions_role=llm.instructions_role,
        max_connections=llm.max_connections,
        proxy=proxy,
    )


def _transcriber(settings: Settings, client: ToolCallingClient) -> Transcriber | None:
    """``TRANSCRIPTION_MODEL`` over the chat model's connections; ``None`` offline.

    A test's injected stand-in for the chat model has no transcription endpoint either.
    """
    if settings.llm.backend == "offline":
        return None
    # Here, not at the top: the offline backend never imports the SDK.
    from bot.llm.openai_client import OpenAIChatClient  # noqa: PLC0415

    if not isinstance(client, OpenAIChatClient):
        return None
    media = settings.media
    return client.transcriber(media.transcription_model, language=media.transcription_language)


def build_model_health(settings: Settings, client: ToolCallingClient) -> ModelHealth:
    """The chat model's health, probed through ``client`` (``LLM_PROBE_SECONDS``).

    The offline demo model and a test's stand-in are not probed: they always answer.
    """
    probe_seconds = settings.llm.probe_seconds
    if settings.llm.backend == "offline" or not probe_seconds:
        return ModelHealth(None)
    # Here, not at the top: the offline backend never imports the SDK.
    from bot.llm.openai_client import OpenAIChatClient  # noqa: PLC0415

    if not isinstance(client, OpenAIChatClient):
        return ModelHealth(None)
    return ModelHealth(
        client.probe,
        first_pause_seconds=probe_seconds,
        timeout_seconds=settings.llm.timeout_seconds,
    )


def analysis_client(settings: Settings, chat_client: ToolCallingClient) -> StructuredOutputClient:
    """The model the request analysis asks: ``ANALYSIS_MODEL`` over the chat model's connections.

    The offline backend's analyst answers from the conversation's words; a client
    without Structured Outputs (a test's stand-in) gets the offline analyst too.
    """
    if settings.llm.backend != "offline" and isinstance(chat_client, StructuredOutputClient):
        # Here, not at the top: the offline backend never imports the SDK.
        from bot.llm.openai_client import OpenAIChatClient  # noqa: PLC0415

        model = settings.analysis.model
        if model is not None and isinstance(chat_client, OpenAIChatClient):
            return chat_client.with_model(model)
        return chat_client
    return OfflineAnalyst()


def build_offline_model(shop: ShopData, registry: ToolRegistry) -> OfflineChatModel:
    """The offline demo model, told the registry's tools and the shop's words it may use."""
    names = registry.names()
    return OfflineChatModel(
        OfflineDemoKnowledge.learn(
            names,
            # A shop's MCP tool that needs the button is proposed as a write tool is.
            write_tools=[name for name in names if _proposed_on_a_card(registry, name)],
            return_policy_products=tuple(policy.product for policy in shop.return_policies),
            catalogue_texts=tuple(f"{p.name} {p.category}" for p in shop.products),
        )
    )


def _known_tools(settings: Settings, registry: ToolRegistry) -> tuple[str, ...]:
    """The tool names metrics count by name: a shop's allowlisted ones even when listed later."""
    allowlisted = [name for server in settings.mcp.servers for name in server.tools or ()]
    return (*registry.names(), *allowlisted)


def _proposed_on_a_card(registry: ToolRegistry, name: str) -> bool:
    tool = registry.find(name)
    return tool is not None and tool.approval == "card"


def _prompts(settings: Settings) -> tuple[PromptTemplate, PromptTemplate]:
    registry = build_default_prompt_registry()
    try:
        return (
            registry.get(SUPPORT_CHAT_PROMPT_ID, settings.prompts.support_chat_version),
            registry.get(SUMMARY_PROMPT_ID, settings.prompts.summary_version),
        )
    except UnknownPromptError as error:
        raise StartupError(str(error)) from error


def open_catalogs(settings: Settings) -> Catalogs:
    """The customer's texts' catalogs; a language of ``LANGUAGES`` without one stops the start."""
    try:
        catalogs = Catalogs(default_locale=settings.language.default_language)
        catalogs.require(settings.language.codes)
    except CatalogError as error:
        raise StartupError(str(error)) from error
    return catalogs


def build_chat_service(
    settings: Settings,
    *,
    llm: ToolCallingClient,
    registry: ToolRegistry,
    executor: ToolExecutor,
    store: SessionStore,
    help_center: HelpCenter | None = None,
    localize: Localize = as_written,
) -> ChatService:
    """The chat service and its tool loop, configured by ``settings``.

    The one wiring of a turn: the application, the tests and the benchmarks all
    build their chat service here, so a test exercises what production runs.
    """
    support_prompt, summary_prompt = _prompts(settings)
    language = settings.language
    loop = BoundedToolLoop(
        llm,
        registry,
        executor,
        max_steps=settings.tools.max_steps,
        max_tool_calls=settings.tools.max_calls_per_turn,
        deadline_seconds=settings.tools.turn_deadline_seconds,
    )
    return ChatService(
        store=store,
        loop=loop,
        window=HistoryWindow(settings.session.history_token_budget),
        summaries=ConversationSummaryService(llm, summary_prompt),
        prompt=support_prompt,
        limits=ChatLimits(
            lease_seconds=turn_lease_seconds(settings),
            wait_seconds=settings.session.lock_wait_seconds,
            max_message_chars=settings.session.message_max_chars,
            card_window_seconds=settings.tools.action_confirm_seconds,
        ),
        model_name=llm.model_name,
        # The handoff policy only with a staff chat; before the cards, as the audit's order.
        followers=(
            (
                TurnHandoff(
                    idle=IdleRule(idle_seconds=settings.handoff.idle_minutes * 60),
                    localize=localize,
                ),
            )
            if settings.handoff.staff_chat_id is not None
            else ()
        )
        + (ActionCards(),),
        citations=CitationCheck(help_center.article_urls) if help_center is not None else None,
        # Named in Russian, the prompt's language ("английский").
        languages={code: language_name(code, "ru") for code in language.codes},
        default_language=language.default_language,
    )


def _shop_data(settings: Settings) -> ShopData:
    """The shop's data of ``TOOL_DATA_PATH``; unreadable or invalid stops the start."""
    try:
        return ShopData.load(settings.tools.data_path)
    except OSError as error:
        raise StartupError(
            f"TOOL_DATA_PATH {settings.tools.data_path} cannot be read: {error.strerror}"
        ) from error
    except ValidationError as error:
        first = error.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise StartupError(
            f"TOOL_DATA_PATH {settings.tools.data_path} is not a valid shop data file: "
            f"{where}: {str(first['msg']).removeprefix('Value error, ')} "
            f"({error.error_count()} problem(s))"
        ) from error


def _audit_sink(settings: Settings, redis: AsyncRedisClient) -> RedisStreamAuditSink:
    """The audit stream's writer (``AUDIT_*``), chat ids pseudonymised when configured."""
    audit = settings.audit
    pseudonymizer = (
        ChatPseudonymizer(audit.hmac_key.get_secret_value().encode())
        if audit.pseudonymize_chat_ids and audit.hmac_key is not None
        else None
    )
    return RedisStreamAuditSink(
        redis,
        stream=audit.stream,
        maxlen=audit.stream_maxlen,
        pseudonymizer=pseudonymizer,
        timeout_seconds=settings.redis.socket_timeout_seconds,
    )


def _intake(settings: Settings, redis: AsyncRedisClient, keys: RedisKeys) -> Intake:
    """Intake into the chats' queues under ``FLOOD_*`` (staff messages: their rate only)."""
    flood = settings.flood
    return Intake(
        redis,
        keys=keys,
        work=WorkStream(redis, stream=keys.work_stream, consumer=consumer_name()),
        limits=FloodLimits(
            burst=flood.burst,
            interval_seconds=flood.interval_seconds,
            daily_turns=flood.daily_turn_limit,
            backlog_seconds=flood.backlog_seconds,
        ),
        # Staff messages are no model turns: only their rate is limited.
        staff_limits=FloodLimits(
            burst=flood.staff_burst,
            interval_seconds=flood.staff_interval_seconds,
            daily_turns=0,
            backlog_seconds=flood.backlog_seconds,
        ),
        queue_max=flood.chat_queue_max,
    )


@dataclass(frozen=True, kw_only=True)
class _Engine:
    """The core parts and what the application keeps beside them, opened by :func:`_open_engine`."""

    core: CoreParts
    audit: RedisStreamAuditSink
    metrics: BotMetrics
    health_redis: AsyncRedisClient
    model_health: ModelHealth
    # The shop's MCP servers: opened with the core (their tools are the model's), a feature.
    mcp: McpFeature | None


async def build_application(
    settings: Settings,
    llm: ToolCallingClient | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], datetime] = utc_now,
    wrap_shop: Callable[[ShopBackend], ShopBackend] | None = None,
    help_center: HelpCenter | None = None,
) -> Application:
    """Build the core, then the features of :data:`FEATURES`; ``llm`` replaces the model client.

    ``environ`` is where the standard proxy variables are read (``os.environ`` by default).
    ``clock`` is what the support-hours code reads as now (whether support is open, the
    hours tool, the return window); tests fix it. ``wrap_shop`` wraps the demo shop the
    order tools use (``python -m bot eval`` records the writes that reach it).
    ``help_center``: one already open from ``KNOWLEDGE_DIR`` (the eval's trials share one
    instead of indexing the articles again; its searches are not counted in these metrics).
    """
    # An unknown prompt version, unreadable shop data or an unknown lookup fail before
    # anything connects.
    _prompts(settings)
    analysis_prompt(settings)
    shop = _shop_data(settings)
    check_link_tool(settings)
    catalogs = open_catalogs(settings)
    shared_help_center = help_center is not None
    if help_center is None:
        try:
            help_center = open_help_center(
                settings.tools.knowledge_dir, top_k=settings.tools.knowledge_top_k
            )
        except KnowledgeError as error:
            raise StartupError(str(error)) from error
    closing = AsyncExitStack()
    try:
        engine = await _open_engine(
            settings,
            closing,
            llm=llm,
            environ=os.environ if environ is None else environ,
            shop=shop,
            catalogs=catalogs,
            help_center=help_center,
            clock=clock,
            wrap_shop=wrap_shop,
        )
        if not shared_help_center:
            help_center.observe(KnowledgeMetrics(engine.metrics.registry).record_search)
        core = engine.core
        features = Features().added(engine.mcp)
        for build in FEATURES:
            feature = build(core, features)
            if feature is not None:
                closing.push_async_callback(feature.aclose)
            features = features.added(feature)
    except BaseException:
        await closing.aclose()
        raise
    return Application(
        core=core,
        features=features,
        audit=engine.audit,
        metrics=engine.metrics,
        work=core.intake.work,
        queue=ChatQueue(
            core.redis,
            keys=core.keys,
            lease_seconds=settings.session.lease_seconds,
            outbox_ttl_seconds=settings.session.ttl_seconds,
            quarantine_ttl_seconds=settings.session.archive_ttl_seconds,
            bookkeeping_retry_seconds=settings.redis.outage_wait_seconds,
            retries=engine.metrics,
        ),
        blocked=BlockedChats(core.redis, core.keys),
        health_redis=engine.health_redis,
        health=RedisHealthProbe(
            engine.health_redis,
            key_prefix=settings.redis.key_prefix,
            timeout_seconds=settings.redis.socket_timeout_seconds,
        ),
        languages=ConversationLanguages(
            catalogs=catalogs,
            policy=LanguagePolicy(
                languages=settings.language.codes, default=settings.language.default_language
            ),
        ),
        model_health=engine.model_health,
        transcriber=_transcriber(settings, core.model),
        closing=closing,
    )


async def _open_engine(
    settings: Settings,
    closing: AsyncExitStack,
    *,
    llm: ToolCallingClient | None,
    environ: Mapping[str, str],
    shop: ShopData,
    catalogs: Catalogs,
    help_center: HelpCenter,
    clock: Callable[[], datetime],
    wrap_shop: Callable[[ShopBackend], ShopBackend] | None,
) -> _Engine:
    """The core parts, in order: each one that needs closing pushed onto ``closing``."""

    def localize(language: str | None, message: str) -> str:
        """A customer text in ``language`` (``None``: the default language)."""
        return catalogs.texts(language or settings.language.default_language).gettext(message)

    redis = await connect_redis(settings)
    closing.push_async_callback(redis.aclose)
    health_redis = async_client(
        settings.redis,
        retry=RetryPolicy(retries=0),
        max_connections=2,
        pool_wait_seconds=settings.redis.socket_timeout_seconds,
    )
    closing.push_async_callback(health_redis.aclose)
    keys = RedisKeys(settings.redis.key_prefix)
    # The demo shop's orders in Redis: the write tools change them, every process sees it.
    shop_backend: ShopBackend = RedisDemoShop(redis, keys, shop, clock=clock)
    registry = build_default_tool_registry(
        shop,
        timezone=settings.tools.support_timezone,
        clock=clock,
        help_center=help_center,
        shop=shop_backend if wrap_shop is None else wrap_shop(shop_backend),
        demo_shop=settings.mcp.demo_tools_on(),
        localize=localize,
    )
    # The built-in's name, offered or not: a shop's tool never takes it.
    registry.reserve(REQUEST_HUMAN_AGENT_TOOL_NAME)
    if settings.handoff.staff_chat_id is not None:
        registry.register(build_request_human_agent_tool())
    # Before the model client: the offline demo model learns the tools listed by then.
    mcp = await open_mcp(settings, registry, environ, localize, hidden=link_tools(settings))
    if mcp is not None:
        closing.push_async_callback(mcp.aclose)
    base_client = llm or _build_llm(settings, shop, registry, environ)
    # One registry per application: two in one process (tests, benchmarks) never mix counts.
    metrics = BotMetrics(
        CollectorRegistry(),
        known_tools=_known_tools(settings, registry),
        known_categories=settings.analysis.category_names,
    )
    model_health = build_model_health(settings, base_client)
    client = MeteredChatModel(base_client, metrics, model_health)
    closing.push_async_callback(client.close)
    # Its probes stop before the client they ask is closed.
    closing.push_async_callback(model_health.aclose)
    metrics.observe_model_state(lambda: model_health.reading().state)
    executor = ToolExecutor(registry, max_workers=settings.tools.max_workers)
    closing.callback(executor.close)
    audit = _audit_sink(settings, redis)
    # Audit entries Redis missed get a last chance (they are in the log either way).
    closing.push_async_callback(audit.flush)
    metrics.observe_audit_lost(lambda: audit.lost_entries)
    metrics.observe_audit_pending(lambda: audit.pending_entries)
    sessions = RedisSessionStore(
        redis,
        keys=keys,
        ttl_seconds=settings.session.ttl_seconds,
        archive_ttl_seconds=settings.session.archive_ttl_seconds,
        retries=metrics,
    )
    chat = build_chat_service(
        settings,
        llm=client,
        registry=registry,
        executor=executor,
        store=sessions,
        help_center=help_center,
        localize=localize,
    )
    # In-flight summaries get a short grace.
    closing.push_async_callback(chat.drain, grace_seconds=5.0)
    logger.info(
        "Engine ready: backend=%s model=%s prompt=%s %s redis=%s tools=%s",
        settings.llm.backend if llm is None else "injected",
        client.model_name,
        chat.prompt.prompt_id,
        chat.prompt.version,
        describe_target(settings.redis),
        ",".join(registry.names()),
    )
    core = CoreParts(
        settings=settings,
        redis=redis,
        keys=keys,
        sessions=sessions,
        # The audit as workers and the chat service write it: each turn also in metrics.
        audit=MetricsAuditSink(audit, metrics, lost_entries=lambda: audit.lost_entries),
        llm=client,
        model=base_client,
        analyst=analysis_client(settings, base_client),
        registry=registry,
        executor=executor,
        chat=chat,
        intake=_intake(settings, redis, keys),
        shop=shop,
        catalogs=catalogs,
        help_center=help_center,
        clock=clock,
    )
    return _Engine(
        core=core,
        audit=audit,
        metrics=metrics,
        health_redis=health_redis,
        model_health=model_health,
        mcp=mcp,
    )
