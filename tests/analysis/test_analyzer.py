"""SupportRequestAnalyzer over HTTP: the real openai SDK's Structured Outputs against the
scripted server, and the offline analyst the try-out uses."""

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.analysis.analyzer import (
    AnalysisInvalidError,
    AnalysisRefusedError,
    AnalysisUnavailableError,
    SupportRequestAnalyzer,
)
from bot.llm.openai_client import OpenAIChatClient
from bot.sessions.models import ConversationSession
from bot.settings import DEFAULT_CATEGORIES
from bot.testing.openai_server import (
    ScriptedOpenAIServer,
    error,
    refusal_answer,
    text_answer,
)
from bot.tryout.analyst import OfflineAnalyst
from prompts.registry import ANALYSIS_PROMPT_ID, build_default_prompt_registry

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
PROMPT = build_default_prompt_registry().get(ANALYSIS_PROMPT_ID, "1.0.0")

ANSWER: dict[str, Any] = {
    "category": "cancellation",
    "sentiment": "negative",
    "urgency": "high",
    "language": "ru",
    "resolved": False,
    "summary": "Клиент хочет отменить заказ 8041, заказ уже передан в доставку.",
    "next_step": "Проверить, можно ли вернуть заказ 8041 со склада доставки.",
    "quality": {"score": 3, "failed": ["resolved", "tone"]},
}


def conversation(*turns: tuple[str, str]) -> ConversationSession:
    session = ConversationSession.start("100", NOW, "support_chat", "1.5.0")
    for question, answer in turns:
        session = session.with_turn(question, answer, NOW, "1.5.0")
    return session


CANCEL = conversation(
    ("Отмените заказ 8041, срочно!!", "Заказ 8041 уже передан в доставку, отменить нельзя."),
)


@pytest.fixture
async def model(openai_server: ScriptedOpenAIServer) -> AsyncIterator[OpenAIChatClient]:
    client = OpenAIChatClient.create(
        api_key="test-key",
        base_url=openai_server.base_url,
        model="analysis-model",
        timeout_seconds=5.0,
        max_retries=0,
    )
    yield client
    await client.close()


def analyzer(
    client: Any, categories: tuple[str, ...] = DEFAULT_CATEGORIES
) -> SupportRequestAnalyzer:
    return SupportRequestAnalyzer(client=client, prompt=PROMPT, categories=categories)


async def test_the_model_answers_through_a_strict_json_schema_naming_the_shops_categories(
    openai_server: ScriptedOpenAIServer, model: OpenAIChatClient
):
    openai_server.script(text_answer(json.dumps(ANSWER, ensure_ascii=False)))

    outcome = await analyzer(model).analyze(CANCEL)

    assert outcome.analysis.model_dump() == ANSWER
    assert (outcome.turns, outcome.person) == (1, False)
    assert outcome.usage.total_tokens is not None
    request = openai_server.requests[-1].body
    response_format = request["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["strict"] is True
    schema = response_format["json_schema"]["schema"]
    assert schema["properties"]["category"]["enum"] == list(DEFAULT_CATEGORIES)
    assert set(schema["required"]) == set(ANSWER)
    # The rubric's score is asked in the same call (nullable: a person took part).
    quality = schema["properties"]["quality"]
    assert "null" in json.dumps(quality)
    # The transcript is data in a user message; the instruction lists the categories.
    instruction, transcript = request["messages"]
    assert "order_status" in instruction["content"]
    assert transcript["role"] == "user"
    assert "Клиент: Отмените заказ 8041, срочно!!" in transcript["content"]
    assert "Бот: Заказ 8041 уже передан в доставку" in transcript["content"]


async def test_a_shops_own_categories_are_what_the_model_may_name(
    openai_server: ScriptedOpenAIServer, model: OpenAIChatClient
):
    shop = ("warranty_claim", "other")
    openai_server.script(text_answer(json.dumps({**ANSWER, "category": "warranty_claim"})))

    outcome = await analyzer(model, shop).analyze(CANCEL)

    assert outcome.analysis.category == "warranty_claim"
    schema = openai_server.requests[-1].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["category"]["enum"] == list(shop)


async def test_a_category_the_shop_does_not_have_is_invalid(
    openai_server: ScriptedOpenAIServer, model: OpenAIChatClient
):
    openai_server.script(text_answer(json.dumps({**ANSWER, "category": "weather"})))

    with pytest.raises(AnalysisInvalidError):
        await analyzer(model).analyze(CANCEL)


@pytest.mark.parametrize(
    "body",
    ["not json at all", json.dumps({**ANSWER, "sentiment": "furious"}), json.dumps({"a": 1})],
)
async def test_an_answer_that_is_not_the_analysis_is_invalid(
    openai_server: ScriptedOpenAIServer, model: OpenAIChatClient, body: str
):
    openai_server.script(text_answer(body))

    with pytest.raises(AnalysisInvalidError):
        await analyzer(model).analyze(CANCEL)


async def test_a_refusal_is_no_analysis(
    openai_server: ScriptedOpenAIServer, model: OpenAIChatClient
):
    openai_server.script(refusal_answer("I can't analyse that."))

    with pytest.raises(AnalysisRefusedError):
        await analyzer(model).analyze(CANCEL)


async def test_an_unreachable_model_is_unavailable(
    openai_server: ScriptedOpenAIServer, model: OpenAIChatClient
):
    openai_server.script(error(503, headers={"x-should-retry": "false"}))

    with pytest.raises(AnalysisUnavailableError):
        await analyzer(model).analyze(CANCEL)


async def test_a_server_without_json_schema_is_asked_in_json_mode_and_checked_here(
    openai_server: ScriptedOpenAIServer, model: OpenAIChatClient
):
    refused = error(
        400,
        "response_format json_schema is not supported by this model",
        error_type="invalid_request_error",
    )
    openai_server.script(refused, text_answer(json.dumps(ANSWER, ensure_ascii=False)))

    outcome = await analyzer(model).analyze(CANCEL)

    assert outcome.analysis.category == "cancellation"
    fallback = openai_server.requests[-1].body
    assert fallback["response_format"] == {"type": "json_object"}
    assert "JSON Schema" in fallback["messages"][-1]["content"]
    # Remembered: the next analysis goes to JSON mode straight away, and is validated.
    openai_server.script(text_answer(json.dumps({**ANSWER, "urgency": "yesterday"})))
    with pytest.raises(AnalysisInvalidError):
        await analyzer(model).analyze(CANCEL)
    assert openai_server.requests[-1].body["response_format"] == {"type": "json_object"}


async def test_an_analysis_model_of_its_own_shares_the_chat_models_connections(
    openai_server: ScriptedOpenAIServer, model: OpenAIChatClient
):
    openai_server.script(text_answer(json.dumps(ANSWER)))

    await analyzer(model.with_model("cheap-model")).analyze(CANCEL)

    assert openai_server.requests[-1].body["model"] == "cheap-model"


@pytest.mark.parametrize(
    ("turns", "expected"),
    [
        (
            [("Где заказ 8041?", "Заказ 8041: передан в доставку.")],
            {"category": "order_status", "sentiment": "neutral", "resolved": True},
        ),
        (
            [("Хочу вернуть кофемашину", "Кофемашину можно вернуть в течение 14 дней.")],
            {"category": "return", "language": "ru", "resolved": True},
        ),
        (
            [("Это безобразие!! Срочно отмените заказ 8041", "Отменить заказ нельзя.")],
            {"category": "complaint", "sentiment": "negative", "urgency": "high"},
        ),
        (
            [("Where is my order 8041?", "Order 8041 is on its way.")],
            {"category": "order_status", "language": "en"},
        ),
        (
            [("Спасибо, всё понятно", "Рады помочь!")],
            {"category": "other", "sentiment": "positive"},
        ),
    ],
)
async def test_the_offline_analyst_answers_from_the_conversations_words(turns, expected):
    outcome = await analyzer(OfflineAnalyst()).analyze(conversation(*turns))

    got = outcome.analysis.model_dump()
    assert {name: got[name] for name in expected} == expected
    assert outcome.model == "offline-demo"
    again = await analyzer(OfflineAnalyst()).analyze(conversation(*turns))
    assert again.analysis == outcome.analysis, "deterministic"
