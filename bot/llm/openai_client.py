"""The chat model client over ``openai.AsyncOpenAI`` (OpenAI and compatible servers)."""

import json
import logging
from collections.abc import Sequence
from typing import Any, Final, Literal

import aiohttp
import httpx2
import openai
from aiohttp_socks import ProxyConnector, ProxyError
from openai import AsyncOpenAI, DefaultAioHttpClient
from openai._models import FinalRequestOptions

# The SDK's own aiohttp transport (what DefaultAioHttpClient builds), given our session.
from openai._vendor.httpx_aiohttp import AiohttpTransport
from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from bot.llm.errors import (
    LLMBadResponseError,
    LLMClientError,
    LLMRateLimitError,
    LLMRequestError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from turn import ToolCall, Usage

logger = logging.getLogger(__name__)

InstructionsRole = Literal["developer", "system"]

DEFAULT_MAX_CONNECTIONS = 1000
"""Connections to the model provider at once: a burst of chats each holds one while it waits."""

_REQUEST_OPTIONS: Final = FinalRequestOptions.construct(
    method="post", url="/chat/completions", security={"bearer_auth": True}
)
"""What ``AsyncOpenAI.post`` builds on every call (about 60 µs: pydantic fills every
default), built once; each request gets a shallow copy with its body."""


class OpenAIChatClient:
    """Chat completions with tools; every SDK failure becomes an :class:`LLMClientError`.

    ``instructions_role`` renames the leading instruction message's role: OpenAI's
    newer models expect ``developer``, many compatible servers (vLLM, Ollama,
    LM Studio) only know ``system``.
    """

    def __init__(
        self,
        client: AsyncOpenAI,
        model: str,
        instructions_role: InstructionsRole = "developer",
    ) -> None:
        self._client = client
        self._model = model
        self._instructions_role = instructions_role

    @classmethod
    def create(
        cls,
        *,
        api_key: str,
        base_url: str | None,
        model: str,
        timeout_seconds: float,
        max_retries: int,
        instructions_role: InstructionsRole = "developer",
        proxy: str | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> "OpenAIChatClient":
        """Build the SDK client with our timeout and retry budget, over aiohttp.

        The SDK's aiohttp transport costs about a third less CPU per request than its
        default httpx2 transport, and its connection pool does not slow down with a
        thousand requests in flight (bench/README.md has the figures).

        ``proxy`` (``http://``, ``socks4://`` or ``socks5://``, credentials allowed)
        carries every request through that proxy; ``None`` connects directly.
        ``max_connections`` bounds the aiohttp connector: a request past it waits for
        a free connection, so it should cover the chats answered at once.
        """
        if max_connections < 1:
            raise ValueError("max_connections must be positive")
        client = AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_seconds,
            max_retries=max_retries,
            http_client=_http_client(proxy, max_connections),
        )
        return cls(client, model, instructions_role)

    @property
    def model_name(self) -> str:
        """The configured model name."""
        return self._model

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
    ) -> LLMResult:
        """One chat completion; tools are offered only when there are any."""
        request: dict[str, Any] = {
            "model": self._model,
            "messages": [self._with_role(message) for message in messages],
        }
        if tools:
            request["tools"] = list(tools)
            request["tool_choice"] = tool_choice
            request["parallel_tool_calls"] = False
        try:
            # The low-level request skips the SDK's type-driven walk over every message
            # (about 2 ms per request, the largest part of the bot's own time in a turn);
            # our messages are plain JSON already. Retries, timeouts and errors are the same.
            # The raw response skips the SDK's generic response wrapper; the body is parsed
            # once below, with the SDK's own ChatCompletion type.
            response = await self._client.request(
                httpx2.Response, _REQUEST_OPTIONS.model_copy(update={"json_data": request})
            )
        except openai.APITimeoutError as error:
            raise _timeout_error(error) from error
        except openai.RateLimitError as error:
            raise LLMRateLimitError("the model provider is rate limiting us") from error
        except openai.InternalServerError as error:
            raise LLMUnavailableError(f"the model provider answered {error.status_code}") from error
        except (openai.APIConnectionError, aiohttp.ClientError) as error:
            # Malformed HTTP (a bad status line, broken headers) escapes the SDK's aiohttp
            # transport as an aiohttp error, not retried; httpx2 made it a connection error.
            raise LLMUnavailableError("the model provider cannot be reached") from error
        except ProxyError as error:
            # The proxy answered but refused the tunnel (407, 403, 502): not an aiohttp error.
            raise LLMUnavailableError(f"the proxy refused the connection: {error}") from error
        except openai.APIResponseValidationError as error:
            raise LLMBadResponseError("the model provider sent an invalid response") from error
        except openai.APIStatusError as error:
            raise LLMRequestError(
                f"the model provider refused the request ({error.status_code})"
            ) from error
        except openai.OpenAIError as error:
            raise LLMClientError("the model request failed") from error
        except ValueError as error:
            # A body that is not JSON surfaces from the SDK as a decoding error.
            raise LLMBadResponseError("the model provider sent a body that is not JSON") from error
        try:
            return _to_result(_parse_completion(response.content))
        except LLMBadResponseError:
            raise
        except (AttributeError, TypeError, ValueError) as error:
            # The SDK does not validate bodies strictly; a malformed one fails on access.
            raise LLMBadResponseError("the model provider sent a malformed completion") from error

    def _with_role(self, message: Message) -> Message:
        if (
            message.get("role") in ("developer", "system")
            and message.get("role") != self._instructions_role
        ):
            return {**message, "role": self._instructions_role}
        return message

    async def close(self) -> None:
        """Close the SDK's HTTP client (with it the aiohttp session and its connections)."""
        await self._client.close()


def _http_client(proxy: str | None, max_connections: int) -> DefaultAioHttpClient:
    """The SDK's aiohttp client, at most ``max_connections`` at once; through ``proxy`` if given.

    The SDK's own ``proxy=`` hands aiohttp the proxy URL without its credentials and
    cannot speak SOCKS; an aiohttp-socks connector does both (HTTP proxies by CONNECT).
    The environment's proxy variables are resolved by the caller, not by the SDK
    (``trust_env=False``), so that ``NO_PROXY`` and ``LLM_PROXY`` mean the same everywhere.
    """
    if proxy is None:
        return DefaultAioHttpClient(
            trust_env=False,
            limits=httpx2.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        )

    def session() -> aiohttp.ClientSession:
        # Built on the first request, inside the running event loop.
        return aiohttp.ClientSession(
            connector=ProxyConnector.from_url(proxy, rdns=True, limit=max_connections)
        )

    return DefaultAioHttpClient(trust_env=False, transport=AiohttpTransport(client=session))


def _timeout_error(error: openai.APITimeoutError) -> LLMClientError:
    """A timeout the SDK reports, unless it is really a refused or dropped connection.

    The SDK's aiohttp transport maps every aiohttp connection error to httpx2's
    ``ConnectTimeout``; httpx2's own transport raised ``ConnectError`` (refused) or
    ``RemoteProtocolError`` (dropped), which the SDK reports as a connection error.
    aiohttp's real timeouts are ``TimeoutError`` subclasses. Both kinds are retried alike.
    """
    cause = error.__cause__
    while cause is not None:
        if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(cause, TimeoutError):
            return LLMUnavailableError("the model provider cannot be reached")
        cause = cause.__cause__
    return LLMTimeoutError("the model did not answer in time")


def _parse_completion(body: bytes) -> ChatCompletion:
    """The completion in ``body``, validated in one pass by pydantic-core.

    A body that does not validate (an unknown finish reason from a compatible server,
    a missing field) is built the SDK's lenient way instead, as the SDK itself would
    have: what the turn needs is checked on access.
    """
    try:
        return ChatCompletion.model_validate_json(body)
    except ValidationError:
        pass
    try:
        data = json.loads(body)
    except ValueError as error:
        raise LLMBadResponseError("the model provider sent a body that is not JSON") from error
    if not isinstance(data, dict):
        raise LLMBadResponseError("the model provider sent something that is not a chat completion")
    return ChatCompletion.construct(**data)


def _to_result(completion: ChatCompletion) -> LLMResult:
    if not isinstance(completion, ChatCompletion):
        raise LLMBadResponseError("the model provider sent something that is not a chat completion")
    if not completion.choices:
        raise LLMBadResponseError("the model provider sent no choices")
    choice = completion.choices[0]
    message = choice.message
    tool_calls = tuple(
        ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments)
        for call in message.tool_calls or ()
        if call.type == "function"
    )
    usage = completion.usage
    return LLMResult(
        text=message.content,
        refusal=message.refusal,
        finish_reason=choice.finish_reason,
        tool_calls=tool_calls,
        model=completion.model,
        response_id=completion.id,
        usage=Usage(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
        )
        if usage
        else Usage(),
    )
