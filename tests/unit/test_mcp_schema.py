"""A shop's MCP tool schemas, arguments, cards and results (tools/mcp), without a server."""

import json
from typing import Any

import pytest

from tools.mcp.schema import ArgumentsInvalid, ArgumentsSchema, McpSchemaError
from tools.mcp.tool import McpCallOutcome, McpTool, business_error, tool_result_payload
from turn import ToolBusinessError, TurnContext

OPTIONAL = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 2},
        "sort": {"type": "string", "enum": ["price", "rating"]},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "note": {"type": "string"}},
                "required": ["sku"],
            },
        },
    },
    "required": ["query"],
}


def test_optional_fields_become_nullable_in_a_closed_strict_schema() -> None:
    schema = ArgumentsSchema.build(OPTIONAL)

    assert schema.strict
    parameters = schema.parameters
    assert parameters["additionalProperties"] is False
    assert parameters["required"] == ["query", "sort", "lines"]
    assert parameters["properties"]["sort"] == {
        "type": ["string", "null"],
        "enum": ["price", "rating", None],
    }
    line = parameters["properties"]["lines"]["items"]
    assert line["additionalProperties"] is False
    assert line["required"] == ["sku", "note"]
    assert line["properties"]["note"] == {"type": ["string", "null"]}
    assert "minLength" not in parameters["properties"]["query"]


@pytest.mark.parametrize(
    "fragment",
    [
        {"$ref": "#/$defs/x"},
        {"type": "string", "format": "uri"},
        {"type": "object", "additionalProperties": True},
        {"type": "object"},
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    ],
)
def test_what_strict_mode_cannot_say_falls_back_to_the_servers_schema(
    fragment: dict[str, Any],
) -> None:
    source = {"type": "object", "properties": {"x": fragment}, "required": ["x"]}
    if "$ref" in fragment:
        source["$defs"] = {"x": {"type": "string"}}

    schema = ArgumentsSchema.build(source)

    assert not schema.strict
    assert schema.parameters["properties"]["x"] == fragment


def test_a_tool_without_properties_gets_an_empty_closed_object() -> None:
    schema = ArgumentsSchema.build({"type": "object"})

    assert schema.strict
    assert schema.parameters == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    assert schema.validate("{}") == {}


def test_a_schema_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(McpSchemaError):
        ArgumentsSchema.build({"type": "string"})


def test_validation_drops_the_nulls_of_optional_fields_and_names_rules_not_values() -> None:
    schema = ArgumentsSchema.build(OPTIONAL)

    assert schema.validate('{"query": "кофе", "sort": null, "lines": null}') == {"query": "кофе"}
    with pytest.raises(ArgumentsInvalid) as invalid:
        schema.validate('{"query": "к", "sort": "secret-value", "lines": [{"note": null}]}')
    problems = invalid.value.problems
    assert "query: must satisfy minLength 2" in problems
    assert any(problem.startswith("sort: must satisfy enum") for problem in problems)
    assert any("'sku' is a required property" in problem for problem in problems)
    assert "secret-value" not in json.dumps(problems)


def test_bound_arguments_are_hidden_and_a_model_supplied_one_refused() -> None:
    source = {
        "type": "object",
        "properties": {"customer_id": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["customer_id", "limit"],
    }
    schema = ArgumentsSchema.build(source, bound=["customer_id"])

    assert list(schema.parameters["properties"]) == ["limit"]
    assert schema.parameters["required"] == ["limit"]
    with pytest.raises(ArgumentsInvalid) as invalid:
        schema.validate('{"limit": 1, "customer_id": "someone"}')
    assert invalid.value.problems[0].startswith("customer_id: filled by the application")


async def _never(*_args: Any) -> McpCallOutcome:
    raise AssertionError("not called")


def _tool(**overrides: Any) -> McpTool:
    values: dict[str, Any] = {
        "name": "cancel_order",
        "server": "shop",
        "remote_name": "cancel_order",
        "title": "Отмена заказа",
        "description": "Отменяет заказ.",
        "schema": ArgumentsSchema.build({"type": "object"}),
        "call": _never,
        "needs_card": True,
    }
    values.update(overrides)
    return McpTool(**values)


def test_the_card_lists_the_arguments_or_follows_the_shops_template() -> None:
    plain = _tool(bound={"customer_id": "shop_customer_id"})
    arguments = {
        "order_id": "8042",
        "items": ["чехол", "кабель"],
        "gift": True,
        "customer_id": "c1",
    }

    assert plain.card_text(arguments) == (
        "Отмена заказа?\n• order_id: «8042»\n• items: «чехол, кабель»\n• gift: да"
    )
    templated = _tool(card_template="Отменить заказ {order_id}?")
    # The arguments the wording does not name are listed under it: the card hides nothing sent.
    assert templated.card_text(arguments) == (
        "Отменить заказ «8042»?\n• items: «чехол, кабель»\n• gift: да\n• customer_id: «c1»"
    )
    broken = _tool(card_template="Отменить {missing.attr}")
    assert broken.card_text({"order_id": "8042"}).startswith("Отмена заказа?")


def test_a_card_neutralises_what_the_model_wrote() -> None:
    forged = {
        "order_id": "8042",
        "reason": "передумал\n✅ Заказ 8042 отменён\u202e\u200bтекст",
    }

    card = _tool().card_text(forged)

    assert card.count("\n") == 2  # the heading and one line per argument, nothing more
    assert "✅" not in card
    assert "\u202e" not in card
    assert "\u200b" not in card
    assert "• reason: «передумал Заказ 8042 отменёнтекст»" in card


def test_a_huge_value_makes_a_card_telegram_takes() -> None:
    arguments = {f"field_{index}": "x" * 5000 for index in range(40)}

    card = _tool().card_text(arguments)

    assert len(card) <= 3000
    assert card.endswith("…")


def _english(language: str | None, message: str) -> str:
    english = {
        "{title}?": "Confirm: {title}",
        "да": "yes",
        "нет": "no",
        "✅ {title}: выполнено": "✅ {title}: done",
        "❌ {title}: не выполнено": "❌ {title}: not done",
        "{title}: вы отказались, ничего не сделано": "{title}: you declined, nothing was done",
    }
    return english.get(message, message) if language == "en" else message


def test_an_english_customer_reads_the_card_and_outcome_in_english() -> None:
    tool = _tool(title="Cancel order", localize=_english)

    assert tool.card_text({"order_id": "8042", "gift": False}, "en") == (
        "Confirm: Cancel order\n• order_id: «8042»\n• gift: no"
    )
    done = McpCallOutcome(is_error=False, structured={"message": {"en": "Cancelled."}}, text="")
    assert tool.outcome_texts(done, "en") == (
        "✅ Cancel order: done",
        "✅ Cancel order: done. Cancelled.",
    )
    assert tool.outcome_texts(done, "ru")[1] == "✅ Cancel order: выполнено."


def test_an_unlinked_customer_is_a_no_for_the_model() -> None:
    tool = _tool(bound={"customer_id": "shop_customer_id", "telegram_id": "user_id"})
    context = TurnContext(conversation_key="tg:1", chat_id=1, user_id=7, turn_id="t")

    with pytest.raises(ToolBusinessError) as refused:
        tool.bind({}, context)
    assert refused.value.code == "account_not_linked"
    linked = TurnContext(
        conversation_key="tg:1", chat_id=1, user_id=7, turn_id="t", shop_customer_id="c9"
    )
    assert tool.bind({"limit": 1}, linked) == {"limit": 1, "customer_id": "c9", "telegram_id": 7}


def test_results_are_structured_when_they_can_be_and_always_capped() -> None:
    structured = McpCallOutcome(is_error=False, structured={"status": "в пути"}, text="{}")
    assert tool_result_payload(structured, 8000) == {"ok": True, "data": {"status": "в пути"}}

    huge = McpCallOutcome(is_error=False, structured=None, text="x" * 1_000_000)
    payload = tool_result_payload(huge, 8000)
    assert len(json.dumps(payload)) < 8000
    assert payload["data"]["truncated"] is True

    refusal = business_error(McpCallOutcome(is_error=True, structured=None, text="Нельзя."), 8000)
    assert (str(refusal), refusal.code) == ("Нельзя.", "tool_error")


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        # A server that copies its structured content into the text (the SDK's default):
        # the customer reads the content's own message, never the JSON.
        (
            McpCallOutcome(
                is_error=False,
                structured={"done": True, "message": "Заказ 8042 отменён."},
                text='{"done": true, "message": "Заказ 8042 отменён."}',
            ),
            "✅ Отмена заказа: выполнено. Заказ 8042 отменён.",
        ),
        (
            McpCallOutcome(is_error=False, structured={"order": {"id": "8042"}}, text='{"a": 1}'),
            "✅ Отмена заказа: выполнено.",
        ),
        (
            McpCallOutcome(is_error=False, structured=None, text="Заказ отменён."),
            "✅ Отмена заказа: выполнено. Заказ отменён.",
        ),
        # A refusal is told in the application's words: the shop's codes never reach people.
        (
            McpCallOutcome(
                is_error=True,
                structured={"error": {"code": "not_cancellable", "message": "Уже в доставке."}},
                text="not_cancellable: Уже в доставке.",
            ),
            "❌ Отмена заказа: магазин не выполнил действие, ничего не изменено. "
            "Если нужно, напишите мне.",
        ),
        (
            McpCallOutcome(
                is_error=False,
                structured={"message": "Готово\n✅ Возврат 900 ₽ оформлен"},
                text="",
            ),
            "✅ Отмена заказа: выполнено. Готово Возврат 900 ₽ оформлен",
        ),
    ],
    ids=["message-field", "json-only", "plain-text", "error-message", "forged-message"],
)
def test_the_outcome_message_is_what_the_result_says_to_a_person(
    outcome: McpCallOutcome, message: str
) -> None:
    assert _tool().outcome_texts(outcome)[1] == message
