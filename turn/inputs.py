"""What the customer sent for a turn: text, a voice message (transcribed) or a photo."""

from dataclasses import dataclass, field
from typing import Literal

InputKind = Literal["text", "voice", "photo"]
"""How the customer's message came: typed, spoken (and transcribed), or a photo."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagePart:
    """An image the customer sent, for this turn's model request only.

    ``file_id`` (Telegram's) is what the history keeps; ``data_url`` (the image's
    bytes, base64) goes to the model once and is never stored, logged or audited.
    """

    file_id: str
    data_url: str = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnInput:
    """The kind of the turn's message and, for a voice message, what its transcription took.

    Never the words themselves: this goes into the audit.
    """

    kind: InputKind = "text"
    # A voice message's length as Telegram gives it.
    voice_seconds: int | None = None
    # How long the transcription request took.
    transcription_ms: float | None = None
    # A photo's images (an album's, in order); never audited.
    images: tuple[ImagePart, ...] = field(default=(), repr=False)
    # For the model after the images (never stored or audited): that some of the album's
    # images were left out or taken smaller to fit the turn's total, in the customer's language.
    images_note: str = field(default="", repr=False)


TEXT_INPUT = TurnInput()
"""A typed message."""
