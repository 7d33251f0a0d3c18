"""A model configured wrong is told apart from one that is busy: by the client, the turn, the text.

The real ``AsyncOpenAI`` against the scripted OpenAI-compatible server: 401, 403 and
404 are configuration faults (a wrong key, model or base URL: no retry helps), 429
and 5xx are load (the customer is asked to try again in a minute, as before).
"""

from collections.abc import AsyncIterator

import pytest

from bot import customer_texts
from bot.chat_errors import ChatServiceError
from bot.language.catalogs import Catalogs
from bot.llm.errors import (
    LLMClientError,
    LLMConfigurationError,
    LLMRateLimitError,
    LLMRequestError,
    LLMUnavailableError,
    LLMUnreachableError,
)
from bot.llm.openai_client import OpenAIChatClient
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, error, text_answer
from bot.testing.redis_server import free_port
from turn import TurnOutcome

NO_RETRY = {"x-should-retry": "false"}
MESSAGES = [{"role": "user", "content": "Где заказ?"}]


@pytest.fixture
async def client(openai_server: ScriptedOpenAIServer) -> AsyncIterator[OpenAIChatClient]:
    made = OpenAIChatClient.create(
        api_key="test-key",
        base_url=openai_server.base_url,
        model="gpt-nope",
        timeout_seconds=2.0,
        max_retries=0,
    )
    yield made
    await made.close()


@pytest.mark.parametrize(
    ("reply", "kind", "words"),
    [
        (
            error(401, "Incorrect API key provided", error_type="invalid_request_error"),
            LLMConfigurationError,
            "OPENAI_API_KEY",
        ),
        (
            error(403, "Project does not have access", error_type="invalid_request_error"),
            LLMConfigurationError,
            "OPENAI_API_KEY",
        ),
        (
            error(404, "The model `gpt-nope` does not exist", code="model_not_found"),
            LLMConfigurationError,
            "LLM_MODEL",
        ),
        (error(429, "Rate limit reached", headers=NO_RETRY), LLMRateLimitError, "rate"),
        (error(503, "overloaded", headers=NO_RETRY), LLMUnavailableError, "503"),
        (
            error(400, "context too long", error_type="invalid_request_error"),
            LLMRequestError,
            "400",
        ),
    ],
    ids=["401", "403", "404", "429", "503", "400"],
)
async def test_a_turns_request_failure_is_classified_by_its_status(
    openai_server: ScriptedOpenAIServer,
    client: OpenAIChatClient,
    reply: Reply,
    kind: type[LLMClientError],
    words: str,
) -> None:
    openai_server.script(reply)

    with pytest.raises(LLMClientError) as raised:
        await client.generate_with_tools(MESSAGES, [])

    assert type(raised.value) is kind
    assert words in str(raised.value)


async def test_the_probe_asks_one_short_question_apart_from_the_turns(
    openai_server: ScriptedOpenAIServer, client: OpenAIChatClient
) -> None:
    await client.probe(timeout_seconds=2.0)

    assert openai_server.requests == []  # the turns' script is left alone
    assert len(openai_server.probes) == 1
    assert openai_server.probes[0].body["model"] == "gpt-nope"


async def test_the_probe_says_what_is_wrong(
    openai_server: ScriptedOpenAIServer, client: OpenAIChatClient
) -> None:
    openai_server.script_probes(error(404, "The model `gpt-nope` does not exist"))
    with pytest.raises(LLMConfigurationError) as raised:
        await client.probe(timeout_seconds=2.0)
    assert "LLM_MODEL gpt-nope" in str(raised.value)

    openai_server.script_probes(text_answer("ok"))
    await client.probe(timeout_seconds=2.0)


async def test_an_unreachable_provider_is_told_apart_from_a_busy_one() -> None:
    nobody = OpenAIChatClient.create(
        api_key="test-key",
        base_url=f"http://127.0.0.1:{free_port()}/v1",
        model="gpt-nope",
        timeout_seconds=2.0,
        max_retries=0,
    )
    try:
        with pytest.raises(LLMUnreachableError):
            await nobody.probe(timeout_seconds=2.0)
        with pytest.raises(LLMUnreachableError):
            await nobody.generate_with_tools(MESSAGES, [])
    finally:
        await nobody.close()


@pytest.mark.parametrize("language", ["ru", "en"])
def test_customers_read_a_configuration_fault_as_such_and_load_as_before(language: str) -> None:
    gettext = Catalogs().texts(language).gettext
    misconfigured = customer_texts.failure_message(
        ChatServiceError("404", "T1", TurnOutcome.MODEL_MISCONFIGURED), "T1", gettext
    )
    busy = customer_texts.failure_message(
        ChatServiceError("429", "T2", TurnOutcome.MODEL_UNAVAILABLE), "T2", gettext
    )

    if language == "ru":
        assert misconfigured.startswith("Сейчас я не могу ответить из-за ошибки в настройках бота.")
        assert busy.startswith("Сейчас я перегружен")
    else:
        assert misconfigured.startswith("I can't answer right now because of an error in the bot's")
        assert "перегружен" not in busy
    assert "T1" in misconfigured


@pytest.mark.parametrize("language", ["ru", "en"])
def test_customers_read_an_unreachable_model_as_such(language: str) -> None:
    gettext = Catalogs().texts(language).gettext
    unreachable = customer_texts.failure_message(
        ChatServiceError("refused", "T3", TurnOutcome.MODEL_UNREACHABLE), "T3", gettext
    )

    if language == "ru":
        assert unreachable.startswith("Сейчас я не могу связаться с сервисом, который готовит")
    else:
        assert unreachable.startswith("I can't reach the service that prepares my answers")
    assert "перегружен" not in unreachable
    assert "overloaded" not in unreachable
