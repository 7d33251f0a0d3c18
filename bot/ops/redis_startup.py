"""Connecting to Redis at start-up: the one check every mode runs, before the heavy imports.

Import-light on purpose (redis-py and the settings only): ``python -m bot`` runs it
before aiogram and the model SDK are imported, so an unreachable Redis is one line
and exit 1 in about a second (see :mod:`bot.telegram.preflight`).
"""

from redis.exceptions import RedisError

from bot.ops.startup import StartupError
from bot.settings import Settings
from bot.storage.connection import AsyncRedisClient, RedisSetupError, async_client, describe_target
from bot.storage.health import RedisHealthProbe


async def connect_redis(settings: Settings) -> AsyncRedisClient:
    """A client for ``REDIS_MODE`` whose node(s) are writable masters, or :class:`StartupError`.

    Refuses a Sentinel, a replica, a cluster node in standalone mode and a
    cluster whose ``cluster_state`` is not ok: each would pass PING and then
    fail every turn.
    """
    where = describe_target(settings.redis)
    try:
        client = async_client(settings.redis)
    except RedisSetupError as error:
        raise StartupError(str(error)) from error
    try:
        await client.ping()
        if settings.redis.mode == "standalone":
            cluster_info = await client.info("cluster")
            if str(cluster_info.get("cluster_enabled", 0)) == "1":
                raise StartupError(f"Redis at {where} is a cluster node: set REDIS_MODE=cluster")
    except StartupError:
        await client.aclose()
        raise
    except (RedisError, OSError) as error:
        await client.aclose()
        raise StartupError(
            f"Redis is unreachable at {where}: {redis_failure(error, settings)}"
        ) from error
    health = await RedisHealthProbe(
        client,
        key_prefix=settings.redis.key_prefix,
        timeout_seconds=settings.redis.socket_timeout_seconds,
    ).check()
    if not health.writable:
        await client.aclose()
        raise StartupError(f"Redis at {where} cannot take the bot's writes: {health.detail}")
    return client


def redis_failure(error: Exception, settings: Settings) -> str:
    """Why Redis did not answer, on one line: the error's kind and text, no password."""
    reason = " ".join(str(error).split())[:200]
    redis = settings.redis
    _, _, rest = redis.url.get_secret_value().partition("://")
    userinfo, at, _ = rest.rpartition("@")
    secrets = [userinfo.partition(":")[2] if at else ""]
    secrets += [s.get_secret_value() for s in (redis.password, redis.sentinel_password) if s]
    for secret in filter(None, secrets):
        reason = reason.replace(secret, "***")
    return f"{type(error).__name__}: {reason}" if reason else type(error).__name__


async def check_redis(settings: Settings) -> None:
    """What :func:`connect_redis` checks, with the client closed again: a mode's first check.

    ``build_application`` connects again the same way; the second check is cheap and
    catches a Redis that went away in between.
    """
    client = await connect_redis(settings)
    await client.aclose()
