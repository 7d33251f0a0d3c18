"""Application settings: environment variables (and ``.env``), one class per concern."""

import json
import re
import string
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError

from bot.proxies import ProxyURLError, normalise_proxy_url

# The try-out's data (bot/tryout/), named by path: TOOL_DATA_PATH's and KNOWLEDGE_DIR's
# defaults, so that the bot answers with nothing set; production points both elsewhere.
DEMO_SHOP_DATA = Path(str(files("bot").joinpath("tryout", "demo_shop.json")))
"""The demo shop's data: orders, products, return policies, hours, customers."""
DEMO_HELP_CENTER = Path(str(files("bot").joinpath("tryout", "help_center")))
"""The demo help center's articles (Markdown)."""

KEY_ALPHABET = r"A-Za-z0-9_.:-"
"""Characters allowed in a key prefix and in a conversation key."""

KEY_PREFIX_PATTERN = rf"^[{KEY_ALPHABET}]{{1,32}}$"

DEFAULT_CATEGORIES: tuple[str, ...] = (
    "order_status",
    "delivery",
    "cancellation",
    "return",
    "payment",
    "product_question",
    "complaint",
    "account",
    "other",
)
"""The categories a shop gets unless it sets its own (``ANALYSIS_CATEGORIES``)."""

_ENV = SettingsConfigDict(
    env_file=".env",
    env_file_encoding="utf-8",
    extra="ignore",
    # No populate_by_name: it would also read a field's bare name (PATH, URL, PORT...)
    # from the environment. Each field answers to its documented variable only.
    # "KEY=" in .env means "not set", not "set to the empty string".
    env_ignore_empty=True,
    # inf passes gt=0 and then overflows a timeout at start-up: every number is finite.
    allow_inf_nan=False,
)


# Each field spells out its Field(...): the pydantic mypy plugin reads validation_alias from
# that call to type the sections' constructors, and would not see through a wrapper.
def _env(name: str) -> AliasChoices:
    return AliasChoices(name)


class TelegramSettings(BaseSettings):
    """Bot API access and which chats the bot serves."""

    model_config = _ENV

    bot_token: SecretStr | None = Field(default=None, validation_alias=_env("TELEGRAM_BOT_TOKEN"))
    api_base_url: str = Field(
        default="https://api.telegram.org", validation_alias=_env("TELEGRAM_API_BASE_URL")
    )
    allow_groups: bool = Field(default=False, validation_alias=_env("TELEGRAM_ALLOW_GROUPS"))
    shutdown_grace_seconds: float = Field(
        default=30.0, gt=0, validation_alias=_env("TELEGRAM_SHUTDOWN_GRACE_SECONDS")
    )
    send_max_attempts: int = Field(
        default=5, ge=1, le=20, validation_alias=_env("TELEGRAM_SEND_MAX_ATTEMPTS")
    )
    # A SecretStr because the URL may carry the proxy's password.
    proxy: SecretStr | None = Field(default=None, validation_alias=_env("TELEGRAM_PROXY"))
    # Answers shown as drafts while they are written (private chats only).
    streaming: Literal["on", "off"] = Field(default="on", validation_alias=_env("STREAMING"))
    stream_draft_interval_seconds: float = Field(
        default=0.5, ge=0.1, le=10.0, validation_alias=_env("STREAM_DRAFT_INTERVAL_SECONDS")
    )

    @field_validator("proxy")
    @classmethod
    def _proxy_url(cls, value: SecretStr | None) -> SecretStr | None:
        return _check_proxy(value)


class WebhookSettings(BaseSettings):
    """The webhook server (``python -m bot webhook``)."""

    model_config = _ENV

    url: str | None = Field(default=None, validation_alias=_env("WEBHOOK_URL"))
    path: str = Field(default="/telegram/webhook", validation_alias=_env("WEBHOOK_PATH"))
    secret: SecretStr | None = Field(default=None, validation_alias=_env("WEBHOOK_SECRET"))
    host: str = Field(default="0.0.0.0", validation_alias=_env("WEBHOOK_HOST"))  # noqa: S104 - a server in a container listens on all interfaces
    port: int = Field(default=8080, ge=1, le=65535, validation_alias=_env("WEBHOOK_PORT"))
    header_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, validation_alias=_env("WEBHOOK_HEADER_TIMEOUT_SECONDS")
    )
    body_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, validation_alias=_env("WEBHOOK_BODY_TIMEOUT_SECONDS")
    )


class LLMSettings(BaseSettings):
    """The chat model."""

    model_config = _ENV

    backend: Literal["openai", "offline"] = Field(
        default="openai", validation_alias=_env("LLM_BACKEND")
    )
    api_key: SecretStr | None = Field(default=None, validation_alias=_env("OPENAI_API_KEY"))
    base_url: str | None = Field(default=None, validation_alias=_env("OPENAI_BASE_URL"))
    model: str = Field(default="gpt-4.1-mini", min_length=1, validation_alias=_env("LLM_MODEL"))
    timeout_seconds: float = Field(
        default=30.0, gt=0, le=600, validation_alias=_env("LLM_TIMEOUT_SECONDS")
    )
    max_retries: int = Field(default=2, ge=0, le=10, validation_alias=_env("LLM_MAX_RETRIES"))
    # Each chat waiting for the model holds a connection; past the limit turns queue for one.
    max_connections: int = Field(
        default=1000, ge=1, le=100_000, validation_alias=_env("LLM_MAX_CONNECTIONS")
    )
    instructions_role: Literal["developer", "system"] = Field(
        default="developer", validation_alias=_env("LLM_INSTRUCTIONS_ROLE")
    )
    proxy: SecretStr | None = Field(default=None, validation_alias=_env("LLM_PROXY"))
    # The model is asked one short question at start-up (a few tokens); while it does not
    # answer, again after this many seconds, then twice as long each time (at most 60 s).
    # 0: never (then only turns find a wrong key or model).
    probe_seconds: float = Field(
        default=5.0, ge=0, le=3600, validation_alias=_env("LLM_PROBE_SECONDS")
    )

    @field_validator("proxy")
    @classmethod
    def _proxy_url(cls, value: SecretStr | None) -> SecretStr | None:
        return _check_proxy(value)

    @model_validator(mode="after")
    def _key_for_openai(self) -> "LLMSettings":
        if self.backend == "openai" and (
            self.api_key is None or not self.api_key.get_secret_value().strip()
        ):
            raise ValueError(
                "OPENAI_API_KEY is not set: set it, or run the offline demo model "
                "with LLM_BACKEND=offline"
            )
        return self


class HealthSettings(BaseSettings):
    """The health and metrics server of polling mode (webhook mode serves both itself)."""

    model_config = _ENV

    host: str = Field(default="127.0.0.1", validation_alias=_env("HEALTH_HOST"))
    # Unset: DEFAULT_HEALTH_PORT, or the next free one of HEALTH_PORT_SEARCH (logged at
    # start-up), so that a poller and its workers on one host start with the defaults.
    # Set: exactly that port (exit 1 when it is taken); 0 takes any free port.
    port: int | None = Field(default=None, ge=0, le=65535, validation_alias=_env("HEALTH_PORT"))


class SupervisionSettings(BaseSettings):
    """Long-lived tasks (claim loop, poller, sweeper): back-off, and when to give one up.

    A Redis outage is retried for as long as it lasts; a task failing for any
    other reason more than ``max_restarts`` times within ``restart_window_seconds``
    stops the process with exit code 1 (see :mod:`bot.ops.supervision`).
    """

    model_config = _ENV

    max_restarts: int = Field(default=5, ge=0, le=1000, validation_alias=_env("TASK_MAX_RESTARTS"))
    restart_window_seconds: float = Field(
        default=60.0, gt=0, le=86_400, validation_alias=_env("TASK_RESTART_WINDOW_SECONDS")
    )
    backoff_max_seconds: float = Field(
        default=5.0, ge=0.01, le=300, validation_alias=_env("TASK_BACKOFF_MAX_SECONDS")
    )


DEFAULT_HEALTH_PORT = 8081
HEALTH_PORT_SEARCH = 100
"""Ports tried from ``DEFAULT_HEALTH_PORT`` on while ``HEALTH_PORT`` is unset."""


REDIS_URL_SCHEMES = frozenset({"redis", "rediss", "unix"})


class RedisSettings(BaseSettings):
    """Where sessions, locks, limits and the audit stream live."""

    model_config = _ENV

    # A SecretStr because the URL may carry the password (redis://:pw@host/0). The
    # default is only a placeholder: an entry point never uses it (see url_is_set).
    url: SecretStr = Field(
        default=SecretStr("redis://localhost:6379/0"), validation_alias=_env("REDIS_URL")
    )
    # Unset REDIS_URL: the console and the staff CLI run a private redis-server with its
    # data here (bot/tryout/local_redis.py); relative to the current directory.
    local_dir: Path = Field(default=Path(".data"), validation_alias=_env("LOCAL_REDIS_DIR"))
    key_prefix: str = Field(
        default="support", pattern=KEY_PREFIX_PATTERN, validation_alias=_env("REDIS_KEY_PREFIX")
    )
    socket_timeout_seconds: float = Field(
        default=5.0, gt=0, validation_alias=_env("REDIS_SOCKET_TIMEOUT_SECONDS")
    )
    max_connections: int = Field(
        default=200, ge=2, le=10_000, validation_alias=_env("REDIS_MAX_CONNECTIONS")
    )
    # How long a live worker waits for Redis to answer a step it must not drop (storing
    # a turn's outcome, handing a chat back, looking up a job whose outcome was not
    # stored). Past it the job stays queued and is answered once Redis is back.
    outage_wait_seconds: float = Field(
        default=60.0, gt=0, le=3600, validation_alias=_env("REDIS_OUTAGE_WAIT_SECONDS")
    )
    mode: Literal["standalone", "cluster", "sentinel"] = Field(
        default="standalone", validation_alias=_env("REDIS_MODE")
    )
    # host:port pairs, comma-separated; only read in sentinel mode.
    sentinels: str | None = Field(default=None, validation_alias=_env("REDIS_SENTINELS"))
    sentinel_service: str = Field(
        default="mymaster", min_length=1, validation_alias=_env("REDIS_SENTINEL_SERVICE")
    )
    sentinel_password: SecretStr | None = Field(
        default=None, validation_alias=_env("REDIS_SENTINEL_PASSWORD")
    )
    # Overrides the password in REDIS_URL (for every node: master, replicas, cluster nodes).
    password: SecretStr | None = Field(default=None, validation_alias=_env("REDIS_PASSWORD"))
    tls: bool = Field(default=False, validation_alias=_env("REDIS_TLS"))
    tls_ca_file: Path | None = Field(default=None, validation_alias=_env("REDIS_TLS_CA_FILE"))
    # Retries after a connection error; a timed-out command is never re-sent (see docs/scaling.md).
    retries: int = Field(default=2, ge=0, le=10, validation_alias=_env("REDIS_RETRIES"))

    @field_validator("url")
    @classmethod
    def _redis_scheme(cls, value: SecretStr) -> SecretStr:
        # A wrong scheme is a bad setting (exit 2), not an unreachable Redis (exit 1).
        scheme, separator, _ = value.get_secret_value().partition("://")
        if not separator or scheme.lower() not in REDIS_URL_SCHEMES:
            raise ValueError("must be a redis://, rediss:// or unix:// URL")
        return value

    @field_validator("sentinels")
    @classmethod
    def _host_port_list(cls, value: str | None) -> str | None:
        if value is not None:
            parse_host_ports(value)
        return value

    @model_validator(mode="after")
    def _sentinels_for_sentinel_mode(self) -> "RedisSettings":
        if self.mode == "sentinel" and not self.sentinels:
            raise ValueError("REDIS_MODE=sentinel needs REDIS_SENTINELS (host:port,host:port)")
        if self.mode == "cluster" and not self.url_is_set:
            raise ValueError("REDIS_MODE=cluster needs REDIS_URL (any node of the cluster)")
        return self

    @property
    def url_is_set(self) -> bool:
        """Whether ``REDIS_URL`` was given (environment, ``.env`` or a caller's values).

        Unset, the Telegram modes refuse to start and the console and the staff CLI
        start a private server: nobody talks to whatever answers on localhost:6379.
        """
        return "url" in self.model_fields_set

    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """``REDIS_SENTINELS`` as (host, port) pairs; empty outside sentinel mode."""
        return parse_host_ports(self.sentinels) if self.sentinels else []


def parse_host_ports(value: str) -> list[tuple[str, int]]:
    """``"a:26379, b:26379"`` as pairs; :class:`ValueError` names the bad item."""
    pairs = []
    for item in (part.strip() for part in value.split(",")):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r} is not host:port")
        pairs.append((host.strip("[]"), int(port)))
    if not pairs:
        raise ValueError("no host:port given")
    return pairs


class SessionSettings(BaseSettings):
    """Conversation sessions and the history window."""

    model_config = _ENV

    ttl_seconds: int = Field(
        default=7 * 24 * 3600, ge=60, validation_alias=_env("SESSION_TTL_SECONDS")
    )
    archive_ttl_seconds: int = Field(
        default=30 * 24 * 3600, ge=60, validation_alias=_env("SESSION_ARCHIVE_TTL_SECONDS")
    )
    history_token_budget: int = Field(
        default=2000, ge=100, le=200_000, validation_alias=_env("HISTORY_TOKEN_BUDGET")
    )
    message_max_chars: int = Field(
        default=4000, ge=1, le=100_000, validation_alias=_env("MESSAGE_MAX_CHARS")
    )
    lock_wait_seconds: float = Field(
        default=120.0, gt=0, validation_alias=_env("SESSION_LOCK_WAIT_SECONDS")
    )
    lease_seconds: float = Field(
        default=15.0, ge=3, le=600, validation_alias=_env("SESSION_LEASE_SECONDS")
    )


MAX_WORKER_CONCURRENCY = 10_000
"""The most chats one process may hold at once (``WORKER_CONCURRENCY``'s upper bound)."""


class WorkerSettings(BaseSettings):
    """Workers: how many chats one process drains at once.

    A chat in hand mostly waits for the model; one process has CPU for about 150
    turns a second (bench/README.md), so at a model latency of a few seconds it
    takes hundreds of chats in hand to use it. The bound keeps a burst waiting in
    Redis rather than in one process's memory.
    """

    model_config = _ENV

    # Unset: as many as the model's connections (LLM_MAX_CONNECTIONS), see chats_in_hand.
    concurrency: int | None = Field(
        default=None, ge=1, le=MAX_WORKER_CONCURRENCY, validation_alias=_env("WORKER_CONCURRENCY")
    )
    # A job whose runs kill their worker (or fail before an outcome) this often is given
    # up: a dead letter for staff, a kind failure message for the customer.
    job_max_attempts: int = Field(
        default=3, ge=1, le=100, validation_alias=_env("JOB_MAX_ATTEMPTS")
    )
    # The longest one job's run may take (a turn with its downloads, a press with its
    # action); past it the run is cancelled and counts as a failed attempt.
    job_deadline_seconds: float = Field(
        default=300.0, gt=0, le=3600, validation_alias=_env("JOB_DEADLINE_SECONDS")
    )

    def chats_in_hand(self, model_connections: int) -> int:
        """Chats one process drains at once: ``WORKER_CONCURRENCY``, else ``model_connections``.

        A chat in hand past the model's connections (``LLM_MAX_CONNECTIONS``) only queues
        for one. A lower bound split bursts badly between a poller and a worker: the
        worker, whose loop does no intake, read first, filled its slots, and the rest fell
        to the poller (bench/README.md, "Fifth round"). About 0.1 MiB a chat.
        """
        if self.concurrency is not None:
            return self.concurrency
        return min(model_connections, MAX_WORKER_CONCURRENCY)


class ToolSettings(BaseSettings):
    """The tool loop and the tools' data."""

    model_config = _ENV

    max_steps: int = Field(default=3, ge=1, le=5, validation_alias=_env("TOOL_MAX_STEPS"))
    max_calls_per_turn: int = Field(
        default=4, ge=1, le=20, validation_alias=_env("TOOL_MAX_CALLS_PER_TURN")
    )
    max_workers: int = Field(default=4, ge=1, le=64, validation_alias=_env("TOOL_MAX_WORKERS"))
    # One deadline for a whole turn (every model call, tool and stream): LLM_TIMEOUT_SECONDS
    # bounds only one wait, and a stream that drips (or sends keep-alives) never trips it.
    turn_deadline_seconds: float = Field(
        default=120.0, gt=0, le=3600, validation_alias=_env("TURN_DEADLINE_SECONDS")
    )
    data_path: Path = Field(default=DEMO_SHOP_DATA, validation_alias=_env("TOOL_DATA_PATH"))
    support_timezone: str | None = Field(default=None, validation_alias=_env("SUPPORT_TIMEZONE"))
    # The shop's lookup of a customer by phone number; set, /link and shared contacts link
    # the chat to the shop's customer (docs/shop.md). Unset: no linking.
    account_link_tool: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        validation_alias=_env("ACCOUNT_LINK_TOOL"),
    )
    # The help center search_help_center reads (Markdown articles; default: the demo one).
    knowledge_dir: Path = Field(default=DEMO_HELP_CENTER, validation_alias=_env("KNOWLEDGE_DIR"))
    knowledge_top_k: int = Field(default=3, ge=1, le=10, validation_alias=_env("KNOWLEDGE_TOP_K"))
    # How long a write the model proposed waits for the customer's button.
    action_confirm_seconds: float = Field(
        default=600.0, gt=0, le=86_400, validation_alias=_env("ACTION_CONFIRM_SECONDS")
    )
    # How long a confirmed press waits for a shop server that has not listed its tool yet
    # (at most 120 s: the press holds its chat meanwhile, well within JOB_DEADLINE_SECONDS).
    action_tool_wait_seconds: float = Field(
        default=30.0, ge=0, le=120, validation_alias=_env("ACTION_TOOL_WAIT_SECONDS")
    )
    # How often each process checks the directory for changes; 0: only on SIGHUP.
    knowledge_reload_seconds: float = Field(
        default=30.0, ge=0, le=86_400, validation_alias=_env("KNOWLEDGE_RELOAD_SECONDS")
    )

    @field_validator("account_link_tool", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("support_timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError) as error:
                raise ValueError(f"unknown time zone {value!r}") from error
        return value


_MCP_SERVER_NAME = r"^[a-z][a-z0-9_]{0,23}$"


class McpServerSettings(BaseModel):
    """One shop MCP server of ``MCP_SERVERS`` (one JSON object of the array).

    Secret header values are never written here: ``headers_from_env`` names the
    environment variable that holds each one (read once at start-up).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_MCP_SERVER_NAME)
    url: str | None = None
    command: str | None = None
    args: tuple[str, ...] = ()
    # Header name -> the environment variable holding its value (e.g. a bearer token).
    headers_from_env: dict[str, str] = Field(default_factory=dict)
    # The tools offered to the model; None: every tool the server lists.
    tools: tuple[str, ...] | None = None
    # Believe the server's readOnlyHint / idempotentHint (no button for its trusted reads).
    trust_annotations: bool = False
    timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    # Seconds between pings of an idle legacy session (0: none): a server that died
    # between calls is then found down (``/healthz``) before a customer's call meets it.
    ping_seconds: float = Field(default=15.0, ge=0, le=3600)
    # Argument name -> where the application takes its value from (never the model).
    bound_arguments: dict[str, Literal["user_id", "chat_id", "shop_customer_id"]] = Field(
        default_factory=dict
    )
    # Tool name -> the card's text, with {argument} placeholders (the shop's own wording).
    card_templates: dict[str, str] = Field(default_factory=dict)
    # auto: the newest protocol the server speaks; legacy: the 2025 initialize handshake
    # (sessions with ids) for a server that mishandles the newer probe.
    protocol: Literal["auto", "legacy"] = "auto"

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServerSettings":
        if (self.url is None) == (self.command is None):
            raise ValueError(f"MCP server {self.name!r} needs either url or command, not both")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"MCP server {self.name!r}: url must be http:// or https://")
        for tool, template in self.card_templates.items():
            try:
                fields = [field for _, field, _, _ in string.Formatter().parse(template) if field]
            except ValueError as error:
                raise ValueError(
                    f"MCP server {self.name!r}: card template of {tool} is not valid: {error}"
                ) from error
            if any(not field.isidentifier() for field in fields):
                raise ValueError(
                    f"MCP server {self.name!r}: card template of {tool} may name arguments only"
                )
        return self


class McpSettings(BaseSettings):
    """A shop's own tools over the Model Context Protocol."""

    model_config = _ENV

    # NoDecode: the text reaches _json_array below, which names MCP_SERVERS in its one line
    # (the sources' own decoding raised a traceback that never named it).
    servers: Annotated[tuple[McpServerSettings, ...], NoDecode] = Field(
        default=(), validation_alias=_env("MCP_SERVERS")
    )
    # auto: the demo shop's tools are offered only while no MCP server is configured.
    demo_shop_tools: Literal["auto", "on", "off"] = Field(
        default="auto", validation_alias=_env("DEMO_SHOP_TOOLS")
    )
    # One warning line at start-up when the tool definitions take more tokens than this.
    tools_token_warning: int = Field(
        default=4000, ge=0, validation_alias=_env("MCP_TOOLS_TOKEN_WARNING")
    )
    # A tool result longer than this (characters of JSON) is cut before the model reads it.
    result_max_chars: int = Field(
        default=8000, ge=500, le=200_000, validation_alias=_env("MCP_RESULT_MAX_CHARS")
    )
    # How long start-up waits for the servers before going on without the slow ones.
    connect_timeout_seconds: float = Field(
        default=10.0, gt=0, le=120, validation_alias=_env("MCP_CONNECT_TIMEOUT_SECONDS")
    )

    @field_validator("servers", mode="before")
    @classmethod
    def _json_array(cls, value: Any) -> Any:
        # From the environment, .env or a caller's values the array arrives as text.
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno} "
                    "(a trailing comma? an unquoted name?)"
                ) from error
        return value

    @field_validator("servers")
    @classmethod
    def _unique_names(cls, value: tuple[McpServerSettings, ...]) -> tuple[McpServerSettings, ...]:
        names = [server.name for server in value]
        if len(set(names)) != len(names):
            raise ValueError("MCP server names must be unique")
        return value

    def demo_tools_on(self) -> bool:
        """Whether the demo shop's order tools are registered."""
        if self.demo_shop_tools == "auto":
            return not self.servers
        return self.demo_shop_tools == "on"


def header_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent as an HTTP header value (never quoting it), else ``None``.

    A secret mounted from a file usually ends with a newline; the HTTP client would
    refuse it at every connection and print it whole in its error.
    """
    if not value:
        return "is empty"
    if value != value.strip():
        return (
            "starts or ends with a blank or a line break (a secret read from a file "
            "keeps its newline): remove it"
        )
    if any(ord(character) < 0x20 and character != "\t" for character in value) or "\x7f" in value:
        return "holds a line break or another control character"
    if not value.isascii():
        return "holds characters outside ASCII, which an HTTP header cannot carry"
    return None


def mcp_header_problems(mcp: McpSettings, environ: Mapping[str, str]) -> list[str]:
    """One line per secret header of ``MCP_SERVERS`` that cannot be sent (never its value).

    The values come from the variables ``headers_from_env`` names, in the process
    environment (``.env`` holds settings, not these secrets).
    """
    problems = []
    for server in mcp.servers:
        for header, variable in server.headers_from_env.items():
            where = f"MCP_SERVERS: server {server.name}: header {header}"
            value = environ.get(variable)
            if value is None or not value.strip():
                problems.append(
                    f"{where} needs the environment variable {variable}, which is not set "
                    "(headers_from_env reads the process environment, not .env)"
                )
                continue
            problem = header_value_problem(value)
            if problem is not None:
                problems.append(f"{where}: the value of {variable} {problem}")
    return problems


class AuditSettings(BaseSettings):
    """The audit stream."""

    model_config = _ENV

    stream: str = Field(
        default="support:audit", min_length=1, validation_alias=_env("AUDIT_STREAM")
    )
    stream_maxlen: int = Field(
        default=1_000_000, ge=1000, validation_alias=_env("AUDIT_STREAM_MAXLEN")
    )
    pseudonymize_chat_ids: bool = Field(
        default=False, validation_alias=_env("AUDIT_PSEUDONYMIZE_CHAT_IDS")
    )
    hmac_key: SecretStr | None = Field(default=None, validation_alias=_env("AUDIT_HMAC_KEY"))

    @model_validator(mode="after")
    def _key_for_pseudonyms(self) -> "AuditSettings":
        if self.pseudonymize_chat_ids and (
            self.hmac_key is None or len(self.hmac_key.get_secret_value()) < 16
        ):
            raise ValueError(
                "AUDIT_PSEUDONYMIZE_CHAT_IDS=true needs AUDIT_HMAC_KEY of at least 16 characters"
            )
        return self


class FloodSettings(BaseSettings):
    """Per-user rate limits and the daily cap of model turns."""

    model_config = _ENV

    burst: int = Field(default=5, ge=1, le=1000, validation_alias=_env("FLOOD_BURST"))
    interval_seconds: float = Field(
        default=3.0, gt=0, le=3600, validation_alias=_env("FLOOD_INTERVAL_SECONDS")
    )
    daily_turn_limit: int = Field(
        default=200, ge=1, le=1_000_000, validation_alias=_env("DAILY_TURN_LIMIT")
    )
    # How old a message's own date (by which the limit is charged) may be: an older one
    # counts as this old. Telegram keeps an unconfirmed update for 24 hours.
    backlog_seconds: float = Field(
        default=86_400, ge=0, le=7 * 86_400, validation_alias=_env("FLOOD_BACKLOG_SECONDS")
    )
    # A staff member's messages in customers' topics, counted in the staff group.
    staff_burst: int = Field(default=20, ge=1, le=1000, validation_alias=_env("STAFF_FLOOD_BURST"))
    staff_interval_seconds: float = Field(
        default=1.0, gt=0, le=3600, validation_alias=_env("STAFF_FLOOD_INTERVAL_SECONDS")
    )
    # Jobs one chat's queue may hold; past it messages are dropped (the customer is told).
    chat_queue_max: int = Field(
        default=50, ge=1, le=100_000, validation_alias=_env("CHAT_QUEUE_MAX")
    )


class HandoffSettings(BaseSettings):
    """Human handoff to staff in a forum supergroup (off while ``STAFF_CHAT_ID`` is unset)."""

    model_config = _ENV

    staff_chat_id: int | None = Field(default=None, validation_alias=_env("STAFF_CHAT_ID"))
    after_failed_turns: int = Field(
        default=3, ge=1, le=100, validation_alias=_env("HANDOFF_AFTER_FAILED_TURNS")
    )
    idle_minutes: float = Field(
        default=60.0, gt=0, le=7 * 24 * 60, validation_alias=_env("HANDOFF_IDLE_MINUTES")
    )
    # Staff assist: a suggested reply after each customer message a person answers.
    suggestions: Literal["on", "off"] = Field(
        default="on", validation_alias=_env("STAFF_SUGGESTIONS")
    )
    # The most one suggestion's drafting may take (model calls and tools together).
    suggestion_timeout_seconds: float = Field(
        default=30.0, gt=0, le=600, validation_alias=_env("STAFF_SUGGESTION_TIMEOUT_SECONDS")
    )
    # A conversation the bot handled alone scored below this (2-5) is posted for review.
    quality_review_below: int | None = Field(
        default=None, ge=2, le=5, validation_alias=_env("QUALITY_REVIEW_BELOW")
    )

    @field_validator("staff_chat_id")
    @classmethod
    def _supergroup(cls, value: int | None) -> int | None:
        if value is not None and value >= 0:
            raise ValueError("STAFF_CHAT_ID must be a supergroup id (negative, -100...)")
        return value


class CsatSettings(BaseSettings):
    """Customer satisfaction: one short question with five buttons after a conversation ends."""

    model_config = _ENV

    enabled: Literal["on", "off"] = Field(default="on", validation_alias=_env("CSAT"))
    # After the bot's last answer (each new answer restarts it); fractions allowed.
    after_idle_minutes: float = Field(
        default=30.0, gt=0, le=7 * 24 * 60, validation_alias=_env("CSAT_AFTER_IDLE_MINUTES")
    )
    # At most one question per chat in this time.
    min_interval_hours: float = Field(
        default=24.0, ge=0, le=365 * 24, validation_alias=_env("CSAT_MIN_INTERVAL_HOURS")
    )


LOCALES_DIR = Path(str(files("bot").joinpath("locales")))
"""Where the customer's texts' catalogs are: ``<lang>/LC_MESSAGES/messages.po``."""


def catalog_languages(locales: Path = LOCALES_DIR) -> tuple[str, ...]:
    """The languages with a catalog under ``locales`` (read at start by bot.language.catalogs)."""
    return tuple(sorted(po.parent.parent.name for po in locales.glob("*/LC_MESSAGES/messages.po")))


class LanguageSettings(BaseSettings):
    """The customer's languages: each needs a catalog under ``locales/`` (checked at start)."""

    model_config = _ENV

    # Comma-separated language codes (ISO 639-1), the order /language lists them in.
    languages: str = Field(default="ru,en", validation_alias=_env("LANGUAGES"))
    # A conversation's language until the customer's own words or Telegram say otherwise.
    default_language: str = Field(default="ru", validation_alias=_env("DEFAULT_LANGUAGE"))

    @field_validator("languages")
    @classmethod
    def _codes(cls, value: str) -> str:
        codes = [code.strip().lower() for code in value.split(",") if code.strip()]
        if not codes:
            raise ValueError("LANGUAGES: name at least one language code, such as ru,en")
        bad = [code for code in codes if not code.isascii() or not code.isalpha()]
        if bad:
            raise ValueError(f"LANGUAGES: {', '.join(bad)} is not a language code such as ru or en")
        # Here, not when the catalogs are read: a missing one is a setting (exit 2), found
        # before Redis and Telegram are contacted.
        known = catalog_languages()
        missing = [code for code in codes if code not in known]
        if missing:
            raise ValueError(
                f"LANGUAGES: no catalog for {', '.join(missing)} "
                f"(catalogs: {', '.join(known) or 'none'}; "
                "add bot/locales/<lang>/LC_MESSAGES/messages.po)"
            )
        return ",".join(dict.fromkeys(codes))

    @model_validator(mode="after")
    def _default_enabled(self) -> "LanguageSettings":
        self.default_language = self.default_language.strip().lower()
        if self.default_language not in self.codes:
            raise ValueError(
                f"DEFAULT_LANGUAGE: {self.default_language!r} "
                f"is not among LANGUAGES ({self.languages})"
            )
        return self

    @property
    def codes(self) -> tuple[str, ...]:
        """The enabled language codes, in the order given."""
        return tuple(self.languages.split(","))


class MediaSettings(BaseSettings):
    """Voice messages (transcribed) and photos (shown to a model that reads images)."""

    model_config = _ENV

    # Longer voice messages are refused before anything is downloaded (Telegram's duration).
    voice_max_seconds: int = Field(
        default=120, ge=1, le=3600, validation_alias=_env("VOICE_MAX_SECONDS")
    )
    transcription_model: str = Field(
        default="gpt-4o-mini-transcribe",
        min_length=1,
        validation_alias=_env("TRANSCRIPTION_MODEL"),
    )
    # The customers' language, told to the transcription model as a hint (ISO 639-1).
    transcription_language: str = Field(
        default="ru", pattern=r"^[a-z]{2}$", validation_alias=_env("TRANSCRIPTION_LANGUAGE")
    )
    # on: photos go to the model as image parts (a model that reads images); off: the bot
    # says it cannot look at photos.
    vision: Literal["on", "off"] = Field(default="off", validation_alias=_env("VISION"))
    # The largest image sent to the model: the largest size of a photo within it is taken.
    image_max_bytes: int = Field(
        default=5 * 1024 * 1024,
        ge=10_000,
        le=20 * 1024 * 1024,
        validation_alias=_env("IMAGE_MAX_BYTES"),
    )
    # The images of one turn (an album) together at most: past it photos are taken in smaller
    # sizes, and what still does not fit is left out; the model reads how many, to say so.
    image_turn_max_bytes: int = Field(
        default=10 * 1024 * 1024,
        ge=10_000,
        le=50 * 1024 * 1024,
        validation_alias=_env("IMAGE_TURN_MAX_BYTES"),
    )


class AnalysisSettings(BaseSettings):
    """The request analysis: category, sentiment, urgency and a summary for staff, by the model."""

    model_config = _ENV

    enabled: Literal["on", "off"] = Field(default="on", validation_alias=_env("ANALYSIS"))
    # A cheaper model is the usual choice; unset: LLM_MODEL.
    model: str | None = Field(default=None, min_length=1, validation_alias=_env("ANALYSIS_MODEL"))
    # The shop's categories, comma-separated (lower-case words with underscores).
    categories: str = Field(
        default=",".join(DEFAULT_CATEGORIES), validation_alias=_env("ANALYSIS_CATEGORIES")
    )
    # The most a single analysis may take (it never runs on a customer's turn).
    timeout_seconds: float = Field(
        default=30.0, gt=0, le=600, validation_alias=_env("ANALYSIS_TIMEOUT_SECONDS")
    )
    # Analyses one process runs at once after a burst of idle conversations.
    concurrency: int = Field(
        default=16, ge=1, le=1000, validation_alias=_env("ANALYSIS_CONCURRENCY")
    )
    # An angry, urgent customer is offered a person once per conversation (staff group only).
    escalation: Literal["on", "off"] = Field(
        default="on", validation_alias=_env("ANALYSIS_ESCALATION")
    )

    @field_validator("categories")
    @classmethod
    def _categories(cls, value: str) -> str:
        names = [name.strip() for name in value.split(",") if name.strip()]
        if not names:
            raise ValueError("ANALYSIS_CATEGORIES needs at least one category")
        bad = [name for name in names if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", name)]
        if bad:
            raise ValueError(
                f"ANALYSIS_CATEGORIES: {', '.join(bad)} is not a lower-case word (a-z, 0-9, _)"
            )
        return ",".join(dict.fromkeys(names))

    @property
    def category_names(self) -> tuple[str, ...]:
        """The categories, in the order given."""
        return tuple(self.categories.split(","))


class PromptSettings(BaseSettings):
    """Which prompt versions are active."""

    model_config = _ENV

    support_chat_version: str = Field(
        default="1.7.0", validation_alias=_env("PROMPT_SUPPORT_CHAT_VERSION")
    )
    summary_version: str = Field(default="1.1.0", validation_alias=_env("PROMPT_SUMMARY_VERSION"))
    analysis_version: str = Field(default="1.1.0", validation_alias=_env("PROMPT_ANALYSIS_VERSION"))


class EvalSettings(BaseSettings):
    """``python -m bot eval``'s simulated customer: a model of its own, the bot's by default."""

    model_config = _ENV

    customer_model: str | None = Field(
        default=None, min_length=1, validation_alias=_env("EVAL_CUSTOMER_MODEL")
    )
    customer_base_url: str | None = Field(
        default=None, validation_alias=_env("EVAL_CUSTOMER_BASE_URL")
    )
    customer_api_key: SecretStr | None = Field(
        default=None, validation_alias=_env("EVAL_CUSTOMER_API_KEY")
    )


class _ModelChoice(BaseSettings):
    """Whether ``LLM_BACKEND`` and ``OPENAI_API_KEY`` are set, read as the sections read them."""

    model_config = _ENV

    backend: str | None = Field(default=None, validation_alias=_env("LLM_BACKEND"))
    api_key: SecretStr | None = Field(default=None, validation_alias=_env("OPENAI_API_KEY"))


def offline_by_default(env_file: str | None = ".env") -> bool:
    """Whether neither ``LLM_BACKEND`` nor ``OPENAI_API_KEY`` is set (environment or ``.env``).

    Then the console tries the bot with the offline demo model instead of exiting;
    the Telegram modes still need a key or an explicit ``LLM_BACKEND=offline``.
    """
    choice = _ModelChoice(_env_file=env_file)
    key = choice.api_key.get_secret_value().strip() if choice.api_key is not None else ""
    return choice.backend is None and not key


class Settings(BaseModel):
    """Every section, read from the environment at once."""

    telegram: TelegramSettings
    webhook: WebhookSettings
    llm: LLMSettings
    redis: RedisSettings
    session: SessionSettings
    worker: WorkerSettings
    tools: ToolSettings
    audit: AuditSettings
    flood: FloodSettings
    prompts: PromptSettings
    handoff: HandoffSettings = Field(default_factory=lambda: HandoffSettings(_env_file=None))
    health: HealthSettings = Field(default_factory=lambda: HealthSettings(_env_file=None))
    supervision: SupervisionSettings = Field(
        default_factory=lambda: SupervisionSettings(_env_file=None)
    )
    csat: CsatSettings = Field(default_factory=lambda: CsatSettings(_env_file=None))
    analysis: AnalysisSettings = Field(default_factory=lambda: AnalysisSettings(_env_file=None))
    mcp: McpSettings = Field(default_factory=lambda: McpSettings(_env_file=None))
    media: MediaSettings = Field(default_factory=lambda: MediaSettings(_env_file=None))
    language: LanguageSettings = Field(default_factory=lambda: LanguageSettings(_env_file=None))
    evaluation: EvalSettings = Field(default_factory=lambda: EvalSettings(_env_file=None))
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"

    @classmethod
    def from_env(
        cls, values: Mapping[str, object] | None = None, *, env_file: str | None = ".env"
    ) -> "Settings":
        """Read every section; raises :class:`SettingsError` listing every problem at once.

        ``values`` (variable names as in ``.env``) take precedence over the
        environment; ``env_file=None`` skips ``.env`` (tests, benchmarks).
        """
        given: dict[str, Any] = dict(values or {})
        sections: dict[str, BaseSettings] = {}
        problems: list[str] = []
        for name, section in SETTINGS_SECTIONS.items():
            try:
                sections[name] = section(_env_file=env_file, **given)
            except ValidationError as error:
                problems.extend(describe_settings_error(error))
            except SourceError as error:
                # A source could not read a value at all (JSON it decodes itself).
                problems.append(describe_source_error(section, error))
        if problems:
            raise SettingsError(problems, sections)
        log = sections.pop("log")
        assert isinstance(log, _LogSettings)  # noqa: S101 - narrows the type for mypy
        return cls.model_validate({**sections, "log_level": log.level, "log_format": log.format})


class SettingsError(ValueError):
    """Invalid configuration; ``problems`` has one line per problem.

    ``sections`` holds the sections that were valid (by name, as in
    :data:`SETTINGS_SECTIONS`), so that a caller's own checks of them are
    reported with these problems, all at once.
    """

    def __init__(
        self, problems: list[str], sections: Mapping[str, BaseSettings] | None = None
    ) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
        self.sections: Mapping[str, BaseSettings] = dict(sections or {})


class _LogSettings(BaseSettings):
    model_config = _ENV

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", validation_alias=_env("LOG_LEVEL")
    )
    format: Literal["text", "json"] = Field(default="text", validation_alias=_env("LOG_FORMAT"))


def _check_proxy(value: SecretStr | None) -> SecretStr | None:
    """A proxy URL the clients can use; the message never quotes it (it may hold a password)."""
    if value is not None:
        try:
            normalise_proxy_url(value.get_secret_value())
        except ProxyURLError as error:
            raise ValueError(str(error)) from error
    return value


def describe_settings_error(error: ValidationError) -> list[str]:
    """One line per problem, naming the environment variable (never its value)."""
    lines = []
    for problem in error.errors(include_input=False, include_url=False):
        name = ".".join(str(part) for part in problem["loc"])
        message = str(problem["msg"]).removeprefix("Value error, ")
        named = not name or message.startswith(f"{name}:")
        lines.append(message if named else f"{name}: {message}")
    return lines


_SOURCE_FIELD = re.compile(r'field "([^"]+)"')


def describe_source_error(section: type[BaseSettings], error: SourceError) -> str:
    """One line for a value a settings source could not read, naming its variable.

    pydantic-settings says which field in its message only; the variable is the
    field's alias. Never the value (it may hold a secret).
    """
    match = _SOURCE_FIELD.search(str(error))
    field = section.model_fields.get(match.group(1)) if match else None
    alias = field.validation_alias if field is not None else None
    if isinstance(alias, AliasChoices):
        return f"{alias.choices[0]}: cannot be read: not valid JSON"
    return f"a setting of {section.__name__} cannot be read: {error}"


SETTINGS_SECTIONS: dict[str, type[BaseSettings]] = {
    "telegram": TelegramSettings,
    "webhook": WebhookSettings,
    "llm": LLMSettings,
    "redis": RedisSettings,
    "session": SessionSettings,
    "worker": WorkerSettings,
    "tools": ToolSettings,
    "audit": AuditSettings,
    "flood": FloodSettings,
    "prompts": PromptSettings,
    "handoff": HandoffSettings,
    "health": HealthSettings,
    "supervision": SupervisionSettings,
    "csat": CsatSettings,
    "analysis": AnalysisSettings,
    "mcp": McpSettings,
    "media": MediaSettings,
    "language": LanguageSettings,
    "evaluation": EvalSettings,
    "log": _LogSettings,
}
