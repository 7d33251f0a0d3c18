"""Support chat prompt 1.5.0: write actions only through the tools, confirmed by a button."""

from prompts.registry import SUPPORT_CHAT_PROMPT_ID, build_default_prompt_registry


def test_the_actions_prompt_names_the_tools_the_button_and_the_outcome_rule() -> None:
    registry = build_default_prompt_registry()
    text = registry.get(SUPPORT_CHAT_PROMPT_ID, "1.5.0").render()
    earlier = registry.get(SUPPORT_CHAT_PROMPT_ID, "1.4.0").render()
    for tool in ("cancel_order", "request_return", "change_delivery_address"):
        assert tool in text
        assert tool not in earlier
    assert "по одному действию за раз" in text
    assert "awaiting_confirmation" in text
    assert "«Подтвердить»" in text
    assert "пока его итог не появился в истории" in text
    # The read-only promise of 1.4.0 is gone: it would contradict the write tools.
    assert "только читают данные" in earlier
    assert "только читают данные" not in text


def test_the_prompt_for_a_shops_own_tools_names_no_tool_and_keeps_the_rules() -> None:
    registry = build_default_prompt_registry()
    text = registry.get(SUPPORT_CHAT_PROMPT_ID, "1.6.0").render()
    demo = registry.get(SUPPORT_CHAT_PROMPT_ID, "1.5.0").render()
    for tool in (
        "get_order_status",
        "get_return_policy",
        "search_products",
        "get_support_hours",
        "cancel_order",
        "request_return",
        "change_delivery_address",
    ):
        assert tool in demo
        assert tool not in text
    # The help center, the button, the outcome and the summary rules stay as in 1.5.0.
    for rule in (
        "search_help_center",
        "по одному действию за раз",
        "awaiting_confirmation",
        "«Подтвердить»",
        "пока его итог не появился в истории",
        "[/conversation_summary]",
    ):
        assert rule in text
    assert "/link" in text


def test_1_7_and_1_8_are_1_5_and_1_6_in_the_customers_language() -> None:
    registry = build_default_prompt_registry()
    for new, old in (("1.7.0", "1.5.0"), ("1.8.0", "1.6.0")):
        prompt = registry.get(SUPPORT_CHAT_PROMPT_ID, new)
        assert prompt.required_variables == frozenset({"language"})
        english = prompt.render(language="английский")
        assert "на языке клиента: английский" in english
        # Tool results and articles in another language are retold, not quoted.
        assert "не цитируй их дословно" in english
        before = registry.get(SUPPORT_CHAT_PROMPT_ID, old).render()
        assert "по-русски" in before
        assert "по-русски" not in english
        # Every other rule is the earlier version's.
        kept = [line for line in before.splitlines() if "по-русски" not in line]
        assert all(line in english.splitlines() for line in kept)
