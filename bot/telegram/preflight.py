"""The start-up checks that need the network, run before aiogram and the model SDK are imported.

Redis must answer (:func:`bot.ops.redis_startup.connect_redis`), the Bot API must
accept the token (``getMe``) and, with ``STAFF_CHAT_ID``, the staff group must be
a forum supergroup where the bot manages topics (``getChat``, ``getChatMember``).
Each failure is one line for the operator and exit 1. Importing aiogram and the
SDK takes seconds (more under load); these checks need only aiohttp and redis-py,
so a wrong token or a stopped Redis is reported in about a second in every mode.

This is the only check of the token and of the staff group: ``python -m bot``
runs :func:`preflight` before importing :mod:`bot.telegram.process` and hands the result
(:class:`BotIdentity`) to it; :func:`bot.telegram.process.run_bot` runs it itself
when it is given none (the tests' in-process bots). Nothing here imports aiogram.
"""

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from bot.ops import event_loop
from bot.ops.redis_startup import check_redis
from bot.ops.startup import StartupError
from bot.proxies import ProxyURLError, proxy_for
from bot.settings import Settings
from bot.storage.redaction import redacted_url

# Each start-up request gets this long: a Bot API that does not answer is one line, not a hang.
REQUEST_TIMEOUT_SECONDS = 10.0

NOT_A_FORUM = (
    "STAFF_CHAT_ID is not a forum supergroup: turn Topics on in the staff group's settings"
)
NO_TOPIC_RIGHTS = (
    "the bot cannot manage topics in the STAFF_CHAT_ID group: make it an administrator "
    "with the Manage topics right"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BotIdentity:
    """Who the token belongs to, as ``getMe`` answered (for the start-up log line)."""

    id: int
    username: str


class BotApiRefusal(Exception):
    """The Bot API answered ``ok: false``: its ``error_code`` and ``description``."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(f"{status}: {description}")
        self.status = status
        self.description = description


class BotApiUnreachable(Exception):
    """No Bot API answer: no connection, a proxy that refused, or no answer in time."""


class NotABotApiServer(BotApiUnreachable):
    """Something answered, but not as the Bot API does (an HTML page, say); a whole line."""


class LightBotApi:
    """The few Bot API calls start-up makes, over plain aiohttp (no aiogram).

    ``TELEGRAM_PROXY`` or the standard proxy variables apply as for the bot's own
    session (HTTP CONNECT or SOCKS through aiohttp-socks). The token is part of
    every URL; nothing this class raises or returns quotes it.
    """

    def __init__(self, settings: Settings, environ: Mapping[str, str]) -> None:
        telegram = settings.telegram
        if telegram.bot_token is None:
            raise StartupError("TELEGRAM_BOT_TOKEN is not set")
        self._token = telegram.bot_token.get_secret_value()
        self._base = telegram.api_base_url.rstrip("/")
        self.where = redacted_url(telegram.api_base_url)
        configured = telegram.proxy.get_secret_value() if telegram.proxy is not None else None
        try:
            self._proxy = proxy_for(telegram.api_base_url, configured, environ)
        except ProxyURLError as error:
            raise StartupError(str(error)) from error
        self._network_errors: tuple[type[Exception], ...] = (aiohttp.ClientError, OSError)
        if self._proxy is not None:
            # Imported only with a proxy: most deployments connect directly.
            import aiohttp_socks  # noqa: PLC0415

            # A proxy that refuses the tunnel (407, 403, 502) is a network failure like others.
            self._network_errors += (
                aiohttp_socks.ProxyError,
                aiohttp_socks.ProxyConnectionError,
                aiohttp_socks.ProxyTimeoutError,
            )

    def session(self) -> aiohttp.ClientSession:
        """A new HTTP session for the calls (through the proxy, if one applies)."""
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS)
        if self._proxy is None:
            return aiohttp.ClientSession(timeout=timeout)
        from aiohttp_socks import ProxyConnector  # noqa: PLC0415 - see __init__

        return aiohttp.ClientSession(
            timeout=timeout, connector=ProxyConnector.from_url(self._proxy)
        )

    async def call(self, session: aiohttp.ClientSession, method: str, **params: Any) -> Any:
        """``method``'s ``result``; :class:`BotApiRefusal` or :class:`BotApiUnreachable`."""
        url = f"{self._base}/bot{self._token}/{method}"
        form = {name: str(value) for name, value in params.items()}
        try:
            async with session.post(url, data=form) as response:
                body = await response.text()
        except TimeoutError as error:
            raise BotApiUnreachable(f"no answer within {REQUEST_TIMEOUT_SECONDS:g} s") from error
        except self._network_errors as error:
            raise BotApiUnreachable(self._masked(_reason(error))) from error
        try:
            answer = json.loads(body)
        except ValueError as error:
            raise NotABotApiServer(
                f"TELEGRAM_API_BASE_URL {self.where} is not a Bot API server: its answer to "
                f"{method} was not Bot API JSON ({_reason(error)})"
            ) from error
        if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
            raise NotABotApiServer(
                f"TELEGRAM_API_BASE_URL {self.where} is not a Bot API server: its answer to "
                f"{method} was not Bot API JSON (no 'ok' field)"
            )
        if not answer["ok"]:
            description = _one_line(str(answer.get("description") or "no description"))
            raise BotApiRefusal(int(answer.get("error_code") or response.status), description)
        return answer.get("result")

    def _masked(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    async def identity(self, session: aiohttp.ClientSession) -> BotIdentity:
        """``getMe``: who the token belongs to; :class:`StartupError` when it cannot be used."""
        try:
            me = await self.call(session, "getMe")
        except BotApiRefusal as error:
            if error.status == 401:
                raise StartupError(
                    "the Bot API rejected TELEGRAM_BOT_TOKEN (unauthorized)"
                ) from error
            raise StartupError(
                self._masked(f"the Bot API at {self.where} refused getMe: {error}")
            ) from error
        except NotABotApiServer as error:
            raise StartupError(str(error)) from error
        except BotApiUnreachable as error:
            raise StartupError(
                self._masked(f"cannot reach the Bot API at {self.where}: {error}")
            ) from error
        if not isinstance(me, dict) or not isinstance(me.get("id"), int):
            raise StartupError(
                f"TELEGRAM_API_BASE_URL {self.where} is not a Bot API server: its answer to "
                "getMe names no bot"
            )
        return BotIdentity(id=me["id"], username=str(me.get("username") or ""))

    async def staff_chat_problem(
        self, session: aiohttp.ClientSession, staff_chat_id: int, bot_id: int
    ) -> str | None:
        """Why handoff cannot work in ``staff_chat_id`` (one line), else ``None``.

        Without this check a wrong group is found only at the first handoff: the
        customer is told a person was called while ``createForumTopic`` fails and
        no staff member ever sees the request.
        """
        try:
            chat = await self.call(session, "getChat", chat_id=staff_chat_id)
            member = (
                await self.call(session, "getChatMember", chat_id=staff_chat_id, user_id=bot_id)
                if _is_forum(chat)
                else None
            )
        except BotApiRefusal as error:
            if error.status in (400, 403):
                return (
                    f"the bot cannot see the STAFF_CHAT_ID group ({error.description}): "
                    "add the bot to it"
                )
            return f"the STAFF_CHAT_ID group could not be checked: {error}"
        except BotApiUnreachable as error:
            return self._masked(f"the STAFF_CHAT_ID group could not be checked: {error}")
        return _staff_verdict(chat, member)


def _staff_verdict(chat: Any, member: Any) -> str | None:
    """Why the group cannot host handoffs, from ``getChat`` and (for a forum) ``getChatMember``."""
    if not _readable(chat, "type"):
        return _UNREADABLE.format(method="getChat")
    if not _is_forum(chat):
        return NOT_A_FORUM
    if not _readable(member, "status", "user"):
        return _UNREADABLE.format(method="getChatMember")
    return None if _manages_topics(member) else NO_TOPIC_RIGHTS


# An answer not in the Bot API's shape (a proxy in between, a newer Bot API): one line.
_UNREADABLE = (
    "the STAFF_CHAT_ID group could not be checked: the Bot API's answer to {method} "
    "could not be read"
)


def _readable(answer: Any, *fields: str) -> bool:
    """Whether ``answer`` is an object holding every one of ``fields`` (the Bot API's shape)."""
    return isinstance(answer, dict) and all(name in answer for name in fields)


def _is_forum(chat: Any) -> bool:
    """A supergroup with Topics on (``getChat``'s answer)."""
    return (
        isinstance(chat, dict) and chat.get("type") == "supergroup" and bool(chat.get("is_forum"))
    )


def _manages_topics(member: Any) -> bool:
    """The owner, or an administrator with the Manage topics right (``getChatMember``)."""
    if not isinstance(member, dict):
        return False
    status = member.get("status")
    return status == "creator" or (
        status == "administrator" and member.get("can_manage_topics") is True
    )


async def check_bot_api(
    settings: Settings, environ: Mapping[str, str] | None = None
) -> BotIdentity:
    """Who the token is; :class:`StartupError` for a token or staff group that cannot be used."""
    api = LightBotApi(settings, os.environ if environ is None else environ)
    async with api.session() as session:
        identity = await api.identity(session)
        staff_chat_id = settings.handoff.staff_chat_id
        if staff_chat_id is not None:
            problem = await api.staff_chat_problem(session, staff_chat_id, identity.id)
            if problem is not None:
                raise StartupError(problem)
    return identity


async def preflight(settings: Settings, environ: Mapping[str, str] | None = None) -> BotIdentity:
    """Every network check of a Telegram mode, in the order an operator fixes them.

    Redis first (nothing works without it), then the token, then the staff group.
    """
    await check_redis(settings)
    return await check_bot_api(settings, environ)


def run_preflight(settings: Settings) -> BotIdentity | None:
    """:func:`preflight` in its own event loop; ``None`` after one ``error:`` line on stderr."""
    try:
        return event_loop.run(preflight(settings))
    except StartupError as error:
        print(f"error: {error}", file=sys.stderr)
        return None


def _reason(error: BaseException) -> str:
    """``Type: text`` on one line (the text may be empty)."""
    text = _one_line(str(error))
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
