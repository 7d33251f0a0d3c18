"""A simulated customer: a model (here the scripted OpenAI-compatible server) plays the customer."""

from collections.abc import Callable
from pathlib import Path

from bot.evaluation.cli import run_scenarios
from bot.evaluation.customers import parse_move
from bot.evaluation.running import customer_model
from bot.evaluation.scenario import load_scenarios
from bot.llm.openai_client import OpenAIChatClient
from bot.settings import Settings
from bot.testing.openai_server import ScriptedOpenAIServer, text_answer
from bot.testing.settings import make_settings

SIMULATED = """
name: simulated-cancel
language: ru
customer:
  instructions: "Вы хотите отменить заказ 8042. Подтвердите отмену на карточке."
  max_turns: 5
expect:
  actions: [{tool: cancel_order, arguments: {order_id: "8042"}, outcome: executed}]
  no_other_actions: true
"""


async def test_the_model_plays_the_customer_and_its_press_goes_through_the_card(
    eval_settings: Settings,
    openai_server: ScriptedOpenAIServer,
    write_scenario: Callable[[str, str], Path],
):
    openai_server.script(
        text_answer("Отмените, пожалуйста, заказ 8042"),
        text_answer("[confirm]"),
        text_answer("Спасибо! [done]"),
    )
    client = OpenAIChatClient.create(
        api_key="sk-test",
        base_url=openai_server.base_url,
        model="customer-model",
        timeout_seconds=5,
        max_retries=0,
        instructions_role="system",
    )
    try:
        report = await run_scenarios(
            load_scenarios([write_scenario("simulated", SIMULATED)]),
            eval_settings,
            customer_model=client,
        )
    finally:
        await client.close()
    assert report.scores[0].reasons == ()
    first, second, third = (request.messages for request in openai_server.requests)
    assert "отменить заказ 8042" in first[0]["content"]
    assert "[confirm]" in first[0]["content"]
    # The bot's answer and its card, buttons named, are what the customer model reads next.
    assert second[-1]["role"] == "user"
    assert "[A card with two buttons: confirm | decline]" in second[-1]["content"]
    assert "Отменить заказ 8042" in second[-1]["content"]
    # The press is the customer's own turn; the outcome is the bot's next words.
    assert third[-2] == {"role": "assistant", "content": "[confirm]"}
    assert "8042 отменён" in third[-1]["content"]


def test_the_customer_model_defaults_to_the_bots_endpoint_and_key():
    bot_model = make_settings(
        LLM_BACKEND="openai",
        OPENAI_API_KEY="sk-bot",
        OPENAI_BASE_URL="http://models.example/v1",
        LLM_MODEL="bot-model",
    )
    chosen = customer_model(bot_model)
    assert chosen is not None
    assert (chosen.model, chosen.base_url, chosen.api_key) == (
        "bot-model",
        "http://models.example/v1",
        "sk-bot",
    )
    own = customer_model(
        make_settings(
            EVAL_CUSTOMER_MODEL="customer",
            EVAL_CUSTOMER_API_KEY="sk-customer",
            EVAL_CUSTOMER_BASE_URL="http://other.example/v1",
        )
    )
    assert own is not None
    assert (own.model, own.base_url, own.api_key) == (
        "customer",
        "http://other.example/v1",
        "sk-customer",
    )
    # The offline demo bot has no model to lend the customer.
    assert customer_model(make_settings()) is None


def test_the_customer_models_answers_become_moves():
    assert parse_move("[confirm]").kind == "confirm"
    assert parse_move(" [Decline] ").kind == "decline"
    assert parse_move("Всё, спасибо [done]").kind == "done"
    assert parse_move("").kind == "done"
    move = parse_move("Где мой заказ?")
    assert (move.kind, move.text) == ("say", "Где мой заказ?")
