"""A prompt body with a stable id, a version and the variables it needs."""

from dataclasses import dataclass
from string import Template


class PromptRenderError(ValueError):
    """Variables passed to a template do not match the ones it declares."""


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """An immutable prompt; ``${name}`` placeholders must equal ``required_variables``."""

    prompt_id: str
    version: str
    body: str
    required_variables: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        found = set(Template(self.body).get_identifiers())
        if found != set(self.required_variables):
            raise ValueError(
                f"prompt {self.prompt_id} {self.version}: placeholders {sorted(found)} "
                f"differ from required_variables {sorted(self.required_variables)}"
            )

    def render(self, **variables: str) -> str:
        """The body with every variable filled; missing or unknown ones are refused."""
        missing = self.required_variables - variables.keys()
        unknown = variables.keys() - self.required_variables
        if missing or unknown:
            raise PromptRenderError(
                f"prompt {self.prompt_id} {self.version}: "
                f"missing {sorted(missing)}, unknown {sorted(unknown)}"
            )
        return Template(self.body).substitute(variables)
