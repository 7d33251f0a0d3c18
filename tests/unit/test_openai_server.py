"""The scripted OpenAI server itself: the behaviours other tests and the benchmark rely on."""

from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai import APITimeoutError, AsyncOpenAI, InternalServerError

from bot.testing.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    delay,
    text_answer,
    tool_call_answer,
)


@pytest.fixture
async def sdk(openai_server: ScriptedOpenAIServer) -> AsyncIterator[AsyncOpenAI]:
    client = AsyncOpenAI(api_key="k", base_url=openai_server.base_url, max_retries=2, timeout=2.0)
    yield client
    await client.close()


async def ask(sdk: AsyncOpenAI, text: str = "Привет") -> Any:
    return await sdk.chat.completions.create(
        model="m", messages=[{"role": "user", "content": text}]
    )


async def test_unscripted_request_fails_at_once_and_is_recorded(
    openai_server: ScriptedOpenAIServer, sdk: AsyncOpenAI
) -> None:
    with pytest.raises(InternalServerError, match="unscripted request"):
        await ask(sdk)

    # Marked not retryable: one request despite max_retries=2.
    assert len(openai_server.requests) == len(openai_server.unscripted) == 1
    assert openai_server.unscripted[0].messages == [{"role": "user", "content": "Привет"}]


async def test_script_comes_first_then_the_responder(
    openai_server: ScriptedOpenAIServer, sdk: AsyncOpenAI
) -> None:
    seen: list[Any] = []

    def responder(body: Any) -> Reply:
        seen.append(body)
        return text_answer(f"эхо: {body['messages'][-1]['content']}")

    openai_server.script(text_answer("по сценарию"))
    openai_server.responder = responder

    first = await ask(sdk, "раз")
    second = await ask(sdk, "два")

    assert first.choices[0].message.content == "по сценарию"
    assert second.choices[0].message.content == "эхо: два"
    assert [body["messages"][-1]["content"] for body in seen] == ["два"]
    assert openai_server.pending_steps == 0
    assert openai_server.unscripted == []


async def test_async_responder_can_answer_with_a_tool_call(
    openai_server: ScriptedOpenAIServer, sdk: AsyncOpenAI
) -> None:
    async def responder(body: Any) -> Reply:
        if body["messages"][-1]["role"] == "tool":
            return text_answer("готово")
        return tool_call_answer("get_support_hours", {})

    openai_server.responder = responder

    completion = await ask(sdk)

    [call] = completion.choices[0].message.tool_calls or []
    assert call.type == "function"
    assert (call.function.name, call.function.arguments) == ("get_support_hours", "{}")
    assert completion.choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize("slow", ["latency", "delay"])
async def test_latency_and_delay_hold_the_answer_back(
    openai_server: ScriptedOpenAIServer, slow: str
) -> None:
    """A delay longer than the client's timeout makes the client give up (no clock reading)."""
    if slow == "latency":
        openai_server.latency_seconds = 5.0
        openai_server.script(text_answer("поздно"))
    else:
        openai_server.script(delay(5.0, text_answer("поздно")))
    async with AsyncOpenAI(
        api_key="k", base_url=openai_server.base_url, max_retries=0, timeout=0.2
    ) as client:
        with pytest.raises(APITimeoutError):
            await ask(client)
