"""Is the Redis the bot writes to a writable master right now? For start-up and ``/healthz``."""

import asyncio
import os
import re
from dataclasses import dataclass

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisError, ResponseError

from bot.storage.connection import AsyncRedisClient, text_of

# Long enough to outlive one check, short enough that probe keys never pile up.
PROBE_TTL_MS = 10_000
# How Redis names an error it replies with: upper-case letters, first in the reply.
_ERROR_CODE = re.compile(r"[A-Z]{2,32}")


@dataclass(frozen=True, kw_only=True, slots=True)
class RedisHealth:
    """The verdict: ``writable`` only when every node in use took a write; ``detail`` says why."""

    writable: bool
    detail: str


class RedisHealthProbe:
    """Checks the node(s) in use: ``ROLE`` is master and a small ``SET`` with a TTL succeeds.

    A read-only replica, a Sentinel, a cluster whose ``cluster_state`` is not
    ``ok`` and a master refusing writes (``maxmemory`` with ``noeviction``) are
    all unhealthy. On a cluster every master is checked with a key of its own slots.
    """

    def __init__(
        self, client: AsyncRedisClient, *, key_prefix: str, timeout_seconds: float
    ) -> None:
        self._client = client
        self._prefix = f"{key_prefix}:health:{os.getpid()}"
        self._timeout = timeout_seconds

    async def check(self) -> RedisHealth:
        """Run the checks, bounded by the timeout; never raises for a Redis problem."""
        try:
            async with asyncio.timeout(self._timeout):
                if isinstance(self._client, RedisCluster):
                    return await self._check_cluster(self._client)
                return await self._check_node(self._client, None)
        except TimeoutError:
            return RedisHealth(writable=False, detail=f"no answer within {self._timeout} s")
        except (RedisError, OSError) as error:
            return RedisHealth(writable=False, detail=f"unreachable: {error_kind(error)}")

    async def _check_cluster(self, client: RedisCluster) -> RedisHealth:
        info = await client.cluster_info(target_nodes=RedisCluster.DEFAULT_NODE)
        state = text_of(info.get("cluster_state", "unknown"))
        if state != "ok":
            return RedisHealth(writable=False, detail=f"cluster_state is {state}")
        masters = client.get_primaries()
        for node in masters:
            verdict = await self._check_node(client, node)
            if not verdict.writable:
                return RedisHealth(writable=False, detail=f"{node.name}: {verdict.detail}")
        return RedisHealth(writable=True, detail=f"cluster ok, {len(masters)} writable masters")

    async def _check_node(self, client: AsyncRedisClient, node: ClusterNode | None) -> RedisHealth:
        if node is not None and isinstance(client, RedisCluster):
            role_reply = await client.execute_command("ROLE", target_nodes=node)
        else:
            role_reply = await client.execute_command("ROLE")
        role = text_of(role_reply[0])
        if role == "sentinel":
            return RedisHealth(writable=False, detail="this is a Sentinel, not a data node")
        if role != "master":
            return RedisHealth(writable=False, detail=f"this is a read-only {_role_name(role)}")
        key = self._probe_key(client, node)
        try:
            await client.set(key, b"1", px=PROBE_TTL_MS)
        except RedisError as error:
            return RedisHealth(writable=False, detail=f"refuses writes: {error_kind(error)}")
        return RedisHealth(writable=True, detail="writable master")

    def _probe_key(self, client: AsyncRedisClient, node: ClusterNode | None) -> str:
        if node is None or not isinstance(client, RedisCluster):
            return self._prefix
        # A hash tag whose slot this master serves, so the write lands on it and no other.
        for tag in range(100_000):
            key = f"{self._prefix}:{{{tag}}}"
            owner = client.get_node_from_key(key)
            if owner is not None and owner.name == node.name:
                return key
        return self._prefix


def _role_name(role: str) -> str:
    return "replica" if role == "slave" else role


def error_kind(error: BaseException) -> str:
    """The kind of ``error``, never its text (which names hosts, ports, keys and settings).

    A reply redis-py has no class for (``NOREPLICAS``, ``MISCONF``) is a plain
    ``ResponseError``: Redis's own error code, the reply's first word, says which.
    """
    kind = type(error).__name__
    if type(error) is ResponseError:
        code = str(error).split(maxsplit=1)[:1]
        if code and _ERROR_CODE.fullmatch(code[0]):
            return f"{kind} {code[0]}"
    return kind
