"""Support chat prompt 1.4.0: policy and how-to answers come from the help center, named."""

from bot.settings import PromptSettings
from prompts.registry import SUPPORT_CHAT_PROMPT_ID, build_default_prompt_registry


def test_the_grounding_prompt_is_the_default_and_keeps_the_earlier_rules() -> None:
    registry = build_default_prompt_registry()
    default = PromptSettings(_env_file=None).support_chat_version
    # 1.7.0 (1.5.0, actions the customer confirms, in the customer's language) keeps
    # 1.4.0's grounding rules.
    assert default == "1.7.0"
    text = registry.get(SUPPORT_CHAT_PROMPT_ID, default).render(language="русский")
    earlier = registry.get(SUPPORT_CHAT_PROMPT_ID, "1.3.0").render()
    assert "search_help_center" in text
    assert "search_help_center" not in earlier
    for tool in ("get_order_status", "get_return_policy", "search_products", "get_support_hours"):
        assert tool in text
    # Names the article and its URL; says so and offers a person when nothing is found.
    assert "назови статью" in text
    assert "url" in text
    assert "пустой results" in text
    assert "сотрудником" in text
    assert "[/conversation_summary]" in text
