"""Model Markdown to Telegram text plus entities, cut into pieces that fit one message.

The model writes Markdown; Telegram's MarkdownV2 needs a dozen characters
escaped and rejects the whole message for one mistake. Instead the text is
converted by telegramify-markdown into plain text and ``MessageEntity`` ranges
(nothing to escape, nothing to reject for syntax). If the converter fails,
the text goes as it is, without formatting.
"""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

import telegramify_markdown
from aiogram.types import MessageEntity

from bot.telegram.text_split import TELEGRAM_TEXT_LIMIT, split_spans, utf16_length, utf16_units

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FormattedText:
    """Plain text and the entities that format it (offsets in UTF-16 code units)."""

    text: str
    entities: tuple[MessageEntity, ...] = ()


def markdown_to_entities(markdown: str) -> FormattedText:
    """Convert model Markdown; on any converter failure keep the raw text unformatted."""
    try:
        text, entities = telegramify_markdown.convert(markdown)
        converted = tuple(MessageEntity.model_validate(entity.to_dict()) for entity in entities)
    # The converter is a third-party parser: whatever it raises, the customer still
    # gets the answer, only without formatting.
    except Exception:
        # The trace says which construct broke the converter; the answer text is not logged.
        logger.warning(
            "Markdown conversion failed; sending the answer as plain text", exc_info=True
        )
        return FormattedText(markdown)
    if not text.strip():
        return FormattedText(markdown)
    return FormattedText(text, converted)


def split_formatted(
    formatted: FormattedText, limit: int = TELEGRAM_TEXT_LIMIT
) -> list[FormattedText]:
    """Pieces of at most ``limit`` units; entities crossing a cut are clipped to each side."""
    text = formatted.text
    spans = split_spans(text, limit)
    if not formatted.entities:
        return [FormattedText(text[start:end]) for start, end in spans]
    offsets: Mapping[int, int] | Sequence[int]
    if spans == [(0, len(text))]:
        # One piece, the whole text (the usual answer): its bounds need no walk.
        offsets = {0: 0, len(text): utf16_length(text)}
    else:
        offsets = [0, *accumulate(utf16_units(char) for char in text)]
    pieces = []
    for start, end in spans:
        low, high = offsets[start], offsets[end]
        entities = []
        for entity in formatted.entities:
            clipped_start = max(entity.offset, low)
            clipped_end = min(entity.offset + entity.length, high)
            if clipped_end > clipped_start:
                entities.append(
                    entity.model_copy(
                        update={
                            "offset": clipped_start - low,
                            "length": clipped_end - clipped_start,
                        }
                    )
                )
        pieces.append(FormattedText(text[start:end], tuple(entities)))
    return pieces
