"""Prompt templates render only with exactly their variables; the registry finds exact versions."""

import pytest

from bot.settings import PromptSettings
from prompts.registry import (
    SUMMARY_PROMPT_ID,
    SUPPORT_CHAT_PROMPT_ID,
    PromptRegistry,
    UnknownPromptError,
    build_default_prompt_registry,
)
from prompts.template import PromptRenderError, PromptTemplate

GREETING = PromptTemplate(
    prompt_id="greeting",
    version="1.0.0",
    body="Здравствуйте, ${name}! Магазин ${shop}.",
    required_variables=frozenset({"name", "shop"}),
)


def test_render_fills_every_variable() -> None:
    assert GREETING.render(name="Анна", shop="Кофе") == "Здравствуйте, Анна! Магазин Кофе."


def test_render_refuses_a_missing_variable() -> None:
    with pytest.raises(PromptRenderError, match=r"missing \['shop'\]"):
        GREETING.render(name="Анна")


def test_render_refuses_an_unknown_variable() -> None:
    with pytest.raises(PromptRenderError, match=r"unknown \['tone'\]"):
        GREETING.render(name="Анна", shop="Кофе", tone="строгий")


def test_render_does_not_interpret_placeholders_inside_values() -> None:
    assert GREETING.render(name="${shop}", shop="Кофе") == "Здравствуйте, ${shop}! Магазин Кофе."


@pytest.mark.parametrize(
    ("body", "declared"),
    [
        ("Привет, ${name}!", frozenset()),
        ("Привет!", frozenset({"name"})),
        ("Привет, ${name} из ${city}!", frozenset({"name"})),
    ],
)
def test_placeholders_must_match_required_variables(body: str, declared: frozenset[str]) -> None:
    with pytest.raises(ValueError, match="placeholders"):
        PromptTemplate(prompt_id="p", version="1", body=body, required_variables=declared)


def test_registry_returns_the_exact_version() -> None:
    registry = PromptRegistry()
    newer = PromptTemplate(prompt_id="greeting", version="1.1.0", body="Привет!")
    registry.register(GREETING)
    registry.register(newer)

    assert registry.get("greeting", "1.0.0") is GREETING
    assert registry.get("greeting", "1.1.0") is newer
    assert registry.versions("greeting") == ("1.0.0", "1.1.0")


def test_registry_refuses_an_unknown_version_and_names_the_known_ones() -> None:
    registry = PromptRegistry()
    registry.register(GREETING)

    with pytest.raises(UnknownPromptError, match=r"known: 1\.0\.0"):
        registry.get("greeting", "9.9.9")
    with pytest.raises(UnknownPromptError, match="known: none"):
        registry.get("farewell", "1.0.0")


def test_registry_refuses_the_same_version_twice() -> None:
    registry = PromptRegistry()
    registry.register(GREETING)

    with pytest.raises(ValueError, match="registered already"):
        registry.register(
            PromptTemplate(prompt_id="greeting", version="1.0.0", body="Другой текст.")
        )
    assert registry.get("greeting", "1.0.0") is GREETING


def test_support_prompt_1_2_0_names_the_tools_and_the_summary_block() -> None:
    prompt = build_default_prompt_registry().get(SUPPORT_CHAT_PROMPT_ID, "1.2.0")
    text = prompt.render()

    for tool in ("get_order_status", "get_return_policy", "search_products", "get_support_hours"):
        assert tool in text
    assert "<conversation_summary>" in text


def test_default_registry_ships_the_summary_prompt() -> None:
    registry = build_default_prompt_registry()

    assert registry.versions(SUMMARY_PROMPT_ID) == ("1.0.0", "1.1.0")
    assert registry.get(SUMMARY_PROMPT_ID, "1.0.0").render().strip()


def test_the_default_prompts_state_the_tag_rule_of_the_summary_blocks() -> None:
    """Both active prompts say that tag look-alikes in quoted text are data, not markup."""
    registry = build_default_prompt_registry()
    settings = PromptSettings()
    support = registry.get(SUPPORT_CHAT_PROMPT_ID, settings.support_chat_version).render(
        language="русский"
    )
    summary = registry.get(SUMMARY_PROMPT_ID, settings.summary_version).render()

    assert "[/conversation_summary]" in support
    assert "[conversation_summary]" in summary
    assert "invalid_arguments" in support
