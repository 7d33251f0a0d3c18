"""The streamed path of OpenAIChatClient: the real AsyncOpenAI against the scripted server's SSE."""

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2
import pytest

from bot.llm.errors import LLMRateLimitError, LLMTimeoutError, LLMUnavailableError
from bot.llm.http_client import ChatTransport, EventStream, session_factory
from bot.llm.openai_client import OpenAIChatClient
from bot.llm.streaming import sse_data
from bot.llm.types import Message
from bot.testing.openai_server import (
    ScriptedOpenAIServer,
    cut_stream,
    held_stream,
    rate_limited,
    raw_body,
    text_answer,
    tool_calls_answer,
    trickle,
)
from tools.registry import ToolRegistry

MESSAGES: list[Message] = [
    {"role": "developer", "content": "Инструкция."},
    {"role": "user", "content": "Где заказ 8041?"},
]
ANSWER = "Ваш заказ 8041 передан в службу доставки и приедет завтра."

ClientFactory = Callable[..., Awaitable[OpenAIChatClient]]


@pytest.fixture
async def make_client(openai_server: ScriptedOpenAIServer) -> AsyncIterator[ClientFactory]:
    """Builds clients to the scripted server (no retries, 2 s timeout unless asked)."""
    clients: list[OpenAIChatClient] = []

    async def make(*, max_retries: int = 0, timeout_seconds: float = 2.0) -> OpenAIChatClient:
        client = OpenAIChatClient.create(
            api_key="test-key",
            base_url=openai_server.base_url,
            model="test-model",
            timeout_seconds=timeout_seconds,
            max_retries=max_retries,
            instructions_role="system",
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def test_a_listener_makes_the_request_a_stream_with_usage(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory, default_registry: ToolRegistry
) -> None:
    openai_server.script(text_answer(ANSWER, usage=(30, 7)))
    client = await make_client()
    pieces: list[str] = []

    result = await client.generate_with_tools(
        MESSAGES, default_registry.api_schemas(), on_text=pieces.append
    )

    [request] = openai_server.requests
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.body["parallel_tool_calls"] is False
    assert request.body["tool_choice"] == "auto"
    assert request.messages[0]["role"] == "system"
    assert len(pieces) > 1
    assert "".join(pieces) == result.text == ANSWER
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (30, 7)
    assert result.model == "scripted-model"
    assert result.response_id.startswith("chatcmpl-")


async def test_text_is_told_as_it_arrives_not_at_the_end(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    # The server stops after the first few events until the test lets it go on.
    openai_server.script(held_stream(trickle(text_answer(ANSWER), chunk_chars=6), after_chunks=3))
    client = await make_client()
    seen: list[str] = []
    told = asyncio.Event()

    def tell(piece: str) -> None:
        seen.append(piece)
        told.set()

    answering = asyncio.create_task(client.generate_with_tools(MESSAGES, [], "none", on_text=tell))
    try:
        # Told the first pieces while the rest of the answer cannot have been sent yet.
        async with asyncio.timeout(30):
            await told.wait()
        assert not answering.done()
        assert 0 < len("".join(seen)) < len(ANSWER)
    finally:
        openai_server.release_streams()
    result = await answering

    assert result.text == ANSWER
    assert "".join(seen) == ANSWER
    assert len(seen) == -(-len(ANSWER) // 6)


async def test_tool_call_deltas_are_assembled_in_order(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory, default_registry: ToolRegistry
) -> None:
    openai_server.script(
        trickle(
            tool_calls_answer(
                [("get_order_status", {"order_id": "8041"}), ("get_support_hours", {})]
            ),
            chunk_chars=1,
            interval_seconds=0.0,
        )
    )
    client = await make_client()
    pieces: list[str] = []

    result = await client.generate_with_tools(
        MESSAGES, default_registry.api_schemas(), on_text=pieces.append
    )

    assert pieces == []
    assert result.finish_reason == "tool_calls"
    assert [call.name for call in result.tool_calls] == ["get_order_status", "get_support_hours"]
    assert [json.loads(call.arguments) for call in result.tool_calls] == [{"order_id": "8041"}, {}]
    assert all(call.id.startswith("call_") for call in result.tool_calls)


async def test_a_stream_cut_mid_way_is_a_model_error_and_no_answer(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(cut_stream(text_answer(ANSWER), after_chunks=3))
    client = await make_client(max_retries=2)
    pieces: list[str] = []

    with pytest.raises(LLMUnavailableError):
        await client.generate_with_tools(MESSAGES, [], "none", on_text=pieces.append)

    assert pieces  # some text was shown...
    assert "".join(pieces) != ANSWER  # ...but never the answer
    # A stream is not retried once it has started: its text was already told.
    assert len(openai_server.requests) == 1


async def test_a_stream_that_stalls_is_a_timeout(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(trickle(text_answer(ANSWER), chunk_chars=20, interval_seconds=5.0))
    client = await make_client(timeout_seconds=0.3)

    with pytest.raises(LLMTimeoutError):
        await client.generate_with_tools(MESSAGES, [], "none", on_text=lambda _: None)


async def test_the_sdk_retries_a_429_before_the_stream_starts(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(rate_limited(), text_answer(ANSWER))
    client = await make_client(max_retries=1)
    pieces: list[str] = []

    result = await client.generate_with_tools(MESSAGES, [], "none", on_text=pieces.append)

    assert result.text == "".join(pieces) == ANSWER
    assert len(openai_server.requests) == 2


async def test_a_429_after_the_retries_is_a_rate_limit_error(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(rate_limited())
    client = await make_client()

    with pytest.raises(LLMRateLimitError):
        await client.generate_with_tools(MESSAGES, [], "none", on_text=lambda _: None)


async def test_an_error_event_in_the_stream_is_a_model_error(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    first = (
        '{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
        '"choices":[{"index":0,"delta":{"content":"Ваш"},"finish_reason":null}]}'
    )
    openai_server.script(
        raw_body(
            f'data: {first}\n\ndata: {{"error": {{"message": "overloaded"}}}}\n\n',
            content_type="text/event-stream",
        )
    )
    client = await make_client()
    pieces: list[str] = []

    with pytest.raises(LLMUnavailableError):
        await client.generate_with_tools(MESSAGES, [], "none", on_text=pieces.append)

    assert pieces == ["Ваш"]


async def test_chunks_a_compatible_server_leaves_fields_out_of_still_count(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    """No ``object`` or ``created`` (as some servers send): read as the SDK would read it."""
    events = [
        '{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"Заказ "}}]}',
        '{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"в пути."}}]}',
        '{"id":"c1","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    ]
    body = "".join(f"data: {event}\n\n" for event in events) + "data: [DONE]\n\n"
    openai_server.script(raw_body(body, content_type="text/event-stream"))
    client = await make_client()

    result = await client.generate_with_tools(MESSAGES, [], "none", on_text=lambda _: None)

    assert (result.text, result.finish_reason, result.model) == ("Заказ в пути.", "stop", "m")


async def test_the_streamed_body_is_encoded_once_per_request_as_create_would_send_it(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory, default_registry: ToolRegistry
) -> None:
    """The stream asks for the usage and offers the tools as a plain request does."""
    openai_server.script(text_answer(ANSWER), text_answer(ANSWER))
    client = await make_client()

    await client.generate_with_tools(
        MESSAGES, default_registry.api_schemas(), on_text=lambda _: None
    )
    await client.generate_with_tools(MESSAGES, [], "none", on_text=lambda _: None)

    with_tools, without = (request.body for request in openai_server.requests)
    assert with_tools["tools"] == list(default_registry.api_schemas())
    assert (with_tools["stream"], without["stream"]) == (True, True)
    assert without["stream_options"] == {"include_usage": True}
    assert "tools" not in without
    assert "tool_choice" not in without
    assert without["messages"] == [{**MESSAGES[0], "role": "system"}, MESSAGES[1]]


async def test_paced_reads_gather_the_events_that_arrive_between_them(
    openai_server: ScriptedOpenAIServer,
) -> None:
    """With ``pace_seconds`` the socket is read a few times, not once per event."""
    events = 60
    transport = ChatTransport(session_factory(None, 4))
    try:
        reads: dict[float, list[bytes]] = {}
        for pace in (0.0, 0.1):
            openai_server.script(
                trickle(text_answer("ж" * events), chunk_chars=1, interval_seconds=0.01)
            )
            response = await transport.handle_async_request(_stream_request(openai_server))
            stream = response.stream
            assert isinstance(stream, EventStream)
            stream.pace_seconds = pace
            reads[pace] = [piece async for piece in stream]
            await stream.aclose()
    finally:
        await transport.aclose()

    unpaced, paced = reads[0.0], reads[0.1]
    assert b"".join(paced).count(b"data:") == b"".join(unpaced).count(b"data:") >= events
    # 60 events 10 ms apart: one read each unpaced, one per 0.1 s paced.
    assert len(paced) <= 12
    assert len(unpaced) > 2 * len(paced)


async def test_sse_lines_split_between_reads_and_crlf_endings_are_read_whole() -> None:
    """Lines cut anywhere, ``\\r\\n`` endings, comments and a last line without newline."""
    body = (
        b': keep-alive\r\n\r\ndata: {"a": 1}\r\n\r\nevent: x\ndata:{"b": "\xd0\xb6"}\n\n'
        b"data: [DONE]"
    )
    pieces = [body[i : i + 5] for i in range(0, len(body), 5)]

    data = [item async for item in sse_data(httpx2.Response(200, stream=_Pieces(pieces)))]

    assert data == [b'{"a": 1}', '{"b": "ж"}'.encode(), b"[DONE]"]


async def test_a_compressed_event_stream_is_decoded_before_its_lines_are_read() -> None:
    body = b'data: {"a": 1}\n\ndata: [DONE]\n\n'
    response = httpx2.Response(
        200,
        headers={"Content-Encoding": "gzip", "Content-Type": "text/event-stream"},
        stream=_Pieces([gzip.compress(body)]),
    )

    assert [item async for item in sse_data(response)] == [b'{"a": 1}', b"[DONE]"]


class _Pieces(httpx2.AsyncByteStream):
    """A body that arrives in the given pieces."""

    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


def _stream_request(server: ScriptedOpenAIServer) -> httpx2.Request:
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    return httpx2.Request(
        "POST",
        f"{server.base_url.rstrip('/')}/chat/completions",
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        extensions={"timeout": httpx2.Timeout(5.0).as_dict()},
    )
