"""All prompt versions the application knows, and which one is active."""

from prompts.summary.v1_0_0 import SUMMARY_PROMPT_V1_0_0
from prompts.summary.v1_1_0 import SUMMARY_PROMPT_V1_1_0
from prompts.support_chat.v1_2_0 import SUPPORT_CHAT_PROMPT_V1_2_0
from prompts.support_chat.v1_3_0 import SUPPORT_CHAT_PROMPT_V1_3_0
from prompts.support_chat.v1_4_0 import SUPPORT_CHAT_PROMPT_V1_4_0
from prompts.support_chat.v1_5_0 import SUPPORT_CHAT_PROMPT_V1_5_0
from prompts.template import PromptTemplate

SUPPORT_CHAT_PROMPT_ID = "support_chat"
SUMMARY_PROMPT_ID = "conversation_summary"


class UnknownPromptError(LookupError):
    """No prompt with that id and version is registered."""


class PromptRegistry:
    """Prompt versions per prompt id."""

    def __init__(self) -> None:
        self._prompts: dict[str, dict[str, PromptTemplate]] = {}

    def register(self, prompt: PromptTemplate) -> None:
        """Add a version; registering the same id and version twice is refused."""
        versions = self._prompts.setdefault(prompt.prompt_id, {})
        if prompt.version in versions:
            raise ValueError(f"prompt {prompt.prompt_id} {prompt.version} is registered already")
        versions[prompt.version] = prompt

    def get(self, prompt_id: str, version: str) -> PromptTemplate:
        """The exact version asked for."""
        try:
            return self._prompts[prompt_id][version]
        except KeyError as error:
            known = ", ".join(sorted(self._prompts.get(prompt_id, {}))) or "none"
            raise UnknownPromptError(
                f"prompt {prompt_id!r} has no version {version!r} (known: {known})"
            ) from error

    def versions(self, prompt_id: str) -> tuple[str, ...]:
        """Known versions of one prompt."""
        return tuple(sorted(self._prompts.get(prompt_id, {})))


def build_default_prompt_registry() -> PromptRegistry:
    """A new registry with every shipped prompt version."""
    registry = PromptRegistry()
    registry.register(SUPPORT_CHAT_PROMPT_V1_2_0)
    registry.register(SUPPORT_CHAT_PROMPT_V1_3_0)
    registry.register(SUPPORT_CHAT_PROMPT_V1_4_0)
    registry.register(SUPPORT_CHAT_PROMPT_V1_5_0)
    registry.register(SUMMARY_PROMPT_V1_0_0)
    registry.register(SUMMARY_PROMPT_V1_1_0)
    return registry
