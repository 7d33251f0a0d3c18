"""The SDK's requests over our HTTP client: what the provider receives, what we read back.

A small aiohttp server records each request as it arrived on the socket (path, headers,
raw body) and answers with a gzip-compressed completion, as OpenAI's servers may. What
our client sends is compared with what the SDK's own ``chat.completions.create`` sends
over the SDK's own aiohttp client: the reference is the SDK's public API, on the wire.
"""

import gzip
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from aiohttp import web
from openai import AsyncOpenAI, DefaultAioHttpClient

from bot.llm.http_client import ChatHttpClient, ChatTransport, session_factory
from bot.llm.openai_client import OpenAIChatClient
from bot.llm.types import Message
from bot.testing.openai_server import completion_body
from tools.registry import ToolRegistry

MESSAGES: list[Message] = [
    {"role": "developer", "content": "Инструкция."},
    {"role": "user", "content": "Где заказ 8041? \u2028 «кавычки»"},
]


@dataclass(frozen=True, kw_only=True)
class Received:
    """One request as the server read it."""

    path: str
    headers: dict[str, str]
    body: bytes


class RecordingServer:
    """Answers every POST with a gzip-compressed text completion; a 500 first if asked."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.fail_first = False
        self.cookie: str | None = None
        self.redirect_from: str | None = None
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/provider/v1"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        self.received.append(
            Received(
                path=request.path,
                headers={key.lower(): value for key, value in request.headers.items()},
                body=await request.read(),
            )
        )
        if self.fail_first and len(self.received) == 1:
            return web.json_response(
                {"error": {"message": "busy"}}, status=500, headers={"retry-after-ms": "10"}
            )
        if request.path == self.redirect_from:
            return web.Response(status=307, headers={"Location": "/moved/chat/completions"})
        body = json.dumps(
            completion_body({"role": "assistant", "content": "Заказ в пути."})
        ).encode()
        response = web.Response(
            body=gzip.compress(body),
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )
        if self.cookie is not None:
            response.set_cookie("lb", self.cookie, path="/")
        return response


@pytest.fixture
async def server() -> AsyncIterator[RecordingServer]:
    """A started recording server, closed after the test."""
    recording = RecordingServer()
    await recording.start()
    yield recording
    await recording.close()


@pytest.fixture
async def client(server: RecordingServer) -> AsyncIterator[OpenAIChatClient]:
    """Our client to the recording server, one retry allowed."""
    chat = OpenAIChatClient.create(
        api_key="test-key",
        base_url=server.base_url,
        model="test-model",
        timeout_seconds=5,
        max_retries=1,
    )
    yield chat
    await chat.close()


@pytest.fixture
async def sdk(server: RecordingServer) -> AsyncIterator[AsyncOpenAI]:
    """The SDK's own client to the recording server, over its own aiohttp client."""
    reference = AsyncOpenAI(
        api_key="test-key",
        base_url=server.base_url,
        timeout=5,
        max_retries=1,
        http_client=DefaultAioHttpClient(trust_env=False),
    )
    yield reference
    await reference.close()


async def test_the_body_is_what_the_sdks_create_sends_compactly_encoded(
    server: RecordingServer,
    client: OpenAIChatClient,
    sdk: AsyncOpenAI,
    default_registry: ToolRegistry,
) -> None:
    """The tool list is encoded once and reused, yet each body says what the SDK's would.

    Same JSON value as ``chat.completions.create`` sends (keys in another order), and the
    same compact UTF-8 encoding (no spaces, no ``\\u`` escapes of Cyrillic or U+2028).
    """
    tools = default_registry.api_schemas()
    for _ in range(2):
        await client.generate_with_tools(MESSAGES, tools, "auto")
    await client.generate_with_tools(MESSAGES, [], "none")
    # Our messages and tool schemas are plain dicts; the SDK's parameters are TypedDicts.
    with_tools: dict[str, Any] = {"tools": list(tools), "tool_choice": "auto"}
    await sdk.chat.completions.create(
        model="test-model",
        messages=MESSAGES,  # type: ignore[arg-type]
        parallel_tool_calls=False,
        **with_tools,
    )
    await sdk.chat.completions.create(model="test-model", messages=MESSAGES)  # type: ignore[arg-type]

    ours_with, ours_again, ours_without, sdk_with, sdk_without = (
        request.body for request in server.received
    )
    assert ours_again == ours_with
    assert json.loads(ours_with) == json.loads(sdk_with)
    assert json.loads(ours_without) == json.loads(sdk_without)
    for body in (ours_with, ours_without, sdk_with, sdk_without):
        assert body == _compact(json.loads(body))
    assert "Где заказ 8041? \u2028 «кавычки»".encode() in ours_without


def _compact(value: object) -> bytes:
    """JSON as httpx2 and the SDK encode a body: compact separators, UTF-8, no escapes."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


async def test_the_path_and_headers_are_the_sdks_and_a_gzip_answer_is_read(
    server: RecordingServer, client: OpenAIChatClient
) -> None:
    result = await client.generate_with_tools(MESSAGES, [])

    assert result.text == "Заказ в пути."  # decompressed from the gzip body
    request = server.received[0]
    assert request.path == "/provider/v1/chat/completions"
    headers = request.headers
    assert headers["authorization"] == "Bearer test-key"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "application/json"
    assert headers["user-agent"].startswith("AsyncOpenAI/Python")
    assert headers["x-stainless-retry-count"] == "0"
    assert headers["x-stainless-read-timeout"] == "5"
    assert "gzip" in headers["accept-encoding"]  # httpx2's client default, still merged
    assert int(headers["content-length"]) == len(request.body)


async def test_a_retry_is_built_again_with_its_retry_count(
    server: RecordingServer, client: OpenAIChatClient
) -> None:
    server.fail_first = True

    result = await client.generate_with_tools(MESSAGES, [])

    assert result.text == "Заказ в пути."
    assert [r.headers["x-stainless-retry-count"] for r in server.received] == ["0", "1"]
    assert server.received[0].body == server.received[1].body


async def test_the_fast_build_request_builds_what_httpx2_would() -> None:
    """Same method, URL, headers (names, values, no duplicates), body and timeouts."""
    client = ChatHttpClient(ChatTransport(session_factory(None, 10)), trust_env=False)
    arguments: dict[str, Any] = {
        "headers": [
            ("Accept", "application/json"),
            ("Content-Type", "application/json"),
            ("User-Agent", "AsyncOpenAI/Python test"),
            ("Authorization", "Bearer test-key"),
        ],
        "timeout": httpx2.Timeout(7.0),
        "content": b'{"model":"m"}',
        "files": None,
        "params": None,
    }
    url = "http://127.0.0.1:9/provider/v1/chat/completions"
    try:
        fast = client.build_request("POST", url, **arguments)
        slow = httpx2.AsyncClient.build_request(client, "POST", url, **arguments)
    finally:
        await client.aclose()

    assert (fast.method, fast.url) == (slow.method, slow.url)
    assert sorted(fast.headers.multi_items()) == sorted(slow.headers.multi_items())
    assert fast.content == slow.content
    assert fast.extensions == slow.extensions


async def test_every_request_carries_what_the_sdks_create_sends(
    server: RecordingServer, sdk: AsyncOpenAI
) -> None:
    """Path and every header as ``chat.completions.create`` sends them, request by request.

    Both clients ask twice with one API key, then, with another, once more where the
    first answer fails (a retry). The SDK's client runs over the SDK's own aiohttp
    client, ours over :class:`ChatHttpClient`. Fails when an SDK upgrade changes what
    it sends for a chat request and our client does not send the same.
    """
    openai = AsyncOpenAI(
        api_key="first-key",
        base_url=server.base_url,
        timeout=5,
        max_retries=1,
        http_client=ChatHttpClient(ChatTransport(session_factory(None, 10)), trust_env=False),
    )
    ours = OpenAIChatClient(openai, "test-model")

    async def ask_ours() -> None:
        await ours.generate_with_tools(MESSAGES, [])

    async def ask_sdk() -> None:
        await sdk.chat.completions.create(model="test-model", messages=MESSAGES)  # type: ignore[arg-type]

    sent: dict[str, list[tuple[str, dict[str, str]]]] = {"ours": [], "sdk": []}
    try:
        for key, fail_first in (("first-key", False), ("first-key", False), ("second-key", True)):
            openai.api_key = sdk.api_key = key
            for name, ask in (("ours", ask_ours), ("sdk", ask_sdk)):
                server.received.clear()
                server.fail_first = fail_first
                await ask()
                sent[name] += [(r.path, r.headers) for r in server.received]
    finally:
        await ours.close()

    assert sent["ours"] == sent["sdk"]
    assert [headers["authorization"] for _, headers in sent["ours"]] == [
        "Bearer first-key",
        "Bearer first-key",
        "Bearer second-key",
        "Bearer second-key",
    ]
    assert [headers["x-stainless-retry-count"] for _, headers in sent["ours"]] == [
        "0",
        "0",
        "0",
        "1",
    ]


async def test_a_cookie_the_provider_sets_is_sent_back(
    server: RecordingServer, client: OpenAIChatClient
) -> None:
    """As httpx2 does: a load balancer's affinity cookie goes with the next request."""
    server.cookie = "node-7"
    await client.generate_with_tools(MESSAGES, [])
    await client.generate_with_tools(MESSAGES, [])

    assert "cookie" not in server.received[0].headers
    assert server.received[1].headers["cookie"] == "lb=node-7"
    assert server.received[1].headers["x-stainless-retry-count"] == "0"


async def test_a_redirect_is_followed_with_the_same_body(
    server: RecordingServer, client: OpenAIChatClient
) -> None:
    """The SDK follows redirects; a 307 keeps the method and the body."""
    server.redirect_from = "/provider/v1/chat/completions"

    result = await client.generate_with_tools(MESSAGES, [])

    assert result.text == "Заказ в пути."
    final = server.received[-1]
    assert final.path == "/moved/chat/completions"
    assert final.body == server.received[0].body
    assert final.headers["authorization"] == "Bearer test-key"
