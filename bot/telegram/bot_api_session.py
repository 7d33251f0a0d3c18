"""The Bot API session: aiogram's aiohttp session, keeping its response models alive.

aiogram validates every Bot API answer with ``Response[<result type>]``, a pydantic
generic model parametrised on each call. pydantic caches parametrisations in a
weak-value dictionary only: once the last answer object is gone, the garbage
collector frees the class and the next call builds it again (2-4 ms of schema
building, every few requests; see bench/README.md). Holding one reference per
result type keeps pydantic's cache warm; aiogram's behaviour is otherwise unchanged.
"""

from typing import Any

from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.exceptions import TelegramNetworkError
from aiogram.methods import Response, TelegramMethod
from aiogram.methods.base import TelegramType
from aiohttp_socks import ProxyError


class BotApiSession(AiohttpSession):
    """``AiohttpSession`` that keeps every ``Response[...]`` model it has used."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._response_models: dict[Any, Any] = {}

    def check_response(
        self,
        bot: Bot,
        method: TelegramMethod[TelegramType],
        status_code: int,
        content: str,
    ) -> Response[TelegramType]:
        """aiogram's check, after making sure the answer's model stays cached."""
        returning = method.__returning__
        if returning not in self._response_models:
            self._response_models[returning] = Response[returning]  # type: ignore[valid-type]
        return super().check_response(bot, method, status_code, content)

    async def make_request(
        self,
        bot: Bot,
        method: TelegramMethod[TelegramType],
        timeout: int | None = None,  # noqa: ASYNC109 - aiogram's signature
    ) -> TelegramType:
        """aiogram's request; a proxy that refuses the tunnel is a network error like others.

        aiohttp-socks reports a refusal (407, 403, 502 from the proxy) with its own
        exception, which aiogram does not translate; retries and start-up checks
        expect :class:`TelegramNetworkError`.
        """
        try:
            return await super().make_request(bot, method, timeout)
        except ProxyError as error:
            raise TelegramNetworkError(method=method, message=f"proxy: {error}") from error
