"""OpenAIChatClient over HTTP: the real AsyncOpenAI against the scripted server."""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from bot.llm.errors import (
    LLMBadResponseError,
    LLMRateLimitError,
    LLMRequestError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from bot.llm.openai_client import InstructionsRole, OpenAIChatClient
from bot.llm.types import EncodedPart, Message
from bot.testing.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    completion_body,
    empty_choices,
    error,
    hang,
    json_answer,
    rate_limited,
    raw_body,
    refusal_answer,
    text_answer,
    tool_call_answer,
    tool_calls_answer,
)
from tests.support.corpus import RECORDED_COMPLETIONS, absent, load_corpus
from tools.registry import ToolRegistry
from turn import Usage

FAST_RETRY = {"retry-after-ms": "10"}
MESSAGES: list[Message] = [
    {"role": "developer", "content": "Инструкция."},
    {"role": "user", "content": "Где заказ 8041?"},
]

ClientFactory = Callable[..., Awaitable[OpenAIChatClient]]


@pytest.fixture
async def make_client(openai_server: ScriptedOpenAIServer) -> AsyncIterator[ClientFactory]:
    """Builds clients to ``server`` (no retries, 2 s timeout unless asked) and closes them."""
    clients: list[OpenAIChatClient] = []

    async def make(
        *,
        max_retries: int = 0,
        timeout_seconds: float = 2.0,
        instructions_role: InstructionsRole = "developer",
        max_connections: int = 1000,
    ) -> OpenAIChatClient:
        client = OpenAIChatClient.create(
            api_key="test-key",
            base_url=openai_server.base_url,
            model="test-model",
            timeout_seconds=timeout_seconds,
            max_retries=max_retries,
            instructions_role=instructions_role,
            max_connections=max_connections,
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def test_usage_and_ids_come_from_the_body_and_the_key_is_a_bearer_token(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    """The shape of a text answer is in the contract suite; here, where each field comes from."""
    openai_server.script(text_answer("Заказ в пути.", usage=(30, 7)))
    client = await make_client()

    result = await client.generate_with_tools(MESSAGES, [])

    assert result.usage == Usage(prompt_tokens=30, completion_tokens=7, total_tokens=37)
    assert result.response_id.startswith("chatcmpl-")
    assert result.model == "scripted-model"  # the model the server says answered
    assert openai_server.requests[0].headers["authorization"] == "Bearer test-key"


async def test_tool_calls_map_with_ids_and_raw_arguments(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    reply = tool_calls_answer(
        [("get_order_status", {"order_id": "8041"}), ("get_return_policy", "{bad json")]
    )
    openai_server.script(reply)
    client = await make_client()

    result = await client.generate_with_tools(MESSAGES, [])

    assert isinstance(reply.body, dict)
    sent = reply.body["choices"][0]["message"]["tool_calls"]
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        (sent[0]["id"], "get_order_status", '{"order_id": "8041"}'),
        (sent[1]["id"], "get_return_policy", "{bad json"),
    ]
    assert result.finish_reason == "tool_calls"


async def test_missing_usage_maps_to_unknown_counts(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(text_answer("ok", usage=None))
    client = await make_client()

    result = await client.generate_with_tools(MESSAGES, [])

    assert result.usage == Usage(prompt_tokens=None, completion_tokens=None, total_tokens=None)


async def test_refusal_and_custom_finish_reason_pass_through(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(refusal_answer("Не могу."), text_answer("Обрез", finish_reason="length"))
    client = await make_client()

    refused = await client.generate_with_tools(MESSAGES, [])
    cut = await client.generate_with_tools(MESSAGES, [])

    assert (refused.text, refused.refusal) == (None, "Не могу.")
    assert (cut.text, cut.finish_reason) == ("Обрез", "length")


async def test_429_becomes_rate_limit_error_after_the_sdk_retries(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(rate_limited(0.01), rate_limited(0.01))
    client = await make_client(max_retries=1)

    with pytest.raises(LLMRateLimitError):
        await client.generate_with_tools(MESSAGES, [])

    assert len(openai_server.requests) == 2
    assert openai_server.unscripted == []


async def test_a_500_is_retried_by_the_sdk_with_the_same_body_and_then_succeeds(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(error(500, headers=FAST_RETRY), text_answer("Ответ после сбоя."))
    client = await make_client(max_retries=1)

    result = await client.generate_with_tools(MESSAGES, [])

    assert result.text == "Ответ после сбоя."
    assert len(openai_server.requests) == 2
    assert openai_server.requests[0].body == openai_server.requests[1].body
    assert openai_server.unscripted == []


async def test_500_becomes_unavailable_error_after_the_sdk_retries(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(*[error(500, headers=FAST_RETRY) for _ in range(3)])
    client = await make_client(max_retries=2)

    with pytest.raises(LLMUnavailableError):
        await client.generate_with_tools(MESSAGES, [])

    assert len(openai_server.requests) == 3
    assert openai_server.unscripted == []


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_4xx_becomes_request_error_without_retry(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory, status: int
) -> None:
    openai_server.script(
        error(status, "context_length_exceeded", error_type="invalid_request_error")
    )
    client = await make_client(max_retries=2)

    with pytest.raises(LLMRequestError):
        await client.generate_with_tools(MESSAGES, [])

    assert len(openai_server.requests) == 1


async def test_hung_server_becomes_timeout_error(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(hang())
    client = await make_client(timeout_seconds=0.3)

    with pytest.raises(LLMTimeoutError):
        await client.generate_with_tools(MESSAGES, [])


@pytest.mark.parametrize(
    "body",
    ["not json", "", '{"id": "x", "choices": [{"message": 5}]}', "[1, 2]"],
    ids=["text", "empty", "wrong-shape", "json-list"],
)
async def test_malformed_body_becomes_bad_response_error(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory, body: str
) -> None:
    openai_server.script(raw_body(body))
    client = await make_client()

    with pytest.raises(LLMBadResponseError):
        await client.generate_with_tools(MESSAGES, [])


async def test_empty_choices_becomes_bad_response_error(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(empty_choices())
    client = await make_client()

    with pytest.raises(LLMBadResponseError, match="no choices"):
        await client.generate_with_tools(MESSAGES, [])


@pytest.mark.parametrize("tool_choice", ["auto", "none"])
async def test_request_offers_tools_sequentially_when_there_are_tools(
    openai_server: ScriptedOpenAIServer,
    make_client: ClientFactory,
    default_registry: ToolRegistry,
    tool_choice: Any,
) -> None:
    openai_server.script(tool_call_answer("get_order_status", {"order_id": "8041"}))
    client = await make_client()

    await client.generate_with_tools(MESSAGES, default_registry.api_schemas(), tool_choice)

    body = openai_server.requests[0].body
    assert body["model"] == "test-model"
    assert body["messages"] == MESSAGES
    assert body["tools"] == default_registry.api_schemas()
    assert body["tool_choice"] == tool_choice
    assert body["parallel_tool_calls"] is False


async def test_request_without_tools_carries_no_tool_fields(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    openai_server.script(text_answer("Резюме."))
    client = await make_client()

    await client.generate_with_tools(MESSAGES, [], "none")

    body = openai_server.requests[0].body
    assert body["messages"] == MESSAGES
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & body.keys()


async def test_what_the_fast_encoder_refuses_is_still_sent_as_json_writes_it(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    # A shop's MCP tool may bound a number past 64 bits; orjson refuses such integers.
    huge = 2**70
    tool = {
        "type": "function",
        "function": {
            "name": "reserve_stock",
            "description": "Резервирует товар «на складе» 📦",
            "parameters": {
                "type": "object",
                "properties": {"quantity": {"type": "integer", "maximum": huge}},
            },
        },
    }
    messages: list[Message] = [*MESSAGES, {"role": "user", "content": 'Кавычки " и \\ 😀\n'}]
    openai_server.script(text_answer("Готово."))
    client = await make_client()

    await client.generate_with_tools(messages, [tool], "auto")

    body = openai_server.requests[0].body
    assert body["tools"] == [tool]
    assert body["tools"][0]["function"]["parameters"]["properties"]["quantity"]["maximum"] == huge
    assert body["messages"] == messages


IMAGE_URL = "data:image/png;base64,iVBORw0KGgo="


def with_image() -> list[Message]:
    """The customer's message with an image part encoded once, as a turn builds it."""
    parts = [{"type": "text", "text": "Вот фото"}, EncodedPart.image(IMAGE_URL)]
    return [MESSAGES[0], {"role": "user", "content": parts}]


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_image_part_encoded_once_goes_into_every_body_as_it_is(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory, streamed: bool
) -> None:
    """The same encoded part in two calls (a tool step and the answer): the same image twice."""
    openai_server.script(text_answer("Вижу."), text_answer("Вижу снова."))
    client = await make_client()
    messages = with_image()
    on_text = (lambda _: None) if streamed else None

    for _ in range(2):
        await client.generate_with_tools(messages, [], "auto", on_text=on_text)

    for request in openai_server.requests:
        assert request.messages[-1]["content"] == [
            {"type": "text", "text": "Вот фото"},
            {"type": "image_url", "image_url": {"url": IMAGE_URL}},
        ]


async def test_an_image_part_goes_as_json_writes_it_when_the_fast_encoder_refuses(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    huge = 2**70
    tool = {
        "type": "function",
        "function": {
            "name": "reserve_stock",
            "parameters": {"type": "object", "properties": {"n": {"maximum": huge}}},
        },
    }
    openai_server.script(text_answer("Готово."))
    client = await make_client()

    await client.generate_with_tools(with_image(), [tool], "auto")

    (request,) = openai_server.requests
    assert request.messages[-1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": IMAGE_URL},
    }


async def test_a_lone_surrogate_fails_the_request_before_it_is_sent(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    # Text that is not UTF-8 cannot be sent; the turn fails with the client's own error.
    client = await make_client()

    with pytest.raises(LLMBadResponseError):
        await client.generate_with_tools(
            [*MESSAGES, {"role": "user", "content": "\ud800"}], [], "auto"
        )

    assert openai_server.requests == []


@pytest.mark.parametrize(
    ("role", "sent", "expected"),
    [("system", "developer", "system"), ("developer", "system", "developer")],
)
async def test_instructions_role_renames_the_instruction_message(
    openai_server: ScriptedOpenAIServer,
    make_client: ClientFactory,
    role: InstructionsRole,
    sent: str,
    expected: str,
) -> None:
    openai_server.script(text_answer("ok"))
    client = await make_client(instructions_role=role)
    messages: list[Message] = [{"role": sent, "content": "Инструкция."}, MESSAGES[1]]

    await client.generate_with_tools(messages, [])

    roles = [m["role"] for m in openai_server.requests[0].messages]
    assert roles == [expected, "user"]
    assert messages[0]["role"] == sent  # the caller's message is left alone


def _recorded_bodies() -> list[Any]:
    bodies = load_corpus(RECORDED_COMPLETIONS)
    if not bodies:
        return [pytest.param(None, marks=pytest.mark.skip(reason=absent(RECORDED_COMPLETIONS)))]
    return [pytest.param(body, id=f"{index}-{body['id']}") for index, body in enumerate(bodies)]


@pytest.mark.parametrize("body", _recorded_bodies())
async def test_recorded_openai_bodies_map_field_by_field(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory, body: dict[str, Any]
) -> None:
    """Bodies recorded from the real API (openai-python's tests) map to matching LLMResults."""
    openai_server.script(json_answer(body))
    client = await make_client()

    result = await client.generate_with_tools(MESSAGES, [])

    choice = body["choices"][0]
    message = choice["message"]
    usage = body["usage"]
    calls = message.get("tool_calls") or []
    assert result.response_id == body["id"]
    assert result.model == body["model"]
    assert result.text == message["content"]
    assert result.refusal == message.get("refusal")
    assert result.finish_reason == choice["finish_reason"]
    assert len(result.tool_calls) == len(calls)
    assert [c.name for c in result.tool_calls] == [c["function"]["name"] for c in calls]
    assert [c.arguments for c in result.tool_calls] == [c["function"]["arguments"] for c in calls]
    assert result.usage == Usage(
        prompt_tokens=usage["prompt_tokens"],
        completion_tokens=usage["completion_tokens"],
        total_tokens=usage["total_tokens"],
    )


async def test_max_connections_bounds_the_requests_in_flight(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    """Five requests at once over two connections: the openai_server never has more than two."""
    in_flight = 0
    most = 0
    two_arrived = asyncio.Event()

    async def responder(body: Any) -> Reply:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        if in_flight == 2:
            two_arrived.set()
        await two_arrived.wait()
        # Time for more requests to arrive, had the client opened more connections.
        await asyncio.sleep(0.05)
        in_flight -= 1
        return text_answer("ok")

    openai_server.responder = responder
    client = await make_client(max_connections=2)

    results = await asyncio.gather(*(client.generate_with_tools(MESSAGES, []) for _ in range(5)))

    assert [result.text for result in results] == ["ok"] * 5
    assert most == 2


def test_max_connections_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_connections"):
        OpenAIChatClient.create(
            api_key="k",
            base_url=None,
            model="m",
            timeout_seconds=1,
            max_retries=0,
            max_connections=0,
        )


async def test_a_completion_outside_the_sdk_types_still_maps_as_the_sdk_read_it(
    openai_server: ScriptedOpenAIServer, make_client: ClientFactory
) -> None:
    """An unknown finish reason and no ``created``/``object``: strict parsing fails, the
    lenient reading the SDK itself applies still gives the fields the turn needs."""
    body = completion_body({"content": "Готово."}, finish_reason="eos")
    del body["created"], body["object"]
    openai_server.script(json_answer(body))
    client = await make_client()

    result = await client.generate_with_tools(MESSAGES, [])

    assert (result.text, result.finish_reason, result.response_id) == (
        "Готово.",
        "eos",
        body["id"],
    )
    assert result.usage == Usage(prompt_tokens=12, completion_tokens=5, total_tokens=17)
