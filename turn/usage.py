"""Token usage of model calls, summed in one place."""

from collections.abc import Iterable
from dataclasses import dataclass


def _add(left: int | None, right: int | None) -> int | None:
    # A partial sum would look exact: unknown stays unknown.
    return None if left is None or right is None else left + right


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Prompt, completion and total tokens; each ``None`` when a server did not report it."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            prompt_tokens=_add(self.prompt_tokens, other.prompt_tokens),
            completion_tokens=_add(self.completion_tokens, other.completion_tokens),
            total_tokens=_add(self.total_tokens, other.total_tokens),
        )

    @classmethod
    def total(cls, usages: Iterable["Usage"]) -> "Usage":
        """The sum of ``usages``; all ``None`` when there are none (nothing was measured)."""
        result: Usage | None = None
        for usage in usages:
            result = usage if result is None else result + usage
        return result or cls()
