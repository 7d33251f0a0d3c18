"""The composition root: builds every component once, closes them in reverse order."""

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from bot import customer_texts
from bot.accounts.directory import DEMO_LOOKUP_TOOL, CustomerDirectory, DemoCustomerDirectory
from bot.accounts.linking import AccountLinking
from bot.accounts.mcp_directory import McpCustomerDirectory
from bot.actions.confirmation import ActionConfirmations
from bot.actions.runs import ActionRuns
from bot.actions.turns import ActionCards
from bot.analysis.analyzer import SupportRequestAnalyzer
from bot.analysis.escalation import EscalationOffers
from bot.analysis.idle_analysis import IdleAnalysis
from bot.analysis.offline import OfflineAnalyst
from bot.analysis.review import QualityReviews
from bot.analysis.schedule import AnalysisSchedule
from bot.analysis.service import ConversationAnalysis
from bot.audit.pseudonym import ChatPseudonymizer
from bot.audit.redis_sink import RedisStreamAuditSink
from bot.audit.sink import AuditSink
from bot.csat.schedule import CsatPolicy, CsatSchedule
from bot.engine.chat_service import ChatLimits, ChatService
from bot.engine.history import HistoryWindow
from bot.engine.local_turns import LocalTurns
from bot.engine.summary import ConversationSummaryService
from bot.engine.tool_loop import BoundedToolLoop
from bot.handoff.service import HandoffPolicy, HandoffService
from bot.handoff.topics import TopicDirectory
from bot.handoff.turns import TurnHandoff
from bot.knowledge.watcher import (
    KnowledgeError,
    KnowledgeMetrics,
    KnowledgeWatcher,
    open_help_center,
)
from bot.language.catalogs import CatalogError, Catalogs, language_name
from bot.language.choice import ConversationLanguages
from bot.language.detect import LanguagePolicy
from bot.language.texts import Texts
from bot.llm.health import ModelHealth
from bot.llm.offline import OfflineChatModel, OfflineDemoKnowledge
from bot.llm.transcription import Transcriber
from bot.llm.types import StructuredOutputClient, ToolCallingClient
from bot.mcp.servers import McpServers, McpSetupError, tool_definition_tokens
from bot.metrics import BotMetrics, MeteredChatModel, MetricsAuditSink
from bot.ops.redis_startup import connect_redis
from bot.ops.startup import StartupError
from bot.proxies import ProxyURLError, proxy_for
from bot.queue.admission import FloodLimits, Intake
from bot.queue.chat_queue import ChatQueue
from bot.queue.dead_letters import DeadLetters
from bot.queue.work_stream import WorkStream, consumer_name
from bot.sessions.handoff_machine import IdleRule, utc_now
from bot.sessions.redis_store import RedisSessionStore
from bot.sessions.store import SessionStore
from bot.settings import Settings
from bot.shop.redis_demo import RedisDemoShop
from bot.staff_assist.service import StaffAssist
from bot.staff_assist.wiring import build_staff_assist
from bot.storage.blocked_chats import BlockedChats
from bot.storage.connection import (
    AsyncRedisClient,
    RetryPolicy,
    async_client,
    describe_target,
)
from bot.storage.health import RedisHealthProbe
from bot.storage.keys import RedisKeys
from prompts.registry import (
    ANALYSIS_PROMPT_ID,
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
from tools.store import ShopStore
from tools.support_hours import closed_note, describe_hours, support_hours_at
from tools.write_tools import Localize, as_written

logger = logging.getLogger(__name__)

# Where the SDK sends requests when OPENAI_BASE_URL is not set (for the proxy choice).
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

# Added to the longest possible turn so that a lease never expires under a live turn.
LEASE_MARGIN_SECONDS = 30.0


@dataclass(frozen=True)
class Application:
    """Every long-lived component, built by :func:`build_application`."""

    settings: Settings
    redis: AsyncRedisClient
    shop: ShopStore
    llm: ToolCallingClient
    registry: ToolRegistry
    executor: ToolExecutor
    audit: RedisStreamAuditSink
    sessions: RedisSessionStore
    chat: ChatService
    keys: RedisKeys
    work: WorkStream
    queue: ChatQueue
    intake: Intake
    metrics: BotMetrics
    turn_audit: AuditSink
    blocked: BlockedChats
    # The health check's own small client: /healthz never queues behind turns for a connection.
    health_redis: AsyncRedisClient
    health: RedisHealthProbe
    # The customer's texts per language (LANGUAGES), and how a conversation's is decided.
    languages: ConversationLanguages
    # Human handoff; None while STAFF_CHAT_ID is unset.
    handoff: HandoffService | None = None
    # Rebuilds the help center's index when KNOWLEDGE_DIR changes.
    knowledge: KnowledgeWatcher | None = None
    # Settles presses on confirmation cards (the write tools' actions).
    actions: ActionConfirmations | None = None
    # The shop's own tools over MCP; None while MCP_SERVERS is empty.
    mcp: McpServers | None = None
    # The satisfaction question's schedule; None with CSAT=off.
    feedback: CsatSchedule | None = None
    # The request analysis (/analyze, the idle analysis); None with ANALYSIS=off.
    analysis: ConversationAnalysis | None = None
    # What the support-hours code reads as now (see build_application).
    clock: Callable[[], datetime] = utc_now
    # Links a chat to the shop's customer by a shared contact; None without ACCOUNT_LINK_TOOL.
    account_linking: AccountLinking | None = None
    # Voice messages to words; None with the offline demo model (or an injected stand-in).
    transcriber: Transcriber | None = None
    # Staff assist (suggested replies, quality reviews); None while STAFF_CHAT_ID is unset.
    assist: StaffAssist | None = None
    # Whether the chat model answers (probed by the Telegram modes: model_health.start()).
    model_health: ModelHealth = field(default_factory=lambda: ModelHealth(None))

    def operator_unavailable(self, texts: Texts | None = None) -> str:
        """What ``/operator`` answers without a staff group: nobody to call, and the hours now.

        In ``texts``' language (``None``: as written, Russian).
        """
        hours = support_hours_at(
            self.shop.support_hours, self.clock(), self.settings.tools.support_timezone
        )
        gettext = customer_texts.gettext_of(texts)
        return customer_texts.operator_off(describe_hours(hours, gettext), gettext)

    def local_turns(self) -> LocalTurns:
        """Turns of a front end without a queue (the console), audited as a worker's are."""
        return LocalTurns(self.chat, self.turn_audit)

    async def aclose(self) -> None:
        """Close in reverse order of construction; in-flight summaries get a short grace."""
        if self.knowledge is not None:
            await self.knowledge.aclose()
        await self.chat.drain(grace_seconds=5.0)
        # Audit entries Redis missed get a last chance (they are in the log either way).
        await self.audit.flush()
        self.executor.close()
        await self.model_health.aclose()
        await self.llm.close()
        if self.mcp is not None:
            await self.mcp.aclose()
        await self.health_redis.aclose()
        await self.redis.aclose()


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
    settings: Settings, shop: ShopStore, registry: ToolRegistry, environ: Mapping[str, str]
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


def _check_link_tool(settings: Settings) -> None:
    """``ACCOUNT_LINK_TOOL`` names the demo lookup or ``<server>:<tool>`` of ``MCP_SERVERS``."""
    tool = settings.tools.account_link_tool
    if tool is None or tool == DEMO_LOOKUP_TOOL:
        return
    server, colon, remote = tool.partition(":")
    if not colon or not remote:
        raise StartupError(
            f"ACCOUNT_LINK_TOOL={tool}: name the shop's lookup as <server>:<tool> "
            f"(a server of MCP_SERVERS), or {DEMO_LOOKUP_TOOL} for the demo shop"
        )
    if server not in {configured.name for configured in settings.mcp.servers}:
        raise StartupError(f"ACCOUNT_LINK_TOOL={tool}: MCP_SERVERS has no server named {server}")


def _customer_directory(
    settings: Settings, shop: ShopStore, mcp: McpServers | None
) -> CustomerDirectory | None:
    """The shop's customers by phone number for ``ACCOUNT_LINK_TOOL`` (``None`` when unset).

    The demo shop's lookup is answered in process, over the store its MCP server
    reads too; ``<server>:<tool>`` calls that tool on the shop's MCP server
    (:mod:`bot.accounts.mcp_directory`). Checked by :func:`_check_link_tool` first.
    """
    tool = settings.tools.account_link_tool
    if tool is None:
        return None
    if tool == DEMO_LOOKUP_TOOL:
        return DemoCustomerDirectory(store=shop, tool_name=tool)
    server, _, remote = tool.partition(":")
    connection = mcp.connection(server) if mcp is not None else None
    if connection is None:
        raise StartupError(f"ACCOUNT_LINK_TOOL={tool}: MCP_SERVERS has no server named {server}")
    return McpCustomerDirectory(
        connection=connection,
        remote_name=remote,
        tool_name=tool,
        timeout_seconds=connection.settings.timeout_seconds,
    )


def build_offline_model(shop: ShopStore, registry: ToolRegistry) -> OfflineChatModel:
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


def _analysis_prompt(settings: Settings) -> PromptTemplate:
    try:
        return build_default_prompt_registry().get(
            ANALYSIS_PROMPT_ID, settings.prompts.analysis_version
        )
    except UnknownPromptError as error:
        raise StartupError(str(error)) from error


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


def build_analysis(
    settings: Settings,
    *,
    client: StructuredOutputClient,
    redis: AsyncRedisClient,
    keys: RedisKeys,
    sessions: SessionStore,
    audit: AuditSink,
    intake: Intake | None = None,
) -> ConversationAnalysis:
    """The request analysis, configured by ``settings`` (``ANALYSIS_*``).

    ``intake`` (given when a staff group is configured) queues the escalation offers;
    without it, or with ``ANALYSIS_ESCALATION=off``, nobody is offered a person.
    """
    analyzer = SupportRequestAnalyzer(
        client=client,
        prompt=_analysis_prompt(settings),
        categories=settings.analysis.category_names,
    )
    schedule = AnalysisSchedule(
        redis,
        keys=keys,
        idle_seconds=settings.csat.after_idle_minutes * 60,
        ttl_seconds=settings.session.ttl_seconds,
    )
    escalation = (
        EscalationOffers(schedule=schedule, intake=intake)
        if intake is not None and settings.analysis.escalation == "on"
        else None
    )
    below = settings.handoff.quality_review_below
    reviews = (
        QualityReviews(intake=intake, below=below)
        if intake is not None and below is not None
        else None
    )
    return ConversationAnalysis(
        analyzer=analyzer,
        schedule=schedule,
        idle=IdleAnalysis(
            analyzer=analyzer,
            schedule=schedule,
            sessions=sessions,
            audit=audit,
            timeout_seconds=settings.analysis.timeout_seconds,
            escalation=escalation,
            reviews=reviews,
        ),
        escalation=escalation is not None,
    )


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
            action_confirm_seconds=settings.tools.action_confirm_seconds,
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


async def _model_and_shop_tools(
    settings: Settings,
    shop: ShopStore,
    registry: ToolRegistry,
    llm: ToolCallingClient | None,
    environ: Mapping[str, str],
    *,
    localize: Localize = as_written,
) -> tuple[ToolCallingClient, McpServers | None]:
    """The shop's MCP servers (if configured), then the model client (``llm`` if given)."""
    mcp: McpServers | None = None
    try:
        if settings.mcp.servers:
            # Before the model client: the offline demo model learns the tools listed by then.
            mcp = await open_mcp_servers(settings, registry, environ, localize)
        # After the registry: the offline demo model learns the registered tools from it.
        return llm or _build_llm(settings, shop, registry, environ), mcp
    except StartupError:
        if mcp is not None:
            await mcp.aclose()
        raise


def _link_tools(settings: Settings) -> dict[str | None, frozenset[str]]:
    """The account link lookup, by server: the application's, never offered to the model."""
    tool = settings.tools.account_link_tool
    if tool is None:
        return {}
    if tool == DEMO_LOOKUP_TOOL:
        return {None: frozenset({DEMO_LOOKUP_TOOL})}
    server, _, remote = tool.partition(":")
    return {server: frozenset({remote})}


async def open_mcp_servers(
    settings: Settings,
    registry: ToolRegistry,
    environ: Mapping[str, str],
    localize: Localize = as_written,
) -> McpServers:
    """Connect ``MCP_SERVERS`` and offer their tools in ``registry`` (down ones retry later).

    One warning line when the tool definitions exceed ``MCP_TOOLS_TOKEN_WARNING`` tokens.
    """
    try:
        servers = McpServers(
            settings=settings.mcp,
            registry=registry,
            environ=environ,
            localize=localize,
            hidden=_link_tools(settings),
        )
    except McpSetupError as error:
        raise StartupError(str(error)) from error
    await servers.start()
    tokens = tool_definition_tokens(registry)
    limit = settings.mcp.tools_token_warning
    if limit and tokens > limit:
        logger.warning(
            "Tool definitions take about %d tokens of every model request (%d tools), more "
            "than MCP_TOOLS_TOKEN_WARNING=%d: narrow the servers' tools allowlists",
            tokens,
            len(registry.names()),
            limit,
        )
    return servers


async def build_application(  # noqa: PLR0915 - the composition root builds every part here
    settings: Settings,
    llm: ToolCallingClient | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], datetime] = utc_now,
    wrap_shop: Callable[[ShopBackend], ShopBackend] | None = None,
    help_center: HelpCenter | None = None,
) -> Application:
    """Build everything; ``llm`` replaces the configured model client (tests, benchmarks).

    ``environ`` is where the standard proxy variables are read (``os.environ`` by default).
    ``clock`` is what the support-hours code reads as now (whether support is open, the
    hours tool, the return window); tests fix it. ``wrap_shop`` wraps the demo shop the
    order tools use (``python -m bot eval`` records the writes that reach it).
    ``help_center``: one already open from ``KNOWLEDGE_DIR`` (the eval's trials share one
    instead of indexing the articles again; its searches are not counted in these metrics).
    """
    # An unknown prompt version fails before anything connects.
    _prompts(settings)
    _analysis_prompt(settings)
    try:
        shop = ShopStore.load(settings.tools.data_path)
    except OSError as error:
        raise StartupError(
            f"TOOL_DATA_PATH {settings.tools.data_path} cannot be read: {error.strerror}"
        ) from error
    except ValidationError as error:
        first = error.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise StartupError(
            f"TOOL_DATA_PATH {settings.tools.data_path} is not a valid shop store: "
            f"{where}: {str(first['msg']).removeprefix('Value error, ')} "
            f"({error.error_count()} problem(s))"
        ) from error
    # Before anything connects: an unknown lookup stops the start with one line.
    _check_link_tool(settings)
    catalogs = open_catalogs(settings)

    def localize(language: str | None, message: str) -> str:
        """A customer text in ``language`` (``None``: the default language)."""
        return catalogs.texts(language or settings.language.default_language).gettext(message)

    shared_help_center = help_center is not None
    if help_center is None:
        try:
            help_center = open_help_center(
                settings.tools.knowledge_dir, top_k=settings.tools.knowledge_top_k
            )
        except KnowledgeError as error:
            raise StartupError(str(error)) from error
    redis = await connect_redis(settings)
    health_redis = async_client(
        settings.redis,
        retry=RetryPolicy(retries=0),
        max_connections=2,
        pool_wait_seconds=settings.redis.socket_timeout_seconds,
    )
    health = RedisHealthProbe(
        health_redis,
        key_prefix=settings.redis.key_prefix,
        timeout_seconds=settings.redis.socket_timeout_seconds,
    )
    # The demo shop's orders in Redis: the write tools change them, every process sees it.
    shop_backend: ShopBackend = RedisDemoShop(
        redis, RedisKeys(settings.redis.key_prefix), shop, clock=clock
    )
    if wrap_shop is not None:
        shop_backend = wrap_shop(shop_backend)
    registry = build_default_tool_registry(
        shop,
        timezone=settings.tools.support_timezone,
        clock=clock,
        help_center=help_center,
        shop=shop_backend,
        demo_shop=settings.mcp.demo_tools_on(),
        localize=localize,
    )
    # The built-in's name, offered or not: a shop's tool never takes it.
    registry.reserve(REQUEST_HUMAN_AGENT_TOOL_NAME)
    if settings.handoff.staff_chat_id is not None:
        registry.register(build_request_human_agent_tool())
    try:
        base_client, mcp = await _model_and_shop_tools(
            settings,
            shop,
            registry,
            llm,
            os.environ if environ is None else environ,
            localize=localize,
        )
        directory = _customer_directory(settings, shop, mcp)
    except StartupError:
        await health_redis.aclose()
        await redis.aclose()
        raise
    # One registry per application: two in one process (tests, benchmarks) never mix counts.
    metrics = BotMetrics(
        CollectorRegistry(),
        known_tools=_known_tools(settings, registry),
        known_categories=settings.analysis.category_names,
    )
    if not shared_help_center:
        help_center.observe(KnowledgeMetrics(metrics.registry).record_search)
    model_health = build_model_health(settings, base_client)
    metrics.observe_model_state(lambda: model_health.reading().state)
    client = MeteredChatModel(base_client, metrics, model_health)
    executor = ToolExecutor(registry, max_workers=settings.tools.max_workers)
    audit_settings = settings.audit
    pseudonymizer = (
        ChatPseudonymizer(audit_settings.hmac_key.get_secret_value().encode())
        if audit_settings.pseudonymize_chat_ids and audit_settings.hmac_key is not None
        else None
    )
    audit = RedisStreamAuditSink(
        redis,
        stream=audit_settings.stream,
        maxlen=audit_settings.stream_maxlen,
        pseudonymizer=pseudonymizer,
        timeout_seconds=settings.redis.socket_timeout_seconds,
    )
    keys = RedisKeys(settings.redis.key_prefix)
    metrics.observe_audit_lost(lambda: audit.lost_entries)
    metrics.observe_audit_pending(lambda: audit.pending_entries)
    sessions = RedisSessionStore(
        redis,
        keys=keys,
        ttl_seconds=settings.session.ttl_seconds,
        archive_ttl_seconds=settings.session.archive_ttl_seconds,
        retries=metrics,
    )
    # The audit as workers and the chat service write it: each turn also counted in metrics.
    turn_audit = MetricsAuditSink(audit, metrics, lost_entries=lambda: audit.lost_entries)
    chat = build_chat_service(
        settings,
        llm=client,
        registry=registry,
        executor=executor,
        store=sessions,
        help_center=help_center,
        localize=localize,
    )
    logger.info(
        "Engine ready: backend=%s model=%s prompt=%s %s redis=%s tools=%s",
        settings.llm.backend if llm is None else "injected",
        client.model_name,
        chat.prompt.prompt_id,
        chat.prompt.version,
        describe_target(settings.redis),
        ",".join(registry.names()),
    )
    work = WorkStream(redis, stream=keys.work_stream, consumer=consumer_name())
    flood = settings.flood
    intake = Intake(
        redis,
        keys=keys,
        work=work,
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
    queue = ChatQueue(
        redis,
        keys=keys,
        lease_seconds=settings.session.lease_seconds,
        outbox_ttl_seconds=settings.session.ttl_seconds,
        quarantine_ttl_seconds=settings.session.archive_ttl_seconds,
        bookkeeping_retry_seconds=settings.redis.outage_wait_seconds,
        retries=metrics,
    )
    staff_chat_id = settings.handoff.staff_chat_id
    handoff = (
        HandoffService(
            chat=chat,
            topics=TopicDirectory(redis, keys=keys, staff_chat_id=staff_chat_id),
            settings=HandoffPolicy(
                staff_chat_id=staff_chat_id,
                after_failed_turns=settings.handoff.after_failed_turns,
                idle=IdleRule(idle_seconds=settings.handoff.idle_minutes * 60),
            ),
            closed_note=lambda gettext: closed_note(
                shop.support_hours, clock(), settings.tools.support_timezone, gettext
            ),
            localize=localize,
            suggest=settings.handoff.suggestions == "on",
        )
        if staff_chat_id is not None
        else None
    )
    # Staff assist: suggested replies in the topics, quality reviews (docs/staff-assist.md).
    assist = (
        build_staff_assist(
            settings,
            handoff=handoff,
            intake=intake,
            llm=client,
            registry=registry,
            executor=executor,
            catalogs=catalogs,
        )
        if handoff is not None
        else None
    )
    knowledge = KnowledgeWatcher(
        help_center, interval_seconds=settings.tools.knowledge_reload_seconds
    )
    knowledge.start()
    return Application(
        clock=clock,
        settings=settings,
        redis=redis,
        shop=shop,
        llm=client,
        registry=registry,
        executor=executor,
        audit=audit,
        sessions=sessions,
        chat=chat,
        keys=keys,
        work=work,
        queue=queue,
        intake=intake,
        metrics=metrics,
        turn_audit=turn_audit,
        blocked=BlockedChats(redis, keys),
        health_redis=health_redis,
        health=health,
        languages=ConversationLanguages(
            catalogs=catalogs,
            policy=LanguagePolicy(
                languages=settings.language.codes, default=settings.language.default_language
            ),
        ),
        handoff=handoff,
        knowledge=knowledge,
        actions=ActionConfirmations(
            registry=registry,
            confirm_seconds=settings.tools.action_confirm_seconds,
            tool_wait_seconds=settings.tools.action_tool_wait_seconds,
            runs=ActionRuns(redis, keys, ttl_seconds=settings.session.archive_ttl_seconds),
            dead_letters=DeadLetters(redis, keys=keys),
            alert_staff=staff_chat_id is not None,
            # Staff read their texts in the default language (None: the default).
            staff_texts=lambda message: localize(None, message),
        ),
        mcp=mcp,
        feedback=CsatSchedule(
            redis,
            keys=keys,
            policy=CsatPolicy(
                after_idle_seconds=settings.csat.after_idle_minutes * 60,
                min_interval_seconds=settings.csat.min_interval_hours * 3600,
            ),
        )
        if settings.csat.enabled == "on"
        else None,
        analysis=build_analysis(
            settings,
            client=analysis_client(settings, base_client),
            redis=redis,
            keys=keys,
            sessions=sessions,
            audit=turn_audit,
            intake=intake if staff_chat_id is not None else None,
        )
        if settings.analysis.enabled == "on"
        else None,
        account_linking=AccountLinking(chat=chat, directory=directory)
        if directory is not None
        else None,
        transcriber=_transcriber(settings, base_client),
        assist=assist,
        model_health=model_health,
    )
