"""What a draft says while tools run: the tool's purpose, never its arguments."""

from collections.abc import Sequence

from bot.customer_texts import DRAFT_DEFAULT_LABEL, DRAFT_TOOL_LABELS


def tools_label(names: Sequence[str]) -> str:
    """The draft text while ``names`` run: the first known tool's purpose."""
    return next(
        (DRAFT_TOOL_LABELS[name] for name in names if name in DRAFT_TOOL_LABELS),
        DRAFT_DEFAULT_LABEL,
    )
