"""A scripted OpenAI-compatible server over real HTTP, for the suite and the benchmark.

The real ``AsyncOpenAI`` client talks to it at ``server.base_url``. Transcriptions
(``POST /v1/audio/transcriptions``, multipart) are recorded in ``server.transcriptions``
and answered from their own script (:meth:`ScriptedOpenAIServer.script_transcriptions`).
Each request to
``POST /v1/chat/completions`` is recorded, then answered by the next scripted step,
else by ``server.responder``; with neither, the request is *unscripted*: it is
answered 500 (marked not retryable) and kept in ``server.unscripted`` so a test can
assert that it never happened. The bot's start-up probe of the model (one question,
:data:`bot.llm.types.MODEL_PROBE_TEXT`) is apart: kept in ``server.probes``, answered
by :meth:`ScriptedOpenAIServer.script_probes` steps, else ``server.probe_responder``,
else "ok", so that the turns' script is the turns' alone.

    async with ScriptedOpenAIServer() as server:
        server.script(tool_call_answer("get_order_status", {"order_id": "8041"}),
                      text_answer("Заказ в пути."))
"""

import asyncio
import inspect
import json
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web

from bot.llm.types import MODEL_PROBE_TEXT
from bot.testing.openai_stream import DEFAULT_STREAM_CHUNK_CHARS, completion_events
from bot.testing.ports import LISTEN_BACKLOG

DEFAULT_MODEL = "scripted-model"
DEFAULT_USAGE = (12, 5)
"""Prompt and completion tokens of a scripted answer (total is their sum)."""

JsonBody = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted HTTP answer: status, body (JSON object or raw text), headers, delay.

    A request with ``"stream": true`` gets a completion body as server-sent events
    instead (see :mod:`bot.testing.openai_stream`): ``chunk_chars`` characters of
    content per event (0: the server's default), ``chunk_interval_seconds`` between
    events (a slow trickle), and with ``cut_after_chunks`` the connection is dropped
    after that many events, before ``[DONE]``. With ``keep_alive_seconds`` the
    stream sends only SSE comments (``: keep-alive``), that far apart, until the
    client or the server gives up: a provider that holds the stream open and never
    writes. With ``hold_after_chunks`` the stream stops after that many events until
    the test calls :meth:`ScriptedOpenAIServer.release_streams`: what the client did
    with the first pieces is seen while the rest is certainly not sent yet.
    """

    status: int = 200
    body: JsonBody | str = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0
    chunk_chars: int = 0
    chunk_interval_seconds: float = 0.0
    cut_after_chunks: int | None = None
    keep_alive_seconds: float = 0.0
    hold_after_chunks: int | None = None


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received: parsed JSON body (``None`` if not JSON), headers.

    Header names are lower-cased, so lookups do not depend on the client's spelling.
    """

    path: str
    headers: Mapping[str, str]
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` the client sent."""
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


Responder = Callable[[Any], Reply | Awaitable[Reply]]


@dataclass(frozen=True, slots=True)
class TranscriptionRequest:
    """One ``POST /v1/audio/transcriptions`` (multipart): its form fields and the file."""

    model: str
    language: str | None
    filename: str
    audio: bytes


# ---- builders of complete chat.completion bodies ---------------------------------------


def completion_body(
    message: Mapping[str, Any] | None,
    *,
    finish_reason: str | None = "stop",
    usage: tuple[int, int] | None = DEFAULT_USAGE,
    model: str = DEFAULT_MODEL,
) -> JsonBody:
    """A ``chat.completion`` object with one choice (none if ``message`` is ``None``)."""
    body: JsonBody = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": []
        if message is None
        else [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "refusal": None, **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
    }
    if usage is not None:
        prompt, completion = usage
        body["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    return body


def text_answer(
    text: str | None,
    *,
    finish_reason: str | None = "stop",
    usage: tuple[int, int] | None = DEFAULT_USAGE,
    model: str = DEFAULT_MODEL,
) -> Reply:
    """A plain assistant answer (any ``finish_reason``, usage present or absent)."""
    return Reply(
        body=completion_body(
            {"content": text}, finish_reason=finish_reason, usage=usage, model=model
        )
    )


def tool_calls_answer(
    calls: Sequence[tuple[str, Mapping[str, Any] | str]],
    *,
    finish_reason: str | None = "tool_calls",
    usage: tuple[int, int] | None = DEFAULT_USAGE,
    content: str | None = None,
) -> Reply:
    """One assistant message asking for every ``(name, arguments)`` call, in order.

    Arguments given as a string are sent verbatim (for malformed JSON).
    """
    tool_calls = [
        {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": arguments
                if isinstance(arguments, str)
                else json.dumps(arguments, ensure_ascii=False),
            },
        }
        for name, arguments in calls
    ]
    return Reply(
        body=completion_body(
            {"content": content, "tool_calls": tool_calls},
            finish_reason=finish_reason,
            usage=usage,
        )
    )


def tool_call_answer(
    name: str,
    arguments: Mapping[str, Any] | str,
    *,
    finish_reason: str | None = "tool_calls",
    usage: tuple[int, int] | None = DEFAULT_USAGE,
) -> Reply:
    """An assistant message asking for one tool call."""
    return tool_calls_answer([(name, arguments)], finish_reason=finish_reason, usage=usage)


def refusal_answer(refusal: str = "I can't help with that.") -> Reply:
    """A refusal: ``content`` null, ``refusal`` set, finish reason ``stop``."""
    return Reply(body=completion_body({"refusal": refusal}))


def empty_choices() -> Reply:
    """A well-formed completion whose ``choices`` list is empty."""
    return Reply(body=completion_body(None))


def json_answer(body: JsonBody, status: int = 200) -> Reply:
    """Any JSON object as the body (a recorded completion, for instance)."""
    return Reply(status=status, body=body)


# ---- builders of failures ---------------------------------------------------------------


def transcript(text: str) -> Reply:
    """A transcription's answer (``response_format=json``): the recognised text."""
    return Reply(body={"text": text, "usage": {"type": "duration", "seconds": 3}})


def error(
    status: int,
    message: str = "scripted error",
    *,
    code: str | None = None,
    error_type: str = "server_error",
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An HTTP error with OpenAI's error envelope.

    The SDK retries 408/409/429/5xx; pass ``headers={"retry-after-ms": "10"}`` to keep
    its back-off short, or ``{"x-should-retry": "false"}`` to stop it retrying.
    """
    envelope = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return Reply(status=status, body=envelope, headers=dict(headers or {}))


def rate_limited(retry_after_seconds: float = 0.01) -> Reply:
    """429 with a ``retry-after`` header."""
    return error(
        429,
        "Rate limit reached (scripted).",
        code="rate_limit_exceeded",
        error_type="requests",
        headers={"retry-after": str(retry_after_seconds)},
    )


def raw_body(text: str, status: int = 200, content_type: str = "application/json") -> Reply:
    """A body sent verbatim, e.g. one that is not JSON at all."""
    return Reply(status=status, body=text, headers={"Content-Type": content_type})


def delay(seconds: float, step: Reply) -> Reply:
    """``step``, answered after ``seconds``."""
    return replace(step, delay_seconds=seconds)


def trickle(step: Reply, *, chunk_chars: int = 1, interval_seconds: float = 0.02) -> Reply:
    """``step``, streamed ``chunk_chars`` characters at a time, ``interval_seconds`` apart."""
    return replace(step, chunk_chars=chunk_chars, chunk_interval_seconds=interval_seconds)


def cut_stream(step: Reply, *, after_chunks: int) -> Reply:
    """``step`` streamed, with the connection dropped after ``after_chunks`` events."""
    return replace(step, cut_after_chunks=after_chunks)


def held_stream(step: Reply, *, after_chunks: int) -> Reply:
    """``step`` streamed, stopping after ``after_chunks`` events until streams are released."""
    return replace(step, hold_after_chunks=after_chunks)


def keep_alive_only(step: Reply, *, interval_seconds: float = 0.1) -> Reply:
    """``step`` asked for as a stream, answered with SSE comments only, this far apart."""
    return replace(step, keep_alive_seconds=interval_seconds)


def hang(seconds: float = 30.0) -> Reply:
    """A response that does not come within any sensible client timeout."""
    return delay(seconds, text_answer("слишком поздно"))


def _streamed(body: Any, step: Reply) -> bool:
    """A streaming request answered by a completion (errors stay plain JSON, as OpenAI's)."""
    return (
        isinstance(body, dict)
        and body.get("stream") is True
        and step.status == 200
        and isinstance(step.body, dict)
        and step.body.get("object") == "chat.completion"
    )


# ---- the server ----------------------------------------------------------------------------


def user_texts(body: Any) -> list[str]:
    """The user messages a chat-completions request showed the model, oldest first.

    A body that is not a request (``None`` for one that was not JSON) shows none.
    """
    messages = body.get("messages", []) if isinstance(body, dict) else []
    return [
        str(message["content"])
        for message in messages
        if message.get("role") == "user" and isinstance(message.get("content"), str)
    ]


def image_urls(body: Any) -> list[str]:
    """The image parts' URLs of every user message of a chat-completions request, in order."""
    messages = body.get("messages", []) if isinstance(body, dict) else []
    return [
        str(part["image_url"]["url"])
        for message in messages
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


class ScriptedOpenAIServer:
    """``POST /v1/chat/completions`` on 127.0.0.1 (a free port), answered from a script."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.unscripted: list[RecordedRequest] = []
        self.responder: Responder | None = None
        # The start-up probes of the model: recorded and answered apart from the turns.
        self.probes: list[RecordedRequest] = []
        self.probe_responder: Responder | None = None
        self._probe_steps: deque[Reply] = deque()
        self.latency_seconds = 0.0
        self.stream_chunk_chars = DEFAULT_STREAM_CHUNK_CHARS
        # Streams the client went away from before their end (and before stop()): a turn
        # cut by its deadline leaves one here while the server was still sending.
        self.streams_cut = 0
        # What lets streams stopped at their hold_after_chunks go on.
        self._released = asyncio.Event()
        self._steps: deque[Reply] = deque()
        # Transcriptions: recorded, answered from their own script (unscripted: 500).
        self.transcriptions: list[TranscriptionRequest] = []
        self._transcription_steps: deque[Reply] = deque()
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def base_url(self) -> str:
        """The ``base_url`` for the SDK, ``http://127.0.0.1:PORT/v1``."""
        if self._port is None:
            raise RuntimeError("the server is not started")
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def pending_steps(self) -> int:
        """Scripted steps not consumed yet."""
        return len(self._steps)

    def script(self, *steps: Reply) -> None:
        """Append steps; each request consumes the oldest one."""
        self._steps.extend(steps)

    def script_probes(self, *steps: Reply) -> None:
        """Append answers for the model probes; each probe takes the oldest (then "ok")."""
        self._probe_steps.extend(steps)

    def script_transcriptions(self, *steps: Reply) -> None:
        """Append answers for ``/v1/audio/transcriptions``; each request takes the oldest."""
        self._transcription_steps.extend(steps)

    async def start(self) -> None:
        """Listen on a free port."""
        # Requests with images (data URLs) are larger than aiohttp's default 1 MB limit.
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        # handler_cancellation: a client that gave up (timeout) cancels its hung handler;
        # a short shutdown timeout keeps teardown quick.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        # As the fake Bot API: a burst's connections must not overflow the accept queue.
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=LISTEN_BACKLOG)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """Release hung handlers and close the listener."""
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> "ScriptedOpenAIServer":
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in request.headers.items()}
        recorded = RecordedRequest(path=request.path, headers=headers, body=body)
        if user_texts(body) == [MODEL_PROBE_TEXT]:
            self.probes.append(recorded)
            return await self._answer(request, body, await self._probe_step(body))
        self.requests.append(recorded)

        step = await self._next_step(body)
        if step is None:
            self.unscripted.append(recorded)
            step = error(
                500,
                f"unscripted request #{len(self.requests)} to the scripted OpenAI server",
                code="unscripted_request",
                headers={"x-should-retry": "false"},
            )
        return await self._answer(request, body, step)

    async def _answer(self, request: web.Request, body: Any, step: Reply) -> web.StreamResponse:
        await self._sleep(self.latency_seconds + step.delay_seconds)
        if _streamed(body, step):
            return await self._stream(request, body, step)
        if isinstance(step.body, str):
            return web.Response(status=step.status, body=step.body.encode(), headers=step.headers)
        return web.json_response(step.body, status=step.status, headers=step.headers)

    async def _transcribe(self, request: web.Request) -> web.Response:
        """A multipart transcription request: recorded, answered by the next scripted step."""
        form = await request.post()
        upload = form.get("file")
        audio, filename = b"", ""
        if isinstance(upload, web.FileField):
            # aiohttp spools the upload to a temporary file: read it, then close it.
            with upload.file:
                audio = upload.file.read()
            filename = upload.filename
        language = form.get("language")
        self.transcriptions.append(
            TranscriptionRequest(
                model=str(form.get("model", "")),
                language=language if isinstance(language, str) else None,
                filename=filename,
                audio=audio,
            )
        )
        if self._transcription_steps:
            step = self._transcription_steps.popleft()
        else:
            step = error(
                500,
                "unscripted transcription request",
                code="unscripted_request",
                headers={"x-should-retry": "false"},
            )
        await self._sleep(step.delay_seconds)
        if isinstance(step.body, str):
            return web.Response(status=step.status, body=step.body.encode(), headers=step.headers)
        return web.json_response(step.body, status=step.status, headers=step.headers)

    async def _stream(self, request: web.Request, body: Any, step: Reply) -> web.StreamResponse:
        """The completion in ``step`` as server-sent events, paced and cut as scripted."""
        assert isinstance(step.body, dict)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = completion_events(
            step.body,
            chunk_chars=step.chunk_chars or self.stream_chunk_chars,
            include_usage=include_usage,
        )
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", **step.headers}
        )
        await response.prepare(request)
        try:
            return await self._send_events(response, events, step, request)
        except (asyncio.CancelledError, ConnectionResetError):
            if not self._closing.is_set():
                self.streams_cut += 1
            raise

    async def _send_events(
        self,
        response: web.StreamResponse,
        events: list[bytes],
        step: Reply,
        request: web.Request,
    ) -> web.StreamResponse:
        if step.keep_alive_seconds:
            # Comments only, never an event: every read gets bytes, no answer ever comes.
            while not self._closing.is_set():
                await response.write(b": keep-alive\n\n")
                await self._sleep(step.keep_alive_seconds)
            return response
        for number, event in enumerate(events):
            if number == step.hold_after_chunks:
                await self._wait_released_or_closing()
            if step.cut_after_chunks is not None and number >= step.cut_after_chunks:
                # No terminating chunk and no [DONE]: the client sees a stream cut mid-way.
                if request.transport is not None:
                    request.transport.close()
                return response
            if number and step.chunk_interval_seconds:
                if self._closing.is_set():
                    return response
                # A plain sleep: the pause between events is short, and cheap to wait out.
                await asyncio.sleep(step.chunk_interval_seconds)
            await response.write(event)
        await response.write_eof()
        return response

    async def _probe_step(self, body: Any) -> Reply:
        if self._probe_steps:
            return self._probe_steps.popleft()
        if self.probe_responder is None:
            return text_answer("ok")
        answer = self.probe_responder(body)
        return await answer if inspect.isawaitable(answer) else answer

    def release_streams(self) -> None:
        """Let every held stream (and any held later) send the rest."""
        self._released.set()

    async def _wait_released_or_closing(self) -> None:
        released = asyncio.ensure_future(self._released.wait())
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait({released, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            released.cancel()
            closing.cancel()

    async def _next_step(self, body: Any) -> Reply | None:
        if self._steps:
            return self._steps.popleft()
        if self.responder is None:
            return None
        answer = self.responder(body)
        return await answer if inspect.isawaitable(answer) else answer

    async def _sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        # Waiting on the closing event lets stop() release a deliberately hung response.
        try:
            await asyncio.wait_for(self._closing.wait(), timeout=seconds)
        except TimeoutError:
            return
