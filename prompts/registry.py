"""All prompt versions the application knows, and which one is active."""

from collections.abc import Mapping
from importlib.resources import files

from prompts.template import PromptTemplate

SUPPORT_CHAT_PROMPT_ID = "support_chat"
SUMMARY_PROMPT_ID = "conversation_summary"
ANALYSIS_PROMPT_ID = "request_analysis"
STAFF_SUGGESTION_PROMPT_ID = "staff_suggestion"

# Per prompt id: the package holding its bodies (``<version>.txt``, package data of the
# wheel) and the versions shipped. Sessions and audit entries name the version that
# wrote them, so a shipped body is never edited: a change is a new version.
_SHIPPED: Mapping[str, tuple[str, tuple[str, ...]]] = {
    SUPPORT_CHAT_PROMPT_ID: (
        "prompts.support_chat",
        ("1.2.0", "1.3.0", "1.4.0", "1.5.0", "1.6.0", "1.7.0", "1.8.0"),
    ),
    SUMMARY_PROMPT_ID: ("prompts.summary", ("1.0.0", "1.1.0")),
    ANALYSIS_PROMPT_ID: ("prompts.analysis", ("1.0.0", "1.1.0")),
    STAFF_SUGGESTION_PROMPT_ID: ("prompts.staff_suggestion", ("1.0.0",)),
}
# Variables a prompt's bodies take (``${name}``), per prompt id.
_VARIABLES: Mapping[str, frozenset[str]] = {
    ANALYSIS_PROMPT_ID: frozenset({"categories"}),
    STAFF_SUGGESTION_PROMPT_ID: frozenset({"language"}),
}
# Per prompt id and version, where they differ from the id's: the customer's language
# (its name, filled in per turn) from support chat 1.7.0 on.
_VERSION_VARIABLES: Mapping[tuple[str, str], frozenset[str]] = {
    (SUPPORT_CHAT_PROMPT_ID, "1.7.0"): frozenset({"language"}),
    (SUPPORT_CHAT_PROMPT_ID, "1.8.0"): frozenset({"language"}),
}


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
    for prompt_id, (package, versions) in _SHIPPED.items():
        for version in versions:
            body = files(package).joinpath(f"{version}.txt").read_text(encoding="utf-8")
            # The file ends with a newline; the body does not.
            registry.register(
                PromptTemplate(
                    prompt_id=prompt_id,
                    version=version,
                    body=body.strip(),
                    required_variables=_VERSION_VARIABLES.get(
                        (prompt_id, version), _VARIABLES.get(prompt_id, frozenset())
                    ),
                )
            )
    return registry
