"""A script call with named KEYS and ARGV, and the runner that sends it."""

from collections.abc import Sequence
from typing import Any, ClassVar

from bot.storage.connection import AsyncRedisClient

Arg = str | bytes | int | float
"""One ARGV value as redis-py encodes it."""


class LuaScript:
    """One call of a Lua script: subclasses are frozen dataclasses naming every KEY and ARGV.

    ``SOURCE`` is the Lua text; ``keys()`` and ``args()`` give the fields in
    the order it reads them (``KEYS[1]`` first).
    """

    __slots__ = ()
    SOURCE: ClassVar[str]

    def keys(self) -> list[str]:
        """``KEYS``, in order."""
        raise NotImplementedError

    def args(self) -> list[Arg]:
        """``ARGV``, in order."""
        raise NotImplementedError


class Scripts:
    """Runs script calls on one client; each script is loaded once, then called by its SHA."""

    def __init__(self, redis: AsyncRedisClient) -> None:
        self._redis = redis
        self._registered: dict[type[LuaScript], Any] = {}

    async def run(self, call: LuaScript) -> Any:
        """Run ``call``; its reply as Redis gives it (each wrapper says what it returns)."""
        script = self._registered.get(type(call))
        if script is None:
            script = self._redis.register_script(call.SOURCE)
            self._registered[type(call)] = script
        return await script(keys=call.keys(), args=call.args())


def flag(value: bool) -> int:
    """A boolean as the scripts read it (``'1'`` or ``'0'``)."""
    return 1 if value else 0


def pairs(items: Sequence[tuple[str, str]]) -> list[Arg]:
    """``[(a, b), ...]`` flattened to ``[a, b, ...]``."""
    return [part for item in items for part in item]
