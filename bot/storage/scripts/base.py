"""A script call with named KEYS and ARGV, and the runner that sends it."""

import asyncio
from dataclasses import Field, fields
from enum import Enum
from typing import Annotated, Any, ClassVar, TypeVar

from bot.storage.connection import AsyncRedisClient, SyncRedisClient

Arg = str | bytes | int | float
"""One ARGV value as redis-py encodes it."""


class _Role(Enum):
    """What a script's field is in its call."""

    KEY = "KEY"
    ARGV = "ARGV"


_T = TypeVar("_T")

Key = Annotated[str, _Role.KEY]
"""A script field that is one of its ``KEYS``: ``stream: Key``."""

Argv = Annotated[_T, _Role.ARGV]
"""A script field that is one of its ``ARGV``: ``maxlen: Argv[int]`` (a ``bool`` goes as 1 or 0)."""


class LuaScript:
    """One call of a Lua script: subclasses are frozen dataclasses naming every KEY and ARGV.

    ``SOURCE`` is the Lua text. Its ``KEYS`` are the fields typed :data:`Key`
    and its ``ARGV`` the fields typed :data:`Argv`, each in the order they are
    declared, which is the order the Lua text reads them (``KEYS[1]`` first).
    A script whose KEYS or ARGV are built from a field (a conversation's
    :class:`~bot.storage.keys.ConversationKeys`, the audit index) overrides
    ``keys()`` or ``args()``.
    """

    __slots__ = ()
    SOURCE: ClassVar[str]
    # Set by ``@dataclass`` on every script; declared so that ``fields(self)`` type-checks.
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def keys(self) -> list[str]:
        """``KEYS``, in order."""
        return [getattr(self, name) for name in self._fields_of(_Role.KEY)]

    def args(self) -> list[Arg]:
        """``ARGV``, in order."""
        return [_encoded(getattr(self, name)) for name in self._fields_of(_Role.ARGV)]

    def _fields_of(self, role: _Role) -> tuple[str, ...]:
        # Per class, once: a turn runs a handful of scripts, each call used to walk its fields.
        script = type(self)
        names = _FIELD_NAMES.get((script, role))
        if names is None:
            names = tuple(
                field.name
                for field in fields(self)
                if role in getattr(field.type, "__metadata__", ())
            )
            _FIELD_NAMES[(script, role)] = names
        return names


_FIELD_NAMES: dict[tuple[type[LuaScript], _Role], tuple[str, ...]] = {}


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


async def load_scripts(redis: AsyncRedisClient) -> int:
    """``SCRIPT LOAD`` every script class defined so far; returns how many texts were loaded.

    A process does it once before it takes work. Otherwise a first burst against a
    Redis that had not seen the scripts sent each of them to Redis once per turn in
    flight: every concurrent first call met ``NOSCRIPT`` and loaded the script itself
    (141 loads and as many refused calls in a burst of 300 customers, bench/README.md
    "Issue 49"). A Redis restarted empty later is served as before, by redis-py's
    fall-back.
    """
    sources = {script.SOURCE for script in _script_classes(LuaScript)}
    await asyncio.gather(*(redis.script_load(source) for source in sorted(sources)))
    return len(sources)


def _script_classes(base: type[LuaScript]) -> list[type[LuaScript]]:
    found = []
    for script in base.__subclasses__():
        if "SOURCE" in vars(script):
            found.append(script)
        found.extend(_script_classes(script))
    return found


def run_sync(client: SyncRedisClient, call: LuaScript) -> Any:
    """Run ``call`` on a synchronous client (the staff CLI); its reply as Redis gives it."""
    script: Any = client.register_script(call.SOURCE)
    return script(keys=call.keys(), args=call.args())


def _encoded(value: Arg) -> Arg:
    # The scripts read a boolean as '1' or '0'.
    if isinstance(value, bool):
        return 1 if value else 0
    return value
