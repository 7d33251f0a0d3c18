"""What the customer sent for a turn: text, a voice message (transcribed) or a photo."""

from dataclasses import dataclass
from typing import Literal

InputKind = Literal["text", "voice", "photo"]
"""How the customer's message came: typed, spoken (and transcribed), or a photo."""


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


TEXT_INPUT = TurnInput()
"""A typed message."""
