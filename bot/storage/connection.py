"""One place that turns :class:`RedisSettings` into a Redis client: standalone, Cluster or Sentinel.

The bot, the staff CLI and the benchmarks all build their clients here, so that
``REDIS_MODE`` means the same thing everywhere.
"""

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeAlias

import redis
import redis.asyncio as aioredis
import redis.asyncio.cluster as aiocluster
import redis.asyncio.sentinel as aiosentinel
import redis.cluster
import redis.sentinel
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.connection import parse_url
from redis.driver_info import DriverInfo
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry as SyncRetry

from bot.settings import RedisSettings
from bot.storage.redaction import redacted_url

AsyncRedisClient: TypeAlias = "aioredis.Redis | aiocluster.RedisCluster"
SyncRedisClient: TypeAlias = "redis.Redis | redis.cluster.RedisCluster"


def text_of(value: object) -> str:
    """A Redis reply value as text: bytes decoded (UTF-8), ``None`` as ``""``, else ``str()``."""
    if isinstance(value, bytes):
        return value.decode()
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


# How long a command may wait for a free connection. Longer than the socket
# timeout on purpose: under a CPU-saturating burst, turns should queue for a
# connection, not fail; a Redis that is down still fails at connect.
POOL_WAIT_SECONDS = 30.0


class RedisSetupError(ValueError):
    """The settings cannot make a client (bad URL, bad TLS file); ``str()`` is one line."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """How often redis-py re-sends a command by itself.

    Only connection errors are retried: the command most likely never reached
    the server, and every script of the bot is safe to run twice. A timed-out
    command may have run, so it is never re-sent blindly (an audit ``XADD``
    would be written twice); the caller decides. Cluster clients also retry on
    ``CLUSTERDOWN`` and unknown slots after re-reading the topology.
    """

    retries: int = 2
    on_timeout: bool = False

    def _errors(self) -> tuple[type[redis.RedisError], ...]:
        # redis-py wraps socket errors in its own ConnectionError and TimeoutError.
        if self.on_timeout:
            return (RedisConnectionError, redis.TimeoutError)
        return (RedisConnectionError,)

    def build_async(self) -> AsyncRetry:
        """The asyncio client's :class:`Retry`."""
        if self.retries == 0:
            return AsyncRetry(NoBackoff(), 0)
        return AsyncRetry(
            ExponentialBackoff(cap=0.5, base=0.05), self.retries, supported_errors=self._errors()
        )

    def build_sync(self) -> SyncRetry:
        """The synchronous client's :class:`Retry`."""
        if self.retries == 0:
            return SyncRetry(NoBackoff(), 0)
        return SyncRetry(
            ExponentialBackoff(cap=0.5, base=0.05), self.retries, supported_errors=self._errors()
        )


async def handshake(connection: aioredis.Connection) -> None:
    """A new connection's handshake (``HELLO``...), without a ``PING`` before it.

    With a health-check interval, redis-py checks a connection before a command once
    the interval has passed since its last reply, and a new connection has had none:
    it sent a ``PING`` before its ``HELLO``, a round trip more on every connection a
    burst opens (hundreds: 0.37 commands a customer in a burst of 1,000,
    bench/README.md "Issue 49"). The handshake's reply shows the connection works; the
    checks before later commands are as before.
    """
    await connection.on_connect_check_health(check_health=False)


class BoundedRedisCluster(aiocluster.RedisCluster):
    """A :class:`RedisCluster` on which a burst queues instead of failing.

    redis-py's cluster client has no blocking pool: past ``max_connections`` to
    one node it raises at once. Here at most ``max_connections`` commands (a
    pipeline counts as one) are in flight at a time, so no node can run out;
    the rest wait up to ``pool_wait_seconds`` for their turn.
    """

    def __init__(self, *, pool_wait_seconds: float = POOL_WAIT_SECONDS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Commands sent to every node take one connection on each, never more.
        self._slots = asyncio.Semaphore(int(kwargs.get("max_connections", 100)))
        self._pool_wait = pool_wait_seconds
        # redis-py 8.1 loses commands of a first concurrent burst on a client that has
        # not read the topology: the first command reads it, alone, before any other.
        self._topology_read = False
        self._first_read = asyncio.Lock()

    async def _slot(self) -> None:
        if not self._topology_read:
            async with self._first_read:
                if not self._topology_read:
                    await self.initialize()
                    self._topology_read = True
        try:
            async with asyncio.timeout(self._pool_wait):
                await self._slots.acquire()
        except TimeoutError as error:
            raise RedisConnectionError("No connection available.") from error

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        """Run one command once a slot is free."""
        return await self._in_slot(partial(super().execute_command, *args, **kwargs))

    def pipeline(
        self, transaction: Any | None = None, shard_hint: Any | None = None
    ) -> aiocluster.ClusterPipeline:
        """A pipeline whose ``execute`` takes one slot."""
        return _BoundedClusterPipeline(self, transaction)  # type: ignore[abstract]

    async def _execute_pipeline(
        self, pipe: aiocluster.ClusterPipeline, *args: Any, **kwargs: Any
    ) -> Any:
        return await self._in_slot(
            partial(aiocluster.ClusterPipeline.execute, pipe, *args, **kwargs)
        )

    async def _in_slot(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``call`` in a slot; a topology refresh's ``AttributeError`` is a lost connection."""
        await self._slot()
        try:
            return await call()
        except AttributeError as error:
            if not _inside_redis_py(error):
                raise
            raise RedisConnectionError("Connection closed by a topology refresh.") from error
        finally:
            self._slots.release()


def _inside_redis_py(error: AttributeError) -> bool:
    """Whether ``error`` is redis-py 8.1's for a connection closed under a command.

    When a node fails, the cluster client reads the topology again and
    disconnects connections other commands are using; those fail inside
    redis-py with ``AttributeError`` (the connection's writer or reader is
    gone) instead of a ``ConnectionError``. Raised anywhere else, it is a bug.
    """
    traceback = error.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    module = traceback.tb_frame.f_globals.get("__name__", "") if traceback is not None else ""
    return isinstance(module, str) and module.startswith("redis.")


class _BoundedClusterPipeline(aiocluster.ClusterPipeline):
    def __init__(self, client: BoundedRedisCluster, transaction: Any | None = None) -> None:
        super().__init__(client, transaction)
        self._bounded = client

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        """Send the queued commands once a slot of the client is free."""
        return await self._bounded._execute_pipeline(self, *args, **kwargs)


class _BlockingSentinelPool(aiosentinel.SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """The master's pool of a Sentinel client, blocking like the standalone one."""


class _SentinelMaster(aioredis.Redis):
    """The master of a Sentinel service; closing it also closes the Sentinel connections."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        """Close the master's pool, then the connections to the Sentinels."""
        await super().aclose(close_connection_pool)
        if isinstance(self.connection_pool, aiosentinel.SentinelConnectionPool):
            await self.connection_pool.sentinel_manager.aclose()


@dataclass(frozen=True, kw_only=True, slots=True)
class _Common:
    """Connection options every mode shares, read from the settings once."""

    db: int
    username: str | None
    password: str | None
    tls: dict[str, Any]

    def client_options(self, timeout: float, decode_responses: bool) -> dict[str, Any]:
        """Keyword arguments every client takes alike, asyncio or synchronous."""
        return {
            # What CLIENT SETINFO tells the server, resolved once per client: left to
            # the pool, every new connection reads redis-py's version from its package
            # metadata on disk (a burst opens hundreds of connections).
            "driver_info": DriverInfo(),
            "username": self.username,
            "password": self.password,
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "decode_responses": decode_responses,
            **self.tls,
        }


def _common(settings: RedisSettings) -> _Common:
    url = settings.url.get_secret_value()
    try:
        parsed: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
    except ValueError as error:
        raise RedisSetupError(f"REDIS_URL is not a valid Redis URL: {redacted_url(url)}") from error
    password = (
        settings.password.get_secret_value()
        if settings.password is not None
        else parsed.get("password")
    )
    tls: dict[str, Any] = {}
    if settings.tls or url.startswith("rediss://"):
        tls["ssl"] = True
        if settings.tls_ca_file is not None:
            try:
                # Loads the file now so that a typo shows at start-up, not at first connect.
                ssl.create_default_context(cafile=str(settings.tls_ca_file))
            except (OSError, ssl.SSLError) as error:
                raise RedisSetupError(
                    f"REDIS_TLS_CA_FILE {settings.tls_ca_file} cannot be loaded: {error}"
                ) from error
            tls["ssl_ca_certs"] = str(settings.tls_ca_file)
    return _Common(
        db=int(parsed.get("db", 0) or 0),
        username=parsed.get("username"),
        password=password,
        tls=tls,
    )


def _host_port(settings: RedisSettings) -> tuple[str, int]:
    parsed: dict[str, Any] = parse_url(settings.url.get_secret_value())  # type: ignore[no-untyped-call]
    return str(parsed.get("host", "localhost")), int(parsed.get("port", 6379))


def _sentinel_kwargs(settings: RedisSettings, common: _Common) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "socket_timeout": settings.socket_timeout_seconds,
        "socket_connect_timeout": settings.socket_timeout_seconds,
        **common.tls,
    }
    if settings.sentinel_password is not None:
        kwargs["password"] = settings.sentinel_password.get_secret_value()
    return kwargs


def async_client(
    settings: RedisSettings,
    *,
    retry: RetryPolicy | None = None,
    max_connections: int | None = None,
    pool_wait_seconds: float = POOL_WAIT_SECONDS,
    decode_responses: bool = False,
) -> AsyncRedisClient:
    """An asyncio client for ``REDIS_MODE``; nothing is contacted yet.

    Every mode queues a burst for a free connection (up to ``pool_wait_seconds``)
    instead of failing it. Raises :class:`RedisSetupError` on bad settings.
    """
    common = _common(settings)
    policy = retry or RetryPolicy(retries=settings.retries)
    timeout = settings.socket_timeout_seconds
    connections = max_connections or settings.max_connections
    options = common.client_options(timeout, decode_responses)
    if settings.mode == "cluster":
        if common.db:
            raise RedisSetupError("REDIS_URL names a database other than 0; a cluster has only 0")
        host, port = _host_port(settings)
        return BoundedRedisCluster(
            host=host,
            port=port,
            max_connections=connections,
            pool_wait_seconds=pool_wait_seconds,
            retry=policy.build_async(),
            **options,
        )
    options["health_check_interval"] = 30
    options["retry"] = policy.build_async()
    if settings.mode == "sentinel":
        sentinel = aiosentinel.Sentinel(  # type: ignore[no-untyped-call]
            settings.sentinel_addresses(),
            sentinel_kwargs=_sentinel_kwargs(settings, common),
        )
        master: aioredis.Redis = sentinel.master_for(
            settings.sentinel_service,
            redis_class=_SentinelMaster,
            connection_pool_class=_BlockingSentinelPool,
            max_connections=connections,
            timeout=max(timeout, pool_wait_seconds),
            db=common.db,
            **options,
        )
        return master
    host, port = _host_port(settings)
    pool = aioredis.BlockingConnectionPool(
        host=host,
        port=port,
        db=common.db,
        max_connections=connections,
        timeout=max(timeout, pool_wait_seconds),
        connection_class=aioredis.SSLConnection if common.tls else aioredis.Connection,
        redis_connect_func=handshake,
        **{key: value for key, value in options.items() if key != "ssl"},
    )
    return aioredis.Redis.from_pool(pool)


def sync_client(
    settings: RedisSettings,
    *,
    retry: RetryPolicy | None = None,
    decode_responses: bool = True,
) -> SyncRedisClient:
    """A synchronous client for ``REDIS_MODE`` (the staff CLI); nothing is contacted yet.

    No retries by default: a command line should fail at once, not after a pause.
    """
    common = _common(settings)
    policy = retry or RetryPolicy(retries=0)
    timeout = settings.socket_timeout_seconds
    options = common.client_options(timeout, decode_responses)
    options["retry"] = policy.build_sync()
    if settings.mode == "cluster":
        if common.db:
            raise RedisSetupError("REDIS_URL names a database other than 0; a cluster has only 0")
        host, port = _host_port(settings)
        return redis.cluster.RedisCluster(host=host, port=port, **options)
    if settings.mode == "sentinel":
        sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            settings.sentinel_addresses(),
            sentinel_kwargs=_sentinel_kwargs(settings, common),
        )
        master: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
            settings.sentinel_service, redis_class=redis.Redis, db=common.db, **options
        )
        return master
    host, port = _host_port(settings)
    return redis.Redis(host=host, port=port, db=common.db, **options)


def describe_target(settings: RedisSettings) -> str:
    """Where the client goes, for logs and one-line errors (no password)."""
    if settings.mode == "sentinel":
        return f"sentinel service {settings.sentinel_service!r} via " + ",".join(
            f"{host}:{port}" for host, port in settings.sentinel_addresses()
        )
    shown = redacted_url(settings.url.get_secret_value())
    return f"cluster via {shown}" if settings.mode == "cluster" else shown


async def every_master(client: AsyncRedisClient) -> list[dict[str, Any]]:
    """Keyword arguments that send a command to each master in turn.

    On a cluster, ``KEYS``, ``INFO``, ``CONFIG RESETSTAT`` and ``FLUSHDB`` answer
    for one node only unless sent to each; a standalone client has one target.
    """
    if isinstance(client, aiocluster.RedisCluster):
        # The node list is empty until the client has read the topology.
        await client.initialize()
        return [{"target_nodes": node} for node in client.get_primaries()]
    return [{}]
