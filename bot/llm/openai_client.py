"""The chat model client over ``openai.AsyncOpenAI`` (OpenAI and compatible servers)."""

import json
import logging
from collections.abc import Sequence
from typing import Any, Final, Literal, cast

import httpx2
import openai
import orjson
import pydantic
from aiohttp_socks import ProxyError
from openai import AsyncOpenAI, RequestOptions
from openai.types.chat import ChatCompletion

from bot.llm.errors import (
    LLMBadResponseError,
    LLMClientError,
    LLMConfigurationError,
    LLMRateLimitError,
    LLMRequestError,
    LLMTimeoutError,
    LLMUnavailableError,
    LLMUnreachableError,
)
from bot.llm.http_client import ChatHttpClient, ChatTransport, EventStream, session_factory
from bot.llm.parsing import parse_chunk, parse_completion, usage_of
from bot.llm.streaming import StreamAssembler, sse_data
from bot.llm.types import (
    MODEL_PROBE_TEXT,
    EncodedPart,
    LLMResult,
    Message,
    StructuredResult,
    StructuredT,
    TextListener,
    ToolChoice,
    ToolDefinition,
)
from turn import ToolCall, Usage

logger = logging.getLogger(__name__)

InstructionsRole = Literal["developer", "system"]

DEFAULT_MAX_CONNECTIONS = 1000
"""Connections to the model provider at once: a burst of chats each holds one while it waits."""

STREAM_READ_PACE_SECONDS: Final = 0.15
"""A streamed answer is read at most this often once it has begun (drafts change every 0.5 s)."""

_COMPLETIONS_PATH: Final = b"chat/completions"
# What the SDK's own chat.completions.create asks for: the API key as a bearer token.
_REQUEST_OPTIONS: Final[RequestOptions] = {"security": {"bearer_auth": True}}
# A streamed request asks for the usage too: it comes in a last event without choices.
_STREAM_FIELDS: Final = b',"stream":true,"stream_options":{"include_usage":true}'


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
        base = client.base_url  # the SDK ends it with "/"
        # An absolute URL: the SDK joins a relative one to its base URL every time.
        self._url = str(base.copy_with(raw_path=base.raw_path + _COMPLETIONS_PATH))
        self._model_json = _dumps(model)
        self._tools: tuple[Sequence[ToolDefinition], bytes] | None = None
        self._max_retries = client.max_retries
        self._timeout = client.timeout
        # Cleared for good when the server refuses ``json_schema`` response formats.
        self._json_schema = True

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
        thousand requests in flight (bench/README.md has the figures). The SDK is used
        through its public API only: its ``http_client`` argument and ``post``.

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

    def with_model(self, model: str) -> "OpenAIChatClient":
        """A client for another model over the same connections (closed by this one's owner)."""
        return type(self)(self._client, model, self._instructions_role)

    def transcriber(self, model: str, *, language: str) -> "OpenAITranscriber":
        """Transcriptions with ``model`` over the same connections (closed by this one's owner)."""
        return OpenAITranscriber(self._client, model, language=language)

    async def generate_structured(
        self, messages: Sequence[Message], output: type[StructuredT]
    ) -> StructuredResult[StructuredT]:
        """One answer shaped like ``output``: Structured Outputs, else JSON mode.

        The SDK's ``parse`` sends ``output``'s strict JSON schema and validates the
        answer with it. A server that refuses ``json_schema`` (a 400 naming the
        response format) is asked from then on in JSON mode, with the schema in
        the instructions and the answer validated here.
        """
        wire = cast(Any, [self._with_role(message) for message in messages])
        if self._json_schema:
            try:
                parsed = await self._client.chat.completions.parse(
                    model=self._model, messages=wire, response_format=output
                )
            except openai.BadRequestError as error:
                if not _refuses_json_schema(error):
                    raise _llm_error(error) from error
                self._json_schema = False
                logger.warning(
                    "The model server refuses json_schema response formats: "
                    "structured answers use JSON mode from now on"
                )
            except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as error:
                raise LLMBadResponseError("the structured answer was cut off") from error
            except pydantic.ValidationError as error:
                raise LLMBadResponseError(
                    "the structured answer does not fit its schema"
                ) from error
            except (openai.OpenAIError, ProxyError, ValueError) as error:
                raise _llm_error(error) from error
            else:
                if not parsed.choices:
                    raise LLMBadResponseError("the model provider sent no choices")
                message = parsed.choices[0].message
                return StructuredResult(
                    value=message.parsed,
                    refusal=message.refusal,
                    model=parsed.model,
                    usage=usage_of(parsed.usage) if parsed.usage else Usage(),
                )
        return await self._json_mode(wire, output)

    async def _json_mode(
        self, wire: Any, output: type[StructuredT]
    ) -> StructuredResult[StructuredT]:
        schema = json.dumps(output.model_json_schema(), ensure_ascii=False)
        instruction = {
            "role": self._instructions_role,
            "content": f"Answer with one JSON object that fits this JSON Schema: {schema}",
        }
        try:
            completion = await self._client.chat.completions.create(
                model=self._model,
                messages=cast(Any, [*wire, instruction]),
                response_format={"type": "json_object"},
            )
        except (openai.OpenAIError, ProxyError, ValueError) as error:
            raise _llm_error(error) from error
        if not completion.choices:
            raise LLMBadResponseError("the model provider sent no choices")
        message = completion.choices[0].message
        usage = usage_of(completion.usage) if completion.usage else Usage()
        if message.refusal or not message.content:
            return StructuredResult(
                value=None, refusal=message.refusal or "", model=completion.model, usage=usage
            )
        try:
            value = output.model_validate_json(message.content)
        except pydantic.ValidationError as error:
            raise LLMBadResponseError("the JSON answer does not fit its schema") from error
        return StructuredResult(value=value, refusal=None, model=completion.model, usage=usage)

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        """One chat completion; tools are offered only when there are any.

        With ``on_text`` the completion is streamed and its text told piece by piece.
        """
        if on_text is not None:
            return await self._stream(messages, tools, tool_choice, on_text)
        try:
            # The SDK's documented request for an endpoint of one's own (``post`` with
            # ``cast_to=httpx2.Response``) skips its type-driven walk over every message
            # (about 2 ms per request, the largest part of the bot's own time in a turn);
            # our messages are plain JSON already, encoded here (the tool list once).
            # Retries, timeouts and errors are the same. The raw response skips the SDK's
            # generic response wrapper; the body is parsed once below, with the SDK's own
            # ChatCompletion type.
            response = await self._client.post(
                self._url,
                cast_to=httpx2.Response,
                content=self._body(messages, tools, tool_choice),
                options=self._options(),
            )
        except (openai.OpenAIError, ProxyError, ValueError) as error:
            raise _llm_error(error, self._model) from error
        try:
            return _to_result(parse_completion(response.content))
        except LLMBadResponseError:
            raise
        except (AttributeError, TypeError, ValueError) as error:
            # The SDK does not validate bodies strictly; a malformed one fails on access.
            raise LLMBadResponseError("the model provider sent a malformed completion") from error

    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice,
        on_text: TextListener,
    ) -> LLMResult:
        """The completion streamed: the same ``post`` as above, its events read as they come.

        The SDK retries (and times out) the request until the response's head, as
        for any other; a failure while the events are read (a read timeout, the
        connection dropped, an error event) is not retried and ends in the same
        error kinds. Nothing is returned unless the stream reached its finish reason.
        The body is encoded here as for a plain request (``create`` would walk every
        message again for each streamed step); each event is validated in one pass
        by pydantic-core (the SDK's own stream builds every chunk its lenient way,
        about 30 times slower).
        """
        assembler = StreamAssembler(on_text)
        try:
            # ``stream=True`` without a stream class: the SDK hands back the response
            # with its body unread (its documented answer for ``cast_to=httpx2.Response``).
            response = await self._client.post(
                self._url,
                cast_to=httpx2.Response,
                content=self._body(messages, tools, tool_choice, stream=True),
                options=self._options(),
                stream=True,
            )
            # While the answer is written the socket is read at most every
            # STREAM_READ_PACE_SECONDS (a few events per read); its first text and
            # the events after the finish reason are read as they come.
            paced = response.stream if isinstance(response.stream, EventStream) else None
            try:
                async for data in sse_data(response):
                    if data == b"[DONE]":
                        break
                    assembler.add(parse_chunk(data))
                    if paced is not None:
                        paced.pace_seconds = STREAM_READ_PACE_SECONDS if assembler.writing else 0.0
            finally:
                await response.aclose()
        except (openai.OpenAIError, ProxyError, httpx2.HTTPError, ValueError) as error:
            raise _llm_error(error, self._model) from error
        except (AttributeError, TypeError) as error:
            raise LLMBadResponseError("the model provider sent a malformed chunk") from error
        return assembler.result()

    async def probe(self, *, timeout_seconds: float) -> None:
        """Ask the model one short question, once (no retries); an :class:`LLMClientError`.

        Whether the key, the model and the base URL work, as a turn's request would
        find them: the same endpoint, the same model, a few tokens.
        """
        try:
            response = await self._client.with_options(max_retries=0, timeout=timeout_seconds).post(
                self._url,
                cast_to=httpx2.Response,
                content=self._body([{"role": "user", "content": MODEL_PROBE_TEXT}], (), "auto"),
                options=_REQUEST_OPTIONS,
            )
        except (openai.OpenAIError, ProxyError, ValueError) as error:
            raise _llm_error(error, self._model) from error
        try:
            _to_result(parse_completion(response.content))
        except LLMBadResponseError:
            raise
        except (AttributeError, TypeError, ValueError) as error:
            raise LLMBadResponseError("the model provider sent a malformed completion") from error

    def _options(self) -> RequestOptions:
        """What ``chat.completions.create`` asks for, with the client's own defaults given.

        Given, not left out: the SDK fills an option left out with a deep copy of its
        default on every request (a quarter of the SDK's own time per request, measured
        in bench/README.md, issue 49); these are the values it would use (the client's
        retries and timeout, no extra headers or query). Fresh dicts each time: the
        request's options are the SDK's to change.
        """
        return {
            **_REQUEST_OPTIONS,
            "headers": {},
            "params": {},
            "max_retries": self._max_retries,
            "timeout": self._timeout,
        }

    def _body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        choice: ToolChoice,
        *,
        stream: bool = False,
    ) -> bytes:
        """The request body as the SDK would encode it (compact UTF-8 JSON)."""
        parts = [
            b'{"model":',
            self._model_json,
            b',"messages":',
            _dumps([self._with_role(message) for message in messages]),
        ]
        if stream:
            parts.append(_STREAM_FIELDS)
        if tools:
            parts += [
                b',"tools":',
                self._tools_json(tools),
                b',"tool_choice":',
                _dumps(choice),
                b',"parallel_tool_calls":false',
            ]
        parts.append(b"}")
        return b"".join(parts)

    def _tools_json(self, tools: Sequence[ToolDefinition]) -> bytes:
        # The registry hands out one read-only list: encode it once, not three times a turn.
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, _dumps(list(tools)))
        return self._tools[1]

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


class OpenAITranscriber:
    """``POST /audio/transcriptions`` through the SDK; every failure an :class:`LLMClientError`.

    ``language`` (ISO 639-1) is the hint the endpoint takes: it improves accuracy
    and latency for the customers' language.
    """

    def __init__(self, client: AsyncOpenAI, model: str, *, language: str) -> None:
        self._client = client
        self._model = model
        self._language = language

    @property
    def model_name(self) -> str:
        """The configured transcription model."""
        return self._model

    async def transcribe(self, audio: bytes, *, filename: str) -> str:
        """The words of ``audio``; the SDK's timeout and retries apply as to chat requests."""
        try:
            transcription = await self._client.audio.transcriptions.create(
                model=self._model, file=(filename, audio), language=self._language
            )
        except (openai.OpenAIError, httpx2.HTTPError, ProxyError, ValueError) as error:
            raise _llm_error(error) from error
        text = getattr(transcription, "text", None)
        if not isinstance(text, str):
            raise LLMBadResponseError("the transcription has no text")
        return text


def _refuses_json_schema(error: openai.BadRequestError) -> bool:
    """Whether a 400 is the server's "no" to the ``json_schema`` response format itself."""
    text = str(error).lower()
    return "response_format" in text or "json_schema" in text


def _llm_error(error: Exception, model: str = "") -> LLMClientError:
    """The :class:`LLMClientError` for a failure of the SDK (or of what it reads)."""
    status = error.status_code if isinstance(error, openai.APIStatusError) else 0
    named = f"LLM_MODEL {model}" if model else "the model"
    for kinds, build, message in _ERROR_KINDS:
        if isinstance(error, kinds):
            text = message.format(status=status, model=named)
            if isinstance(error, ProxyError):
                text = f"{text}: {error}"
            return build(text)
    # A body that is not JSON surfaces from the SDK as a decoding error.
    return LLMBadResponseError("the model provider sent a body that is not JSON")


# In order: the first kind that matches decides (subclasses before their bases).
_ERROR_KINDS: Final[tuple[tuple[Any, type[LLMClientError], str], ...]] = (
    (
        (openai.APITimeoutError, httpx2.TimeoutException),
        LLMTimeoutError,
        "the model did not answer in time",
    ),
    (openai.RateLimitError, LLMRateLimitError, "the model provider is rate limiting us"),
    (openai.InternalServerError, LLMUnavailableError, "the model provider answered {status}"),
    (openai.APIConnectionError, LLMUnreachableError, "the model provider cannot be reached"),
    # Raised while a stream is read: the SDK retries only until the response's head.
    (httpx2.TransportError, LLMUnavailableError, "the model's stream was cut"),
    # The proxy answered but refused the tunnel (407, 403, 502): not an aiohttp error.
    (ProxyError, LLMUnreachableError, "the proxy refused the connection"),
    # A wrong key, model or base URL: configuration, not load (no retry helps).
    (
        openai.AuthenticationError,
        LLMConfigurationError,
        "the model provider rejected OPENAI_API_KEY ({status})",
    ),
    (
        openai.PermissionDeniedError,
        LLMConfigurationError,
        "the model provider refused OPENAI_API_KEY access to {model} ({status})",
    ),
    (
        openai.NotFoundError,
        LLMConfigurationError,
        "the model provider does not know {model} ({status}): check LLM_MODEL and OPENAI_BASE_URL",
    ),
    (
        openai.APIResponseValidationError,
        LLMBadResponseError,
        "the model provider sent an invalid response",
    ),
    (openai.APIStatusError, LLMRequestError, "the model provider refused the request ({status})"),
    # An error event inside a stream: the provider gave up on the answer.
    (openai.APIError, LLMUnavailableError, "the model provider ended the stream with an error"),
    (openai.OpenAIError, LLMClientError, "the model request failed"),
)


def _http_client(proxy: str | None, max_connections: int) -> ChatHttpClient:
    """The SDK's HTTP client over aiohttp, at most ``max_connections`` at once; via ``proxy``.

    The environment's proxy variables are resolved by the caller, not by the SDK
    (``trust_env=False``), so that ``NO_PROXY`` and ``LLM_PROXY`` mean the same everywhere.
    """
    return ChatHttpClient(ChatTransport(session_factory(proxy, max_connections)), trust_env=False)


def _dumps(value: object) -> bytes:
    """Compact UTF-8 JSON, as the SDK and httpx2 encode request bodies.

    orjson writes what ``json.dumps`` writes with these options (strings, integers,
    lists, objects; a float may be spelled differently, with the same value), about
    20 times faster on a turn's messages: the instructions go whole with every model
    call. What orjson refuses (an integer past 64 bits in a tool's schema, a lone
    surrogate) goes through ``json``, which encodes it or fails as before.
    """
    try:
        return orjson.dumps(value, default=_fragment)
    except orjson.JSONEncodeError:
        text = json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_plain
        )
        return text.encode()


def _fragment(value: object) -> orjson.Fragment:
    """An :class:`EncodedPart`'s bytes as they are (encoded once a turn, not once a call)."""
    if isinstance(value, EncodedPart):
        return orjson.Fragment(value.json)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _plain(value: object) -> object:
    """An :class:`EncodedPart` for ``json``, which cannot take encoded bytes as they are."""
    if isinstance(value, EncodedPart):
        return value.as_dict()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


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
        usage=usage_of(usage) if usage else Usage(),
    )
