"""What a draft says while tools run: the tool's purpose, never its arguments."""

from collections.abc import Sequence

from bot.customer_texts import DRAFT_DEFAULT_LABEL, DRAFT_TOOL_LABELS, shown
from bot.language.texts import Texts


def tools_label(names: Sequence[str], texts: Texts | None = None) -> str:
    """The draft text while ``names`` run: the first known tool's purpose, in ``texts``'
    language (as written, Russian, without one)."""
    label = next(
        (DRAFT_TOOL_LABELS[name] for name in names if name in DRAFT_TOOL_LABELS),
        DRAFT_DEFAULT_LABEL,
    )
    return shown(texts, label)
